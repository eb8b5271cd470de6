"""`robofollow eval --record` writes one MCAP per trial; `robofollow replay` re-scores it to the live result,
also from a file cut short by truncation or by SIGKILL of the recording process."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.monitoring.replay import RecordingError, comparable, read_recording, rescore
from robofollow_ros.scoring.frame import frame_from_dict
from robofollow_ros.scoring.monitor import score_trajectory

ROBOFOLLOW = str(Path(sys.executable).with_name("robofollow"))
TASKS = ("L0_place_yellow_block_1_behind_red_cylinder", "L0_stack_left_cube_on_red_cylinder")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROBOFOLLOW, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    proc = _cli("eval", "--policy", "oracle", "--tasks", ",".join(TASKS), "--rounds", "1", "--max-steps", "2",
                "--actions-per-step", "12", "--output", str(out), "--record")
    assert proc.returncode == 0, proc.stderr
    return out


def _entries(run_dir: Path) -> dict[str, dict[str, Any]]:
    results = json.loads((run_dir / "results.json").read_text())
    entries = results if isinstance(results, list) else results.get("results", results.get("trials", []))
    return {f"{e['task']}_r{e['round']}_s{e['seed']}": e for e in entries}


def test_every_trial_is_recorded_and_replays_to_the_results_entry(run_dir: Path) -> None:
    entries = _entries(run_dir)
    assert len(entries) == len(TASKS)
    for trial, entry in entries.items():
        path = run_dir / "mcap" / f"{trial}.mcap"
        proc = _cli("replay", str(path), "--json")
        assert proc.returncode == 0, proc.stderr
        replay = json.loads(proc.stdout)
        assert replay["trial"] == trial and replay["task"] == entry["task"] and replay["truncated"] is None
        assert replay["frames"] == entry["frames"]
        assert replay["matches_live"] is True
        assert comparable(replay["result"]) == {k: v for k, v in comparable(entry).items() if k in replay["result"]}
        assert replay["result"]["intent_score"] == entry["intent_score"]


def test_recording_holds_cameras_scene_and_trial_phases(run_dir: Path) -> None:
    path = next((run_dir / "mcap").glob("*.mcap"))
    rec = read_recording(path)
    assert rec.topics["/cameras/head/image_raw/compressed"] >= 1 and rec.topics["/robofollow/scene"] == len(rec.frames)
    assert rec.topics["/robofollow/trial"] == 2 and rec.topics["/robofollow/result"] == 1


def test_every_eval_recording_opens_with_rosbags_with_joints_tf_and_robot(run_dir: Path) -> None:
    """The independent reader: rosbags opens each file as a ROS 2 bag and deserializes every message."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    paths = sorted((run_dir / "mcap").glob("*.mcap"))
    assert len(paths) == len(TASKS)
    for path in paths:
        with Reader(path) as reader:
            seen: dict[str, int] = {}
            for connection, _stamp, raw in reader.messages():
                store.deserialize_cdr(raw, connection.msgtype)
                seen[connection.topic] = seen.get(connection.topic, 0) + 1
        assert seen["/joint_states"] > 0 and seen["/tf"] > 0 and seen["/tf_static"] == 1
        assert seen["/robot_description"] == 1 and seen["/robofollow/joint_command"] > 0
        assert seen["/cameras/head/camera_info"] == seen["/cameras/head/image_raw/compressed"] > 0


def test_an_earlier_foxglove_schema_recording_still_replays(tmp_path: Path, registry: Any) -> None:
    """Recordings made before the ROS 2 bags: JSON channels with jsonschema schemas (the old writer's form)."""
    import foxglove

    from robofollow_ros.scoring.monitor import StageMonitor
    from robofollow_ros.scoring.synthetic import Puppet

    task = registry.eval_task(TASKS[0])
    frames = [f.to_dict() for f in Puppet(task).pick("right", "yellow_block_1").hold(2).frames]
    monitor = StageMonitor(task)
    ctx = foxglove.Context()
    schema = {"type": "object"}
    trial = foxglove.Channel("/robofollow/trial", schema=schema, context=ctx)
    frame = foxglove.Channel("/robofollow/frame", schema=schema, context=ctx)
    result = foxglove.Channel("/robofollow/result", schema=schema, context=ctx)
    path = tmp_path / "old.mcap"
    writer = foxglove.open_mcap(path, context=ctx)
    trial.log({"trial": "old", "task": task.task_id, "phase": "running"})
    for i, raw in enumerate(frames):
        frame.log({"trial": "old", "task": task.task_id, "index": i, "frame": raw})
        monitor.update(frame_from_dict(raw, i))
    result.log({"trial": "old", "result": monitor.result()})
    writer.close()
    out = _cli("replay", str(path), "--json")
    assert out.returncode == 0, out.stderr
    replay = json.loads(out.stdout)
    assert replay["trial"] == "old" and replay["matches_live"] is True and replay["frames"] == len(frames)


