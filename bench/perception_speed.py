"""Perception and calibration figures: speed on one core, accuracy against the simulator, calibration error.

Rewrites the ``perception`` section of docs/benchmarks.md and prints the same table. Run:

    .venv/bin/python bench/perception_speed.py                      # speed + full eval + calibration (~15 min)
    .venv/bin/python bench/perception_speed.py --eval-json E.json --calibration-json C.json   # reuse runs

``E.json`` is the output of ``robofollow perception eval --scene all --rounds 1 --every 1 --json``,
``C.json`` of ``robofollow calibrate sim-verify --json``. Speed is segmentation + grounding + pose +
tracking (``Perception.update``, with the simulator's colour calibration) on rendered 320×240 head
pictures, pinned to one core: the settled layout of every scene repeated (a still scene: segments
unchanged from frame to frame reuse their shape fits), and each scene's oracle trial seen after every
executed row (the arm moving, objects carried), clean and with 1 % depth noise. Smoke run:
``bench/perception_speed.py --smoke`` (few repeats, no docs written).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cv2
from benchdoc import write_section

from robofollow_ros.benchmark import default_registry
from robofollow_ros.perception.camera_model import CameraModel
from robofollow_ros.perception.tracker import Perception, load_colour_model
from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

ROBOFOLLOW = str(Path(sys.executable).with_name("robofollow"))
LAYOUTS = (("scene1", "default"), ("scene2", "default"), ("scene3", "default"), ("scene4", "scene4.1"))


def _pictures() -> tuple[dict[str, Any], dict[str, Any]]:
    """Settled head pictures of every scene, and each scene's oracle trial seen after every executed row."""
    from robofollow_ros.evaluation.episode import EpisodeSettings, run_episode
    from robofollow_ros.perception.perturb_eval import FrameRecorder
    from robofollow_ros.policy.spec import load_policy
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.world import SimWorld

    registry = default_registry()
    world = SimWorld(render=True, cameras=CameraSettings(depth=True, segmentation=True, cameras=("head",)))
    still = {}
    for scene, key in LAYOUTS:
        world.reset(registry.layout(scene, key), 3)
        still[scene] = (registry.layout(scene, key), world.render_images()["head"])
    recorder = FrameRecorder(world, every=1)
    policy = load_policy("oracle")
    trials = {}
    for scene in ("scene1", "scene2", "scene3", "scene4"):
        task = next(t for t in registry.eval_tasks(scene=scene))
        run_episode(recorder, policy, task, task.seed(1), EpisodeSettings(max_steps=10))
        trials[scene] = (world.layout, [(f.rgb, f.depth) for f in recorder.frames])
    world.close()
    return still, trials


