"""A killed ``robofollow collect`` continues with ``--resume`` and never writes half an episode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test_learning_pipeline import read_independently
from waiting import poll_until

ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
ARGS = ["--tasks", "pickup_yellow_block_2", "--episodes-per-task", "3", "--image-size", "32x24", "--vcodec", "h264"]

pytestmark = pytest.mark.timeout(600)


def test_killed_collection_resumes_to_the_full_dataset(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    proc = subprocess.Popen([*ROBOFOLLOW, "collect", "--output", str(out), *ARGS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    staging = out / ".staging"
    poll_until(lambda: proc.poll() is not None or (staging.is_dir() and any(
        (p / "episode.json").is_file() for p in staging.iterdir() if p.is_dir())), 400, interval_s=0.2)
    assert proc.poll() is None, "collection ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert not (out / "meta" / "info.json").exists()  # no dataset claims to be finished
    done_before = [p.name for p in staging.iterdir() if (p / "episode.json").is_file()]
    assert done_before
    refused = subprocess.run([*ROBOFOLLOW, "collect", "--output", str(out), *ARGS[:-2], "--vcodec", "libsvtav1",
                              "--resume"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "video differ" in refused.stderr, refused.stderr
    resumed = subprocess.run([*ROBOFOLLOW, "collect", "--output", str(out), *ARGS, "--resume"],
                             capture_output=True, text=True, timeout=500, env={**os.environ})
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "3 episodes written" in resumed.stdout and f"resumed: {len(done_before)} episodes" in resumed.stdout
    assert not staging.exists()
    report = read_independently(out)
    assert report["errors"] == [] and report["episodes"] == 3
    provenance = json.loads((out / "meta" / "robofollow.json").read_text())["episodes"]
    assert [p["episode"] for p in provenance] == [0, 1, 2] and len({p["seed"] for p in provenance}) == 3

    # --resume on the finished dataset collects nothing and leaves every file as it was
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in out.rglob("*") if p.is_file()}
    again = subprocess.run([*ROBOFOLLOW, "collect", "--output", str(out), *ARGS, "--resume"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed: 3 episodes" in again.stdout and not staging.exists()
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in out.rglob("*") if p.is_file()} == before
