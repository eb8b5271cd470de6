"""``tools/testbed.sh``: hosts that are separate machines as far as the network and the process table go,
links that are as slow and lossy as asked, a cable that can be pulled and plugged back, nothing added to
the machine's own network, and nothing left behind by ``down``, even after a crash."""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import PREFIX, SCRIPT, Testbed, _script, bed, unavailable
from waiting import poll_until

pytestmark = pytest.mark.timeout(300)

ECHO_SERVER = """
import socket
s = socket.create_server(("0.0.0.0", 7000))
while True:
    c, _ = s.accept()
    with c:
        while (d := c.recv(65536)):
            c.sendall(d)
"""
#: Connects (retrying until the server listens, 60 s at most), then prints 20 round-trip times in ms.
ECHO_CLIENT = """
import socket, sys, time
deadline = time.monotonic() + 60
while True:
    try:
        c = socket.create_connection((sys.argv[1], 7000), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(20):
    t = time.monotonic(); c.sendall(b"x"); c.recv(1); print((time.monotonic() - t) * 1000)
"""


@pytest.fixture()
def three(tmp_path: Path) -> Iterator[Testbed]:
    yield from bed(3)


def rtts(testbed: Testbed, client: int, server: int) -> list[float]:
    done = testbed.run(client, "python3", "-c", ECHO_CLIENT, testbed.ip(server), timeout=120)
    assert done.returncode == 0, done.stderr
    return [float(line) for line in done.stdout.split()]


def our_traces() -> tuple[str, str, bool]:
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return ("\n".join(n for n in namespaces.splitlines() if n.startswith(f"{PREFIX}-")),
            "\n".join(p for p in processes.splitlines() if PREFIX in p and "ps -eo" not in p),
            Path(f"/run/{PREFIX}-testbed").exists())


def test_hosts_are_machines_and_links_are_shaped_and_pulled(three: Testbed, tmp_path: Path) -> None:
    # separate process tables: each host sees its own anchor as PID 1 and nothing of the others
    ps = three.run(1, "ps", "-eo", "pid,args", "--no-headers").stdout
    assert ps.split("\n")[0].split(None, 1) == ["1", f"rfb-anchor {PREFIX} h1 infinity"], ps
    assert f"{PREFIX} h2" not in ps
    addresses = three.run(2, "ip", "-o", "-4", "addr", "show", "dev", "eth0").stdout
    assert f"inet {three.ip(2)}/24" in addresses, addresses

    for host in (2, 3):
        three.popen(host, "python3", "-c", ECHO_SERVER, log=tmp_path / f"echo{host}.log")
    three.shape(2, delay_ms=10, jitter_ms=2.5)  # RTT 20 +- 5 ms between host 2 and a clean host
    shaped, clean = rtts(three, 1, 2), rtts(three, 1, 3)
    assert 15 <= statistics.median(shaped) <= 35 and min(shaped) >= 14, shaped
    # Clean: under 10 ms, well below the shaped link's 14 (a loaded machine's user-space switch gave 5.6 ms)
    assert statistics.median(clean) < 10, clean

    three.link(3, up=False)
    carrier = three.run(3, "ip", "-o", "link", "show", "dev", "eth0").stdout
    assert "NO-CARRIER" in carrier, carrier
    unplugged = three.run(1, "python3", "-c", "import socket, sys; socket.create_connection((sys.argv[1], 7000), 2)",
                          three.ip(3), timeout=60)
    assert unplugged.returncode != 0 and "timed out" in unplugged.stderr, unplugged.stderr
    three.link(3, up=True)
    assert statistics.median(rtts(three, 1, 3)) < 10  # the same server, reached again, clean


def test_the_machines_own_network_is_untouched_and_down_leaves_nothing_even_after_a_crash(tmp_path: Path) -> None:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    links_before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    testbed = Testbed(2)
    try:
        assert subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout == links_before
        namespaces, processes, state = our_traces()
        assert namespaces.count(PREFIX) == 3 and "rfb-anchor" in processes and state
        # a crash: the switch dies, a host's process keeps running, and up runs again over the debris
        straggler = testbed.popen(2, "sleep", "600", log=tmp_path / "sleep.log")
        switch = int(Path(f"/run/{PREFIX}-testbed/switch.pid").read_text())
        subprocess.run(["kill", "-9", str(switch)], check=True)
        assert _script("shape", "1", "--delay", "1").returncode != 0
        again = _script("up", "2")
        assert again.returncode == 0, again.stderr  # rebuilt over the debris
        assert poll_until(lambda: straggler.poll() is not None, 30)  # the old host's process ended with it
        straggler = testbed.popen(1, "sleep", "600", log=tmp_path / "sleep.log")
        assert poll_until(lambda: "sleep 600" in testbed.run(1, "ps", "-eo", "args").stdout, 30)
    finally:
        testbed.down()
    assert poll_until(lambda: straggler.poll() is not None, 30)
    assert our_traces() == ("", "", False)
    assert subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout == links_before
    assert _script("down").returncode == 0  # nothing to remove is not an error


@pytest.mark.parametrize(("args", "message"), [
    (["up", "0"], "N must be a number 1..99, not '0'"),
    (["up", "2", "--delay", "-3"], "--delay must be a non-negative number, not '-3'"),
    (["up", "2", "--loss", "150"], "--loss must be at most 100, not '150'"),
    (["up", "2", "--rate", "1"], "unknown option '--rate'"),
    (["link", "1", "sideways"], "host 1 does not exist"),
    (["exec", "1", "true"], "host 1 does not exist"),
])
def test_bad_input_is_one_line_naming_the_value(args: list[str], message: str) -> None:
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "RFB_PREFIX": "rfbnone"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
