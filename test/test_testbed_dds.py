"""DDS discovery between two hosts of the test bed (tools/testbed.sh), 20 ms RTT apart: which ROS 2 settings
let a node on the "GPU box" hear the "rig PC" (docs/scale-out.md, "The ROS graph across hosts"). Real
rclpy nodes over the RMW this environment has (Fast DDS), real multicast through the bed's switch: with
``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET`` they find each other; with ``LOCALHOST`` they do not, unless each
names the other in ``ROS_STATIC_PEERS``; ``OFF`` ignores the peers too."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from testbed import PY, Testbed, bed

pytestmark = pytest.mark.timeout(300)

RIG, GPU_BOX = 1, 2
#: Silence this long after the talker started counts as "not discovered" (discovery takes ~3 s when it works).
WINDOW_S = 15
TALKER = """
import sys, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("rfb_talker")
pub = node.create_publisher(String, sys.argv[1], 10)
node.create_timer(0.1, lambda: pub.publish(String(data="from the rig")))
rclpy.spin(node)
"""
LISTENER = """
import sys, time, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("rfb_listener")
got = []
node.create_subscription(String, sys.argv[1], lambda m: got.append(m.data), 10)
end = time.monotonic() + float(sys.argv[2])
while not got and time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
print(got[0] if got else "nothing")
"""


@pytest.fixture(scope="module")
def two() -> Iterator[Testbed]:
    for testbed in bed(2):
        testbed.shape(GPU_BOX, delay_ms=10)  # RTT 20 ms between the hosts
        yield testbed


@pytest.mark.parametrize(("mode", "heard"), [
    ("SUBNET", True),
    ("LOCALHOST", False),
    ("LOCALHOST+peers", True),
    ("OFF+peers", False),
])
def test_discovery_across_hosts(two: Testbed, tmp_path: Path, mode: str, heard: bool) -> None:
    discovery_range, _, peers = mode.partition("+")

    def env(host: int, other: int) -> dict[str, str]:
        return {"ROS_AUTOMATIC_DISCOVERY_RANGE": discovery_range, "ROS_STATIC_PEERS": two.ip(other) if peers else ""}

    topic = "rfb_probe_" + mode.replace("+", "_").lower()  # a topic per case: a talker left over is not heard
    # the talker ends itself (`timeout`), whatever happens to the test; the bed's teardown is the backstop
    talker = two.popen(RIG, "timeout", str(WINDOW_S + 30), PY, "-c", TALKER, topic, log=tmp_path / "talker.log",
                       **env(RIG, GPU_BOX))
    try:
        heard_it = two.run(GPU_BOX, PY, "-c", LISTENER, topic, str(WINDOW_S), timeout=120, **env(GPU_BOX, RIG))
    finally:
        talker.terminate()
        with suppress(subprocess.TimeoutExpired):
            talker.wait(60)
    assert heard_it.returncode == 0, heard_it.stderr[-2000:]
    assert heard_it.stdout.strip().splitlines()[-1] == ("from the rig" if heard else "nothing"), heard_it.stdout
