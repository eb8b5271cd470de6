"""A run of the ROS graph says what ran as ``eval`` says it (issue 38 item 3): ``bringup sim``'s run.json has
the keys of eval's, and for the same selection, policy, kwargs and budget the same values where they mean the
same thing (the official arguments, the policy SPEC and kwargs, render), not nulls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from robofollow_ros.cli import main
from robofollow_ros.evaluation.provenance import OFFICIAL_ARGUMENTS

TASK = "L0_pickup_red_cylinder"
KWARGS = '{"chunk_size": 7}'
#: Keys whose values differ by design: when and where, the run's identity, how it was driven.
PER_RUN = {"started_utc", "finished_utc", "run_id", "status", "output", "resumes", "execution", "stepper"}


def test_a_bringup_run_json_has_eval_s_fields_and_values(tmp_path: Path) -> None:
    common = ["--policy", "hold", "--kwargs", KWARGS, "--tasks", TASK, "--rounds", "1", "--max-steps", "2",
              "--no-render"]
    ros, ev = tmp_path / "ros", tmp_path / "eval"
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "bringup", "sim", *common, "--output", str(ros),
                           "--foxglove-port", "0", "--no-foxglove"], capture_output=True, text=True, timeout=240,
                          env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert main(["eval", *common, "--backend", "inline", "--output", str(ev)]) == 0
    a, b = (json.loads((d / "run.json").read_text(encoding="utf-8")) for d in (ros, ev))
    assert set(b) <= set(a), f"eval's keys missing from bringup's run.json: {sorted(set(b) - set(a))}"
    for key in OFFICIAL_ARGUMENTS:
        if key != "output":
            assert a["arguments"][key] == b["arguments"][key], key
    assert a["arguments"]["output"] == str(ros) and a["arguments"]["tasks"] == TASK and a["arguments"]["rounds"] == 1
    assert (a["policy"]["spec"], a["policy"]["kwargs"]) == (b["policy"]["spec"], b["policy"]["kwargs"]) == (
        "hold", json.loads(KWARGS))
    assert a["render"] == b["render"] and a["render"]["enabled"] is False
    for key in sorted(set(b) - PER_RUN - {"arguments", "policy"}):
        assert a[key] == b[key], key
