"""``robofollow sim snapshot|calibration|urdf``: pictures, calibration files and the rig URDF of the simulator."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import (
    MAX_PIXELS,
    SEED,
    CliError,
    add_rig_option,
    integer,
    output_file,
    print_json,
    writing,
)

#: A camera picture's width or height.
pixels = integer(1, MAX_PIXELS, unit="pixels")


def register(subparsers: Any) -> None:
    sim = subparsers.add_parser("sim", help="SAPIEN simulation of the rig: snapshots and calibration files")
    sub = sim.add_subparsers(dest="sim_command", metavar="ACTION", required=True)

    snap = sub.add_parser("snapshot", help="write the three camera PNGs and a labelled top-down layout picture")
    snap.add_argument("--task", required=True, metavar="ID", help="evaluation or training task id")
    snap.add_argument("--round", type=integer(1, 10), default=1, metavar="R", help="evaluation round 1..10 (default 1)")
    snap.add_argument("--seed", type=SEED, help="trial seed (overrides --round; required for training tasks)")
    snap.add_argument("--out", required=True, type=Path, metavar="DIR")
    snap.add_argument("--width", type=pixels, default=320)
    snap.add_argument("--height", type=pixels, default=240)
    add_rig_option(snap)
    snap.set_defaults(func=_snapshot)

    calib = sub.add_parser("calibration", help="write camera_info YAMLs and extrinsics of the simulated cameras")
    calib.add_argument("--out", required=True, type=Path, metavar="DIR")
    calib.add_argument("--width", type=pixels, default=320)
    calib.add_argument("--height", type=pixels, default=240)
    add_rig_option(calib)
    calib.set_defaults(func=_calibration)

    urdf = sub.add_parser("urdf", help="regenerate the built-in rig URDF from its figures")
    urdf.add_argument("--out", required=True, type=Path, metavar="PATH")
    urdf.set_defaults(func=_urdf)


def _load_rig(args: argparse.Namespace) -> Any:
    """The rig ``--rig`` named (loaded and made active before the handler ran), else the built-in one."""
    if getattr(args, "rig_config", None) is not None:
        return args.rig_config
    from robofollow_ros.robot.rig_config import RigConfigError, load_rig_config

    try:
        return load_rig_config()
    except RigConfigError as exc:
        raise CliError(str(exc)) from None


def _snapshot(args: argparse.Namespace) -> int:
    from robofollow_ros.benchmark import EvalTask, UnknownTaskError, default_registry

    reg = default_registry()
    try:
        task = reg.task(args.task)
    except UnknownTaskError as exc:
        raise CliError(str(exc)) from None
    if args.seed is not None:
        seed = args.seed
    elif isinstance(task, EvalTask):
        if not 1 <= args.round <= len(task.seeds):
            raise CliError(f"--round: expected 1..{len(task.seeds)}, got {args.round}")
        seed = task.seed(args.round)
    else:
        raise CliError(f"--seed: training task {args.task!r} has no evaluation seeds; pass --seed")
    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out: {str(args.out)!r} exists and is not a directory")
    rig = _load_rig(args)

    from robofollow_ros.rig.layout_picture import plot_layout
    from robofollow_ros.scoring.geometry import yaw_of
    from robofollow_ros.sim.camera_settings import CameraSettings
    from robofollow_ros.sim.snapshot import snapshot_files, write_png
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=True, cameras=CameraSettings(args.width, args.height), rig=rig)
    world.reset(task, seed)
    files = snapshot_files(args.out)
    frame = world.scorer_frame()
    assert world.layout is not None
    with writing(args.out, "--out"):
        args.out.mkdir(parents=True, exist_ok=True)
        for camera, images in world.render_images().items():
            write_png(files[camera], images["rgb"])
        plot_layout(files["layout"], world.layout, frame["objects"],
                    {n: yaw_of(q) for n, q in frame["object_quats"].items()},
                    {"left": frame["ee_left"], "right": frame["ee_right"]},
                    f"{task.scene} / {world.layout.key} / {task.task_id} / seed {seed}")
    print_json({"task": task.task_id, "scene": task.scene, "layout": world.layout.key, "seed": seed,
                "files": {k: str(v) for k, v in files.items()}})
    return 0


def _calibration(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise CliError(f"--out: {str(args.out)!r} exists and is not a directory")
    rig = _load_rig(args)
    from robofollow_ros.robot.calibration import write_rig_calibration

    with writing(args.out, "--out"):
        written = write_rig_calibration(args.out, rig, args.width, args.height)
    print_json({"files": [str(p) for p in written]})
    return 0


def _urdf(args: argparse.Namespace) -> int:
    from robofollow_ros.robot.rig_urdf import write_rig_urdf

    output_file(args.out, "--out", make_folder=True)
    with writing(args.out, "--out"):
        written = write_rig_urdf(args.out)
    print_json({"urdf": str(written)})
    return 0
