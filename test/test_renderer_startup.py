"""The renderer's start-up is not charged to a trial (issue 38): a rendered ``robofollow eval`` builds the renderer
(its first picture, of a throw-away scene) in each worker before the first trial's clock starts, and records the
seconds it took in run.json (``renderer_startup_s``). The first trial's ``wall_s`` is then as long as the others',
not longer by that figure. A fresh process (a subprocess), so that the renderer really is built in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TASK = "L0_pickup_red_cylinder"

pytestmark = pytest.mark.timeout(400)


@pytest.mark.parametrize("backend", ["inline", "local"])
def test_the_first_trial_does_not_pay_for_the_renderer(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "eval", "--policy", "hold", "--tasks", TASK,
                           "--rounds", "3", "--max-steps", "2", "--actions-per-step", "5", "--backend", backend,
                           "--output", str(out)], capture_output=True, text=True, timeout=360,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    startup = run["renderer_startup_s"]
    assert isinstance(startup, float) and startup > 0
    wall = [t["wall_s"] for t in json.loads((out / "results.json").read_text())]
    assert len(wall) == 3
    # charged to the first trial, its wall_s would exceed the others' by the start-up figure
    assert wall[0] < max(wall[1:]) + 0.5 * startup, (wall, startup)


def test_a_run_without_rendering_records_no_startup(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "eval", "--policy", "hold", "--tasks", TASK,
                           "--rounds", "1", "--max-steps", "1", "--actions-per-step", "5", "--no-render",
                           "--backend", "inline", "--output", str(out)], capture_output=True, text=True, timeout=360,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "run.json").read_text())["renderer_startup_s"] is None