def test_plain_output_names_scores_and_match(run_dir: Path) -> None:
    path = next((run_dir / "mcap").glob("*.mcap"))
    proc = _cli("replay", str(path))
    assert proc.returncode == 0 and "live result recorded: matches the replay" in proc.stdout
    assert "stage1_" in proc.stdout


def test_picture_at_a_moment_and_past_the_end(run_dir: Path, tmp_path: Path) -> None:
    """``--at`` within the recording draws that moment; past its end it is refused in one line naming the value
    and the recording's length, and no picture is written."""
    from mcap.reader import make_reader

    path = next((run_dir / "mcap").glob("*.mcap"))
    with path.open("rb") as f:
        stats = make_reader(f).get_summary().statistics  # type: ignore[union-attr]
    length_s = (stats.message_end_time - stats.message_start_time) / 1e9
    inside = _cli("replay", str(path), "--picture", str(tmp_path / "in.png"), "--at", f"{length_s / 2:.3f}")
    assert inside.returncode == 0, inside.stderr
    assert (tmp_path / "in.png").stat().st_size > 0
    at = int(length_s) + 5
    past = _cli("replay", str(path), "--picture", str(tmp_path / "past.png"), "--at", str(at))
    assert past.returncode == 2 and not (tmp_path / "past.png").exists()
    assert past.stderr.count("\n") == 1 and "Traceback" not in past.stderr
    assert f"--at: {at} s is past the end of the recording ({length_s:.3f} s long)" in past.stderr


def test_truncated_file_replays_the_frames_before_the_cut(run_dir: Path, tmp_path: Path) -> None:
    path = run_dir / "mcap" / f"{next(iter(_entries(run_dir)))}.mcap"
    data = path.read_bytes()
    full = read_recording(path)
    seen_partial = False
    for fraction in (0.35, 0.6, 0.85, 0.999):
        cut = tmp_path / f"cut_{fraction}.mcap"
        cut.write_bytes(data[: int(len(data) * fraction)])
        rec = read_recording(cut)
        assert rec.truncated is not None
        assert rec.frames == full.frames[: len(rec.frames)]
        if len(rec.frames) < len(full.frames):
            assert rec.live_result is None  # the result comes last: a cut before it loses it
        if rec.frames:
            seen_partial = seen_partial or len(rec.frames) < len(full.frames)
            frames = [frame_from_dict(f, i) for i, f in enumerate(rec.frames)]
            assert rescore(rec) == score_trajectory(rec.task, frames)  # type: ignore[arg-type]
    assert seen_partial


def test_recording_killed_mid_trial_still_replays(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from robofollow_ros.monitoring.recorder import TrialRecorder\n"
        "from robofollow_ros.scoring.synthetic import Puppet\n"
        "from robofollow_ros.benchmark import default_registry\n"
        f"task = default_registry().eval_task({TASKS[0]!r})\n"
        "frames = [f.to_dict() for f in Puppet(task).pick('right', 'yellow_block_1').frames]\n"
        "observer = TrialRecorder(Path(sys.argv[1])).for_trial('killed')\n"
        "observer.on_start(task, 1, None)\n"
        "i, told = 0, False\n"
        "while True:\n"
        "    observer.on_frame(i, frames[min(i, len(frames) - 1)], {'task': task.task_id, 'frame': i, 'stages': {}})\n"
        "    i += 1\n"
        "    if not told and (Path(sys.argv[1]) / 'killed.mcap').stat().st_size > 200_000:\n"
        "        print('grown', flush=True)  # a few chunks on disk, the trial still going\n"
        "        told = True\n"
    )
    path = tmp_path / "killed.mcap"
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        said: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: said.put(proc.stdout.readline() if proc.stdout else ""), daemon=True).start()
        assert said.get(timeout=60) == "grown\n", "the recording did not grow"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    rec = read_recording(path)
    assert rec.truncated is not None and len(rec.frames) > 100 and rec.live_result is None
    out = _cli("replay", str(path), "--json")
    assert out.returncode == 0, out.stderr
    replay = json.loads(out.stdout)
    assert replay["frames"] == len(rec.frames) and replay["truncated"] and replay["matches_live"] is None
    assert replay["result"]["frames"] == len(rec.frames)


def test_bad_files_exit_2_naming_the_problem(tmp_path: Path) -> None:
    missing = _cli("replay", str(tmp_path / "nope.mcap"))
    assert missing.returncode == 2 and "nope.mcap: no such file" in missing.stderr
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"not an mcap at all")
    bad = _cli("replay", str(junk))
    assert bad.returncode == 2 and "not an MCAP recording" in bad.stderr and "Traceback" not in bad.stderr
    with pytest.raises(RecordingError, match="no trial state or scorer frame"):
        rescore(read_recording(_empty_recording(tmp_path)))


def _empty_recording(tmp_path: Path) -> Path:
    from robofollow_ros.monitoring.channels import TrialChannels

    path = tmp_path / "empty.mcap"
    channels = TrialChannels()
    channels.open_recording(path)
    channels.close_recording()
    return path
