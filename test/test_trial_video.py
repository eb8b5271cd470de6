"""Trial videos (issue 28, item 3): a recorded trial becomes an MP4 a standard player opens, with the instruction,
the stage states as they evolved and the IS/ES burned in, and a contact sheet beside it.

A real trial (the oracle in SAPIEN, ``eval --record --record-rate 10 --video``, small cameras) is read back as a
player would, with PyAV (and ``ffprobe`` where it is installed), against the bag read independently with
``rosbags``. A bag shaped like the ROS graph's (sim-time stamps, log times on another clock, a resetting
phase, two trials, a raw ``Image`` camera whose pictures arrive after the head camera's) checks which
pictures and which scores a frame gets. Bad input is one line naming the path, and nothing is written.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from robofollow_ros.contract import CAMERA_NAMES
from robofollow_ros.monitoring.trial_video import HELD_FRAMES, HOLD_S

SEC = 1_000_000_000
ROBOFOLLOW = [sys.executable, "-m", "robofollow_ros.cli"]
TASK = "L0_pickup_red_cylinder"
HEAD = "/cameras/head/image_raw/compressed"
pytestmark = pytest.mark.timeout(300)


def record(out: Path, policy: str, max_steps: int, actions: int) -> tuple[Path, str]:
    """``eval --policy POLICY --tasks TASK --rounds 1 --record --record-rate 10 --video`` in this process
    (``--backend inline``) with 64x48 cameras; returns the run directory and what it said."""
    from robofollow_ros.evaluation.episode import EpisodeSettings
    from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
    from robofollow_ros.sim import world
    from robofollow_ros.sim.camera_settings import CameraSettings

    class SmallWorld(world.SimWorld):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(cameras=CameraSettings(64, 48), **kwargs)

    said = io.StringIO()
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(world, "SimWorld", SmallWorld)
        config = EvalConfig(policy=policy, output=out, tasks=(TASK,), rounds=1,
                            settings=EpisodeSettings(max_steps, actions), render=True, record=True, record_hz=10,
                            video=True, backend="inline")
        outcome = run_evaluation(config, stream=said)
    assert outcome.recorded == 1 and not outcome.failed_trials
    return out, said.getvalue()


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The oracle picks the cylinder up: stage 1 goes pending -> intent -> done while the cameras record."""
    return record(tmp_path_factory.mktemp("oracle") / "run", "oracle", 1, 50)


def bag_of(run: Path) -> Path:
    bags = sorted((run / "mcap").glob("*.mcap"))
    assert len(bags) == 1
    return bags[0]


def read_bag(bag: Path) -> dict[str, Any]:
    """Independently of the code under test: head pictures (log time, stamp, RGB) and the live scores."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    heads, scores = [], []
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_JAZZY)) as reader:
        wanted = [c for c in reader.connections if c.topic in (HEAD, "/robofollow/score")]
        for conn, t, raw in reader.messages(connections=wanted):
            msg: Any = reader.deserialize(raw, conn.msgtype)
            if conn.topic == HEAD:
                rgb = cv2.cvtColor(cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR),
                                   cv2.COLOR_BGR2RGB)
                heads.append((t, msg.header.stamp.sec * SEC + msg.header.stamp.nanosec, rgb))
            else:
                scores.append((t, json.loads(msg.data)))
    return {"heads": heads, "scores": scores}


def decoded(mp4: Path) -> tuple[Any, list[tuple[float, np.ndarray]]]:
    """What a player gets: the container's facts and every frame (time in s, RGB)."""
    import av

    with av.open(str(mp4)) as container:
        stream = container.streams.video[0]
        facts = {"format": container.format.name, "streams": len(container.streams),
                 "video_streams": len(container.streams.video), "codec": stream.codec_context.name,
                 "pix_fmt": stream.codec_context.pix_fmt, "duration_s": container.duration / 1e6,
                 "width": stream.codec_context.width, "height": stream.codec_context.height}
        frames = [(float(f.pts * f.time_base), f.to_ndarray(format="rgb24")) for f in container.decode(stream)]
    return facts, frames