def speed(repeats: int = 300) -> dict[str, tuple[float, float]]:
    """(wall, CPU-time) frames per second of Perception.update: still scenes (with and without depth), then
    trial sequences. CPU time is what one core's worth of work gives when other processes share the core."""
    import numpy as np

    from robofollow_ros.perception.perturb import depth_noise

    camera = CameraModel.from_calibration_dir(DEFAULT_CALIBRATION_DIR, "head")
    colour, _ = load_colour_model(DEFAULT_CALIBRATION_DIR)
    still, trials = _pictures()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    cv2.setNumThreads(1)
    out = {}
    for use_depth in (True, False):
        for scene, (layout, head) in still.items():
            perception = Perception(camera, layout, colour=colour)
            depth = head["depth"] if use_depth else None
            perception.update(head["rgb"], depth, 0.0)
            started, cpu = time.perf_counter(), time.process_time()
            for i in range(repeats):
                perception.update(head["rgb"], depth, i * 0.05)
            out[f"{scene}, still{'' if use_depth else ' (no depth)'}"] = (
                repeats / (time.perf_counter() - started), repeats / (time.process_time() - cpu))
    rng = np.random.default_rng(0)
    for noisy in (False, True):
        for scene, (layout, frames) in trials.items():
            pictures = [(rgb, depth_noise(depth, 0.01, rng) if noisy else depth) for rgb, depth in frames]
            laps = max(1, repeats // (3 * len(pictures)))
            count, started, cpu = 0, time.perf_counter(), time.process_time()
            for _ in range(laps):
                perception = Perception(camera, layout, colour=colour)
                for i, (rgb, depth) in enumerate(pictures):
                    perception.update(rgb, depth, i * 0.05)
                    count += 1
            label = f"{scene}, oracle trial ({len(pictures)} frames){', depth noise 1 %' if noisy else ''}"
            out[label] = (count / (time.perf_counter() - started), count / (time.process_time() - cpu))
    return out


def _run_json(args: list[str]) -> dict[str, Any]:
    done = subprocess.run([ROBOFOLLOW, *args, "--json"], capture_output=True, text=True, check=False)
    if not done.stdout.strip():
        raise SystemExit(f"robofollow {' '.join(args)} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _load(path: Path | None, args: list[str]) -> dict[str, Any]:
    if path is not None:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    return _run_json(args)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-json", type=Path)
    parser.add_argument("--calibration-json", type=Path)
    parser.add_argument("--no-depth-json", type=Path,
                        help="output of `perception eval --static --no-depth --json` (adds table-plane rows)")
    parser.add_argument("--smoke", action="store_true", help="speed only, few repeats, print, write no docs")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if args.smoke:
        for label, (wall, cpu) in speed(repeats=20).items():
            print(f"{label}: {wall:.0f} frames/s wall, {cpu:.0f} frames/s of CPU time")
        return
    evaluation = _load(args.eval_json, ["perception", "eval", "--scene", "all", "--rounds", "1", "--every", "1"])
    calibration = _load(args.calibration_json, ["calibrate", "sim-verify"])
    fps = speed()
    depth_fps = [cpu for k, (_, cpu) in fps.items() if "no depth" not in k]
    median, p95 = evaluation["median_position_error_m"], evaluation["p95_position_error_m"]
    identity, agreement = evaluation["identity_accuracy"], evaluation.get("oracle_agreement")
    agreement_text = ("not measured" if agreement is None
                      else f"{agreement * 100:.1f} % of {evaluation['trials']} trials")
    rows = [
        f"| median 3-D position error, visible objects, all 24 layouts (oracle playing) | {median * 1000:.2f} mm "
        f"| ≤ 10 mm: {_met(median <= 0.01)} |",
        f"| 95th percentile position error | {p95 * 1000:.2f} mm | ≤ 20 mm: {_met(p95 <= 0.02)} |",
        f"| largest position error | {evaluation['max_position_error_m'] * 1000:.1f} mm: "
        f"{evaluation.get('worst_position_error', '')} | |",
        f"| identity accuracy on visible objects | {identity * 100:.2f} % of {evaluation['identity_checks']} "
        f"| ≥ 99 %: {_met(identity >= 0.99)} |",
        f"| oracle verdict scored from perception = from ground truth | "
        f"{agreement_text} "
        f"| ≥ 95 %: {'—' if agreement is None else _met(agreement >= 0.95)} |",
        f"| frames compared (head camera, perception after every executed row) | {evaluation['frames']} | |",
    ]
    if args.no_depth_json is not None:
        plane = json.loads(args.no_depth_json.read_text(encoding="utf-8"))
        rows.append(f"| table-plane mode (RGB only, settled layouts): median / p95 position error, identity "
                    f"| {plane['median_position_error_m'] * 1000:.2f} mm / {plane['p95_position_error_m'] * 1000:.2f}"
                    f" mm, {plane['identity_accuracy'] * 100:.2f} % of {plane['identity_checks']} | (no goal) |")
    for camera in calibration["cameras"]:
        rows.append(f"| calibration `{camera['camera']}` ({camera['parent_frame']}): translation / rotation error "
                    f"| {camera['translation_error_m'] * 1000:.2f} mm / {camera['rotation_error_deg']:.3f}° "
                    f"(focal {camera['focal_error_px']:+.2f} px) | ≤ 5 mm, ≤ 0.5°: {_met(camera['ok'])} |")
    for scene, (wall, cpu) in fps.items():
        rows.append(f"| segmentation + grounding + pose + tracking, 320×240, one core, {scene} | {cpu:.0f} frames/s of "
                    f"CPU time ({wall:.0f} by the wall clock) | ≥ 100: {_met(cpu >= 100)} |")
    table = "\n".join([
        f"Measured {time.strftime('%Y-%m-%d')} with `bench/perception_speed.py` on {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}; speed pinned to one "
        f"core, load average {load:.1f} at the start (shared machine: lower bounds). Accuracy: `robofollow "
        f"perception eval --scene all --rounds 1 --every 1` (first task of each layout, round 1, depth on); "
        f"calibration: `robofollow calibrate sim-verify` (60 intrinsics pictures + 20 arm poses per camera).",
        "",
        "| measurement | result | goal |",
        "|---|---|---|",
        *rows,
        "",
        f"Slowest with depth: {min(depth_fps):.0f} frames/s of CPU time. Frames/s of CPU time = frames per second "
        f"of the process's own CPU time on its pinned core: on a shared core the wall clock also counts the "
        f"other processes' turns; on a quiet machine the two agree.",
    ])
    print(table)
    write_section("perception", table)


if __name__ == "__main__":
    main()
