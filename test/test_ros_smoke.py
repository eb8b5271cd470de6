"""The ROS-graph smoke of ``make test-matrix`` (and of the default suite): one trial through ``robofollow bringup``
on each graph scores as ``robofollow eval`` scores it headless.

- ``bringup sim --policy oracle``: the graph runs the same physics as the headless evaluator, so the oracle's
  verdict (the task done: IS and ES 1.0) must be the same, stage by stage (dry_run.compare_verdicts).
- ``bringup mock --policy hold``: the mock's objects never move (test_mock_verdicts.py), so the only verdict it
  shares with physics is one where nothing moves; ``hold`` is that case, and it still runs every node, the
  trial protocol, the stage monitor and the results store end to end.

Each run is a process per node over real DDS, as users run it; in .venv-py310, .venv-py312 and .venv-kilted this
is what says that the graph works on that Python and that ROS 2 release (tools/test_matrix.sh).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.dry_run import compare_verdicts

TASK = "L0_pickup_red_cylinder"
pytestmark = pytest.mark.timeout(400)


def _robofollow(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"robofollow {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize(("graph", "policy"), [("sim", "oracle"), ("mock", "hold")])
def test_one_trial_over_ros_scores_as_headless(tmp_path: Path, graph: str, policy: str) -> None:
    trial = ("--policy", policy, "--tasks", TASK, "--rounds", "1")
    no_render = ("--no-render",) if graph == "sim" else ()  # the mock graph renders nothing
    _robofollow("bringup", graph, *trial, *no_render, "--exit-when-done", "--foxglove-port", "0",
                "--output", str(tmp_path / "ros"))
    _robofollow("eval", *trial, "--output", str(tmp_path / "headless"))
    ros = json.loads((tmp_path / "ros" / "results.json").read_text())
    headless = json.loads((tmp_path / "headless" / "results.json").read_text())
    assert [r["task"] for r in ros] == [TASK]
    assert compare_verdicts(ros, headless) == (1, [])
    expected = 1.0 if policy == "oracle" else 0.0
    assert (ros[0]["intent_score"], ros[0]["exec_score"]) == (expected, expected), ros[0]
