"""``robofollow tasks`` as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROBOFOLLOW = shutil.which("robofollow", path=str(Path(sys.executable).parent)) or "robofollow"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, *args], capture_output=True, text=True, timeout=60)


def test_summary_json_contract():
    proc = run("tasks", "summary", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["training_tasks"] == 75
    assert summary["instruction_variants"] == 229
    assert summary["evaluation_tasks"] == {"L0": 75, "L1": 86, "L2": 173, "L3": 220, "total": 554}
    assert summary["per_scene"]["scene3"] == {"L0": 16, "L1": 40, "L2": 64, "L3": 96}
    assert summary["scene_entropy_bits"] == 3.782
    assert summary["trials_full_protocol"] == 5540


def test_list_filters_by_scene_and_level():
    proc = run("tasks", "list", "--scene", "scene4", "--level", "L1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 14 and all(line.startswith("scene4  L1") for line in lines)
    train = run("tasks", "list", "--split", "train", "--json")
    assert len(json.loads(train.stdout)) == 75


def test_show_prints_layout_instruction_arm_and_seeds():
    proc = run("tasks", "show", "L0_pickup_yellow_block_1_left", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["arm"] == "left" and info["source"] == "yellow_block_1"
    assert info["seeds"][:3] == [539, 639, 739]
    assert {o["name"] for o in info["objects"]} >= {"red_sphere", "yellow_block_1", "green_sphere"}
    text = run("tasks", "show", "L0_pickup_yellow_block_1_left").stdout
    assert "Use your left arm to pick up the block to the right of the red ball." in text


def test_unknown_id_exits_2_with_suggestion():
    proc = run("tasks", "show", "L0_pickup_yelow_block_2")
    assert proc.returncode == 2
    assert "unknown task id 'L0_pickup_yelow_block_2'" in proc.stderr
    assert "L0_pickup_yellow_block_2" in proc.stderr
    assert "Traceback" not in proc.stderr