def expected_state(score: dict[str, Any] | None, stage: str) -> str:
    """A stage's state from the recorded live score, written out here: done once its execution is full, intent once
    its intent is full, else pending."""
    s = (score or {}).get("stages", {}).get(stage)
    if s is None:
        return "pending"
    if 0 < s["exec"] >= s["exec_max"]:
        return "done"
    if score and score.get("final"):
        return "missed"
    return "intent" if 0 < s["intent"] >= s["intent_max"] else "pending"


def nearest_state(pixel: np.ndarray) -> str:
    from robofollow_ros.monitoring.video_frames import STATE_COLOURS

    return min(STATE_COLOURS, key=lambda s: float(np.abs(np.asarray(STATE_COLOURS[s]) - pixel).sum()))


def test_a_recorded_trial_becomes_an_mp4_a_player_opens(oracle_run: tuple[Path, str]) -> None:
    from robofollow_ros.monitoring.video_frames import BACKGROUND, Layout
    from robofollow_ros.monitoring.video_mp4 import video_codec

    run, said = oracle_run
    bag = bag_of(run)
    trial = bag.stem
    mp4, sheet = run / "videos" / f"{trial}.mp4", run / "videos" / f"{trial}.png"
    assert f"video 1/1: {trial}: " in said and str(mp4) in said  # the progress line of the trial
    recorded = read_bag(bag)
    heads = recorded["heads"]
    facts, frames = decoded(mp4)

    assert facts["format"].split(",")[0] in ("mov", "mp4") and "mp4" in facts["format"]
    assert facts["streams"] == facts["video_streams"] == 1
    assert facts["codec"] == {"libx264": "h264", "mpeg4": "mpeg4"}[video_codec()]
    assert facts["pix_fmt"] == "yuv420p"
    # one frame per recorded head picture, then the last picture held HOLD_S with the final verdict
    assert len(frames) == len(heads) + HELD_FRAMES and len(heads) >= 10
    stamps = np.array([s for _, s, _ in heads], dtype=np.int64)
    span, period = (stamps[-1] - stamps[0]) / 1e9, float(np.median(np.diff(stamps))) / 1e9
    assert abs(facts["duration_s"] - (span + period + HOLD_S)) <= period + 1e-3  # the span and the hold
    times = [t for t, _ in frames]
    assert np.allclose(times[:len(heads)], (stamps - stamps[0]) / 1e9, atol=1e-3)  # at the recorded times
    assert np.allclose(times[len(heads):], [span + period, span + period + HOLD_S], atol=1e-3)
    assert all(np.diff(times) > 0)  # strictly increasing

    layout = Layout.for_camera(64, 48)
    assert (facts["width"], facts["height"]) == (layout.width, layout.height)
    first = frames[0][1]
    x0, y0, x1, y1 = layout.camera_box("head")
    head = cv2.resize(heads[0][2], (x1 - x0, y1 - y0), interpolation=cv2.INTER_NEAREST)
    assert np.abs(first[y0:y1, x0:x1].astype(int) - head).mean() < 8  # the camera, as recorded
    panel = first[layout.cam_h:].astype(int)
    title = panel[: layout.row_y(1) - layout.cam_h + 6]
    text = np.abs(title - BACKGROUND).sum(axis=2) > 150  # burned-in letters on the dark panel
    assert text.sum() > 200
    plain = cv2.resize(np.full_like(heads[0][2], BACKGROUND), (layout.width, layout.height - layout.cam_h))
    assert np.abs(panel - plain).sum(axis=2).max() > 300  # the panel is not a plain box

    # every frame's stage boxes show the state the latest recorded score (logged at or before it) gave
    scores = recorded["scores"]
    stages = list(scores[-1][1]["stages"])
    seen = []
    for (t_log, _, _), (_, picture) in zip(heads, frames[:len(heads)], strict=True):
        live = next((s for t, s in reversed(scores) if t <= t_log), None)
        for slot, stage in enumerate(stages):
            bx0, by0, _, by1 = layout.stage_box(slot)
            box = picture[by0 + 2:by1 - 2, bx0 + 2:bx0 + 5].reshape(-1, 3).mean(axis=0)
            assert nearest_state(box) == expected_state(live, stage), (t_log, stage)
        seen.append(expected_state(live, stages[0]))
    assert {"pending", "intent", "done"} <= set(seen)  # the state evolved while the video ran
    final = {**scores[-1][1], "final": True}
    for _, picture in frames[len(heads):]:  # the held frames: the verdict, every stage done or missed
        for slot, stage in enumerate(stages):
            bx0, by0, _, by1 = layout.stage_box(slot)
            box = picture[by0 + 2:by1 - 2, bx0 + 2:bx0 + 5].reshape(-1, 3).mean(axis=0)
            assert nearest_state(box) == expected_state(final, stage) in ("done", "missed"), stage

    # the contact sheet: six evenly spaced frames of the video, half size, under a header
    from robofollow_ros.monitoring.video_frames import sheet_indices

    png = cv2.cvtColor(cv2.imread(str(sheet)), cv2.COLOR_BGR2RGB)
    picks = sheet_indices(len(frames), 6)
    assert len(picks) == 6 and picks[0] == 0 and picks[-1] == len(frames) - 1
    h, w = layout.height // 2, layout.width // 2
    top = png.shape[0] - 3 * (h + 6)
    for k, index in enumerate(picks):
        r, c = divmod(k, 2)
        tile = png[top + r * (h + 6): top + r * (h + 6) + h, 6 + c * (w + 6): 6 + c * (w + 6) + w].astype(int)
        small = cv2.resize(frames[index][1], (w, h), interpolation=cv2.INTER_AREA).astype(int)
        assert np.abs(tile - small).mean() < 6, index


@pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffprobe is not installed (the PyAV check above runs)")
def test_ffprobe_reads_the_video(oracle_run: tuple[Path, str]) -> None:
    run, _ = oracle_run
    mp4 = next((run / "videos").glob("*.mp4"))
    probe = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format",
                            "-of", "json", str(mp4)], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    info = json.loads(probe.stdout)
    assert [s["codec_type"] for s in info["streams"]] == ["video"]
    assert int(info["streams"][0]["nb_read_frames"]) == len(read_bag(bag_of(run))["heads"])


def test_the_run_records_the_request_and_the_command_writes_beside_the_run(oracle_run: tuple[Path, str],
                                                                           tmp_path: Path) -> None:
    """run.json says videos were asked for; ``robofollow video BAG`` writes the same video, by default into the
    run's videos/ (where ``report --failures`` looks), and elsewhere with ``--out``."""
    run, _ = oracle_run
    arguments = json.loads((run / "run.json").read_text())["arguments"]
    assert arguments["video"] is True
    bag = bag_of(run)
    copy = tmp_path / "run"
    (copy / "mcap").mkdir(parents=True)
    shutil.copy(bag, copy / "mcap" / bag.name)
    proc = subprocess.run([*ROBOFOLLOW, "video", str(copy / "mcap" / bag.name)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"video 1/1: {bag.stem}: " in proc.stdout
    made = copy / "videos" / f"{bag.stem}.mp4"
    assert made.is_file() and (copy / "videos" / f"{bag.stem}.png").is_file()
    assert len(decoded(made)[1]) == len(decoded(run / "videos" / f"{bag.stem}.mp4")[1])


def test_the_failure_view_links_the_video(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hold`` never picks anything up: a failed trial, whose video ``report --failures`` links."""
    from robofollow_ros.cli import main

    run, _ = record(tmp_path / "hold", "hold", 1, 5)
    trial = bag_of(run).stem
    assert main(["report", str(run), "--failures", "--json"]) == 0
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert [f["trial"] for f in failures] == [trial]
    assert failures[0]["video"] == str(run / "videos" / f"{trial}.mp4") and Path(failures[0]["video"]).is_file()
    # the video ends on the verdict: the stage the trial failed is drawn MISSED in the last frame
    from robofollow_ros.monitoring.video_frames import Layout

    last = decoded(Path(failures[0]["video"]))[1][-1][1]
    layout = Layout.for_camera(64, 48)
    x0, y0, _, y1 = layout.stage_box(0)
    assert nearest_state(last[y0 + 2:y1 - 2, x0 + 2:x0 + 5].reshape(-1, 3).mean(axis=0)) == "missed"


# -- a bag shaped like the ROS graph's ---------------------------------------------------------------------------
def colour(k: int) -> np.ndarray:
    """The picture of tick k: a flat colour that tells the tick."""
    img = np.zeros((48, 64, 3), np.uint8)
    img[..., 0], img[..., 1] = 40 + 20 * (k % 10), 200 - 15 * (k % 10)
    return img


def write_graph_bag(path: Path, with_cameras: bool = True, corrupt_tick: int | None = None) -> dict[str, Any]:
    """Trial "a" (resetting 0-1 s, running 1-2 s) and "b" (running 2.5-3.5 s), cameras at 10 Hz. Stamps are sim
    time (100 s behind the log times); the right wrist is a raw Image logged 30 ms after the head picture of the
    same stamp; scores name their trial, a's final score and result arrive after its running phase."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    types = ts.types
    Header, Time = types["std_msgs/msg/Header"], types["builtin_interfaces/msg/Time"]
    Compressed, Image, String = (types["sensor_msgs/msg/CompressedImage"], types["sensor_msgs/msg/Image"],
                                 types["std_msgs/msg/String"])
    events: list[tuple[float, Any, Any]] = []
    heads: dict[str, list[int]] = {"a": [], "b": []}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = {name: writer.add_connection(topic, msgtype, typestore=ts) for name, topic, msgtype in [
            ("trial", "/robofollow/trial", String.__msgtype__), ("score", "/robofollow/score", String.__msgtype__),
            ("result", "/robofollow/result", String.__msgtype__),
            ("instruction", "/robofollow/instruction", String.__msgtype__)]}
        if with_cameras:
            conn["head"] = writer.add_connection(HEAD, Compressed.__msgtype__, typestore=ts)
            conn["left"] = writer.add_connection("/cameras/left_wrist/image_raw/compressed", Compressed.__msgtype__,
                                                 typestore=ts)
            conn["right"] = writer.add_connection("/cameras/right_wrist/image_raw", Image.__msgtype__, typestore=ts)
            for k in range(40):
                t = 0.05 + k / 10
                stamp = t - 100.0 + 200.0  # another clock than the log time
                header = Header(stamp=Time(sec=int(stamp), nanosec=round((stamp % 1) * 1e9)), frame_id="")
                png = cv2.imencode(".png", cv2.cvtColor(colour(k), cv2.COLOR_RGB2BGR))[1].reshape(-1)
                head = np.frombuffer(b"not a picture", np.uint8) if k == corrupt_tick else png
                events.append((t, conn["head"], Compressed(header=header, format="png", data=head)))
                events.append((t + 0.01, conn["left"], Compressed(header=header, format="png", data=png)))
                events.append((t + 0.03, conn["right"], Image(header=header, height=48, width=64, encoding="rgb8",
                                                               is_bigendian=0, step=192, data=colour(k).reshape(-1))))
                name = "a" if 1.0 <= t <= 2.0 else "b" if 2.5 <= t <= 3.5 else None
                if name:
                    heads[name].append(k)

        def stage(intent: float, exec_: float) -> dict[str, Any]:
            return {"intent": intent, "exec": exec_, "intent_max": 1.0, "exec_max": 1.0}

        def score(trial: str, intent: float, exec_: float, final: bool = False) -> str:
            return json.dumps({"trial_id": trial, "final": final, "intent": intent, "exec": exec_,
                               "complete": exec_ >= 1, "stages": {"stage1_pick": stage(intent, exec_)}})

        texts = [(0.0, "instruction", "Pick up the red cube."),
                 (0.0, "trial", json.dumps({"id": "a", "phase": "resetting"})),
                 (1.0, "trial", json.dumps({"id": "a", "phase": "running", "instruction": "Pick up the red cube."})),
                 (1.0, "score", score("a", 0.0, 0.0)), (1.42, "score", score("a", 1.0, 0.0)),
                 (1.72, "score", score("a", 1.0, 1.0)), (2.0, "trial", json.dumps({"id": "a", "phase": "scoring"})),
                 (2.1, "score", score("a", 1.0, 1.0, final=True)),
                 (2.1, "result", json.dumps({"trial": "a", "result": {"intent_score": 1.0, "exec_score": 1.0,
                                                                      "completion_ok": True, "phases": []}})),
                 (2.2, "trial", json.dumps({"id": "a", "phase": "done"})),
                 (2.5, "trial", json.dumps({"id": "b", "phase": "running", "instruction": "Push the blue cube."})),
                 (2.5, "score", score("b", 0.0, 0.0)), (3.5, "trial", json.dumps({"id": "b", "phase": "scoring"}))]
        for t, name, text in texts:
            events.append((t, conn[name], String(data=text)))
        for t, c, msg in sorted(events, key=lambda e: e[0]):
            writer.write(c, round(t * SEC) + 1_000 * SEC, ts.serialize_cdr(msg, c.msgtype))
    return heads


def test_a_graph_bag_gives_a_video_per_trial_with_pictures_matched_by_stamp(tmp_path: Path) -> None:
    from robofollow_ros.monitoring.trial_video import write_videos
    from robofollow_ros.monitoring.video_bag import plan_bag
    from robofollow_ros.monitoring.video_frames import Layout

    heads = write_graph_bag(tmp_path / "graph_bag")
    plan = plan_bag(tmp_path / "graph_bag")
    assert [(c.name, c.instruction, c.frames) for c in plan.clips] == \
        [("a", "Pick up the red cube.", len(heads["a"])), ("b", "Push the blue cube.", len(heads["b"]))]
    assert plan.clips[0].final == (1.0, 1.0, True) and plan.clips[1].final is None  # b was cut short
    lines: list[str] = []
    written = write_videos([plan], tmp_path / "out", lines.append)
    assert [v.trial for v in written] == ["a", "b"] and len(lines) == 2 and lines[1].startswith("video 2/2: b: ")
    layout = Layout.for_camera(64, 48)
    for video in written:
        frames = decoded(video.mp4)[1]
        ticks = heads[video.trial]
        held = HELD_FRAMES if video.trial == "a" else 0  # b was cut short: no verdict to hold
        assert len(frames) == len(ticks) + held
        frames = frames[:len(ticks)]
        assert np.allclose([t for t, _ in frames], [(k - ticks[0]) / 10 for k in ticks], atol=1e-3)
        for k, (_, picture) in zip(ticks, frames, strict=True):
            for camera in CAMERA_NAMES:  # every camera shows the picture of the frame's own stamp
                x0, y0, x1, y1 = layout.camera_box(camera)
                assert np.abs(picture[y0 + 8:y1 - 8, x0 + 8:x1 - 8].reshape(-1, 3).mean(axis=0)
                              - colour(k)[0, 0]).max() < 6, (video.trial, k, camera)
    _, frames = decoded(written[0].mp4)
    states = []
    for _, picture in frames:
        x0, y0, _, y1 = layout.stage_box(0)
        states.append(nearest_state(picture[y0 + 2:y1 - 2, x0 + 2:x0 + 5].reshape(-1, 3).mean(axis=0)))
    # scores at 1.0 (pending), 1.42 (intent), 1.72 (done); frames at 1.05, 1.15, ...
    assert states == ["pending" if 0.05 + k / 10 < 1.42 else "intent" if 0.05 + k / 10 < 1.72 else "done"
                      for k in heads["a"]] + ["done"] * HELD_FRAMES


def test_a_picture_that_cannot_be_decoded_stops_that_bag_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """``robofollow video`` says it in one line (exit 2); ``eval --video`` (``skip_bad``) says it and goes on. Either
    way the trial being written leaves no file behind (not even its temporary), the trial before it is complete."""
    from robofollow_ros.cli import main
    from robofollow_ros.monitoring.trial_video import write_videos
    from robofollow_ros.monitoring.video_bag import plan_bag

    heads = write_graph_bag(tmp_path / "bag", corrupt_tick=30)  # the head picture at 3.05 s, in trial b
    lines: list[str] = []
    written = write_videos([plan_bag(tmp_path / "bag")], tmp_path / "eval", lines.append, skip_bad=True)
    assert [v.trial for v in written] == ["a"] and len(decoded(written[0].mp4)[1]) == len(heads["a"]) + HELD_FRAMES
    assert lines[-1].startswith(f"video: no video of the rest of {tmp_path / 'bag'} (") and "head" in lines[-1]
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["a.mp4", "a.png"]
    assert main(["video", str(tmp_path / "bag"), "--out", str(tmp_path / "cli")]) == 2
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == ["a.mp4", "a.png"]


def test_bad_input_is_one_line_naming_the_path_and_nothing_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from robofollow_ros.cli import main

    write_graph_bag(tmp_path / "good")
    write_graph_bag(tmp_path / "no_cameras", with_cameras=False)
    out = tmp_path / "out"

    def refused(*args: str) -> str:
        code = main(["video", *args])
        said = capsys.readouterr()
        assert code == 2 and said.out == "" and len(said.err.strip().splitlines()) == 1, (code, said)
        return said.err

    missing = tmp_path / "missing.mcap"
    assert f"{missing}: does not exist" in refused(str(tmp_path / "good"), str(missing), "--out", str(out))
    line = refused(str(tmp_path / "good"), str(tmp_path / "no_cameras"), "--out", str(out))
    assert f"{tmp_path / 'no_cameras'}: no camera pictures" in line
    garbage = tmp_path / "garbage.mcap"
    garbage.write_bytes(b"not a bag at all")
    assert f"{garbage}: not a readable ROS 2 bag" in refused(str(garbage), "--out", str(out))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert f"--out: {blocker} is not a folder" in refused(str(tmp_path / "good"), "--out", str(blocker))
    assert f"--out: cannot write in {blocker / 'videos'}" in refused(str(tmp_path / "good"), "--out",
                                                                      str(blocker / "videos"))
    assert not out.exists()  # refused before anything was written


def test_eval_refuses_video_without_recording_or_cameras(tmp_path: Path) -> None:
    from robofollow_ros.evaluation.runner import EvalConfig

    with pytest.raises(ValueError, match="--video: only with --record"):
        EvalConfig(policy="hold", output=tmp_path / "r", video=True, render=True)
    with pytest.raises(ValueError, match="--video: needs the cameras"):
        EvalConfig(policy="hold", output=tmp_path / "r", video=True, record=True, render=False)
    with pytest.raises(ValueError, match="--video: --record-rate policy records one picture per policy call"):
        EvalConfig(policy="hold", output=tmp_path / "r", video=True, record=True, render=True, record_hz=None)


def test_eval_video_records_at_the_control_rate_unless_told_the_policy_rate(tmp_path: Path, capsys) -> None:
    import argparse

    from robofollow_ros.cli import main
    from robofollow_ros.cli.eval import build_config

    def config(*extra: str) -> Any:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        from robofollow_ros.cli.eval import register

        register(sub)
        return build_config(parser.parse_args(["eval", "--policy", "hold", "--output", str(tmp_path / "r"), *extra]))

    assert config("--record", "--video").record_hz == 10  # a video at the control rate, not a slide show
    assert config("--record").record_hz is None  # without --video, as before: what the policy is sent
    assert main(["eval", "--policy", "hold", "--record", "--video", "--record-rate", "policy",
                 "--output", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--record-rate policy" in err[0] and not (tmp_path / "p").exists()
