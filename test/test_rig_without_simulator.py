"""No simulator on the rig: with ``import sapien`` made impossible (as on a rig without it), every node of
the rig profile starts and the mock profile runs its trials end to end (``robofollow bringup mock``,
the oracle planning with the NumPy kinematics, the operator's layout picture drawn without rendering)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCKER = '''
import sys


class _NoSimulator:
    """A rig without SAPIEN: importing it fails as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "sapien" or name.startswith("sapien."):
            raise ImportError(f"No module named {name!r} (blocked: a rig without the simulator)")
        return None


sys.meta_path.insert(0, _NoSimulator())
'''


@pytest.fixture
def no_simulator(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import sapien (a ``sitecustomize`` on PYTHONPATH blocks it)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    test_dir = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), test_dir, os.environ.get("PYTHONPATH", "")]))
    blocked = subprocess.run([sys.executable, "-c", "import sapien"], capture_output=True, text=True, env=env)
    assert blocked.returncode != 0 and "blocked" in blocked.stderr  # the block works
    return env


def test_every_rig_node_starts_without_the_simulator(no_simulator, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from robofollow_ros.bringup import build_nodes, load_profile, with_overrides
        from ros_harness import RosHarness

        profile = with_overrides(load_profile("rig"), policy="oracle", output={str(tmp_path / "run")!r},
                                 extra={{"foxglove_node": {{"port": 0}}}})
        with RosHarness() as ros:
            nodes = build_nodes(profile, ros.context)
            names = sorted(n.get_name() for n in nodes)
            for node in nodes:
                node.destroy_node()
        print(",".join(names))
        print("sapien loaded" if "sapien" in sys.modules else "sapien absent")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=no_simulator)
    assert done.returncode == 0, done.stderr[-3000:]
    names, sapien = done.stdout.strip().splitlines()[-2:]
    assert names.split(",") == sorted(["arm_bridge_node", "robot_state_node", "perception_node", "policy_node",
                                       "stage_monitor_node", "trial_manager_node", "foxglove_node"])
    assert sapien == "sapien absent"


def test_bringup_mock_completes_its_trials_without_the_simulator(no_simulator, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "bringup", "mock", "--policy", "oracle",
                           "--tasks", "L0_pickup_red_cylinder,L0_pickup_yellow_block_1_left", "--rounds", "1",
                           "--max-steps", "2", "--foxglove-port", "0", "--output", str(out)],
                          capture_output=True, text=True, timeout=300, env=no_simulator)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "oracle over ROS" in done.stdout
    results = json.loads((out / "results.json").read_text())
    assert [r["task"] for r in results] == ["L0_pickup_red_cylinder", "L0_pickup_yellow_block_1_left"]  # as given
    assert all("policy_error" not in r and r["policy_steps"] == 2 for r in results)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert len(list((out / "layouts").glob("*.png"))) == 2 and len(list((out / "mcap").glob("*.mcap"))) == 2
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr
