"""``robofollow calibrate intrinsics|extrinsics|sim-verify``: camera calibration with OpenCV.

- ``intrinsics``: pictures of a ChArUco (or checkerboard) board → ROS ``camera_info`` YAML.
- ``extrinsics``: a recording (pictures + joint states, ``recording.yaml``) → static transform of
  the camera (head: in ``world``, eye-to-hand; wrists: in their hand link, eye-in-hand), merged into
  an ``extrinsics.yaml`` in the layout of ``calibration/sim/extrinsics.yaml``.
- ``sim-verify``: the same two steps on pictures rendered in SAPIEN, compared with the URDF's mounts.
- ``colour``: white balance and colour classes → ``colour.yaml`` (``_calibrate_colour.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from robofollow_ros.cli._calibrate_colour import register_colour
from robofollow_ros.cli._common import CliError, integer, number, output_file, print_json, writing

CAMERAS = ("head", "left_wrist", "right_wrist")
#: Squares along a side of a calibration board (a printable one has a handful).
MAX_BOARD_SQUARES = 100


def register(subparsers: Any) -> None:
    calibrate = subparsers.add_parser("calibrate", help="camera intrinsics and extrinsics (OpenCV, ChArUco), colour")
    sub = calibrate.add_subparsers(dest="calibrate_command", metavar="ACTION", required=True)

    intr = sub.add_parser("intrinsics", help="board pictures -> camera_info YAML")
    intr.add_argument("--images", required=True, type=Path, metavar="DIR", help="directory of .png/.jpg pictures")
    intr.add_argument("--camera", required=True, help=f"camera name, one of {', '.join(CAMERAS)}")
    intr.add_argument("--out", required=True, type=Path, metavar="FILE", help="camera_info YAML to write")
    _board_arguments(intr)
    intr.add_argument("--distortion", default="radial", help="none | radial (k1, k2) | full (default radial)")
    intr.add_argument("--json", action="store_true")
    intr.set_defaults(func=_intrinsics)

    ext = sub.add_parser("extrinsics", help="recording (pictures + joint states) -> static transform")
    ext.add_argument("--recording", required=True, type=Path, metavar="DIR", help="directory with recording.yaml")
    ext.add_argument("--camera-info", required=True, type=Path, metavar="FILE", help="the camera's camera_info YAML")
    ext.add_argument("--out", required=True, type=Path, metavar="FILE",
                     help="extrinsics YAML to write (an existing file keeps its other cameras)")
    ext.add_argument("--json", action="store_true")
    ext.set_defaults(func=_extrinsics)

    ver = sub.add_parser("sim-verify", help="calibrate the simulated cameras from SAPIEN pictures; compare with truth")
    ver.add_argument("--cameras", default=",".join(CAMERAS), help="comma-separated cameras (default all three)")
    ver.add_argument("--views", type=integer(3, 1000), default=20, metavar="N",
                     help="hand-eye arm poses per camera (default 20)")
    ver.add_argument("--intrinsic-views", type=integer(3, 1000), default=60, metavar="N",
                     help="board pictures for intrinsics per camera (default 60)")
    ver.add_argument("--out", type=Path, metavar="DIR",
                     help="write the recovered camera_info files, extrinsics.yaml and the recordings here")
    ver.add_argument("--json", action="store_true")
    ver.set_defaults(func=_sim_verify)
    register_colour(sub)


def _board_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--board", default="charuco", help="charuco | checkerboard (default charuco)")
    parser.add_argument("--squares", default="5x7", metavar="XxY", help="squares across x down (default 5x7)")
    parser.add_argument("--square-m", type=number(0, 1, low_open=True, unit="m"), default=0.03,
                        help="square side, m (default 0.03)")
    parser.add_argument("--marker-m", type=number(0, 1, low_open=True, unit="m"), default=0.022,
                        help="ArUco marker side, m (default 0.022)")
    parser.add_argument("--dictionary", default="4x4_50", help="ArUco dictionary (default 4x4_50)")


def _board(args: argparse.Namespace) -> Any:
    from robofollow_ros.perception.calib_board import BoardError, BoardSpec

    try:
        x, y = (int(v) for v in args.squares.lower().split("x"))
    except ValueError:
        raise CliError(f"--squares: expected XxY such as 5x7, got {args.squares!r}") from None
    if not (3 <= x <= MAX_BOARD_SQUARES and 3 <= y <= MAX_BOARD_SQUARES):
        raise CliError(f"--squares: each side must be 3..{MAX_BOARD_SQUARES} squares, got {args.squares!r}")
    try:
        return BoardSpec(args.board, x, y, args.square_m, args.marker_m, args.dictionary)
    except BoardError as exc:
        raise CliError(str(exc)) from None


def _check_camera(name: str, flag: str = "--camera") -> None:
    if name not in CAMERAS:
        raise CliError(f"{flag}: expected one of {', '.join(CAMERAS)}, got {name!r}")


def _intrinsics(args: argparse.Namespace) -> int:
    _check_camera(args.camera)
    output_file(args.out, "--out", make_folder=True)
    from robofollow_ros.contract import CAMERA_FRAMES
    from robofollow_ros.perception.calib_record import RecordingError, intrinsics_from_images
    from robofollow_ros.perception.calib_solve import CalibrationSolveError, camera_info_dict

    board = _board(args)
    if not args.images.is_dir():
        raise CliError(f"--images: {args.images} is not a directory")
    paths = sorted(p for p in args.images.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if not paths:
        raise CliError(f"--images: no .png/.jpg pictures in {args.images}")
    try:
        k, dist, rms, size, used = intrinsics_from_images(paths, board, args.distortion)
    except (RecordingError, CalibrationSolveError) as exc:
        raise CliError(str(exc)) from None
    import yaml

    info = camera_info_dict(args.camera, f"{CAMERA_FRAMES[args.camera]}_optical", size, k, dist)
    with writing(args.out, "--out"):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(yaml.safe_dump(info, sort_keys=False, default_flow_style=None), encoding="utf-8")
    summary = {"camera": args.camera, "out": str(args.out), "views_used": used, "pictures": len(paths),
               "rms_px": round(rms, 4), "fx": round(float(k[0, 0]), 3), "cx": round(float(k[0, 2]), 3),
               "cy": round(float(k[1, 2]), 3)}
    print_json(summary) if args.json else print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


def _extrinsics(args: argparse.Namespace) -> int:
    import numpy as np

    from robofollow_ros.perception.calib_board import BoardError
    from robofollow_ros.perception.calib_record import RecordingError, read_recording, solve_recording
    from robofollow_ros.perception.calib_solve import CalibrationSolveError
    from robofollow_ros.perception.camera_model import CalibrationError, _load_yaml, _matrix

    existing = _existing_yaml(output_file(args.out, "--out", make_folder=True), "--out")  # refused now, not later
    try:
        recording = read_recording(args.recording)
        info = _load_yaml(args.camera_info)
        k = _matrix(info.get("camera_matrix"), "camera_matrix", 3, 3)
        dist = np.asarray(info.get("distortion_coefficients", {}).get("data", [0.0] * 5), dtype=np.float64)
        solution = solve_recording(recording, known_intrinsics=(k, dist))
    except (RecordingError, BoardError, CalibrationError, CalibrationSolveError) as exc:
        raise CliError(str(exc)) from None
    with writing(args.out, "--out"):
        args.out.parent.mkdir(parents=True, exist_ok=True)
        _merge_extrinsic(args.out, solution, existing)
    summary = {"camera": solution.camera, "parent_frame": solution.parent_frame, "out": str(args.out),
               "views_used": solution.views_used, "views": solution.views_total,
               "reprojection_px": round(solution.reprojection_px, 4)}
    print_json(summary) if args.json else print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


def _existing_yaml(path: Path, flag: str) -> dict[str, Any]:
    """The mapping an output YAML that the command merges into holds ({} when it is absent or empty); one that
    cannot be read (not UTF-8, not YAML, not a mapping, a directory) is refused naming ``flag`` and the file."""
    from robofollow_ros.yamlio import read_yaml_mapping

    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return {}
    return read_yaml_mapping(path, flag, CliError)


def _merge_extrinsic(path: Path, solution: Any, existing: dict[str, Any]) -> None:
    import yaml

    from robofollow_ros.perception.calib_solve import transform_entry

    merged = {**existing,
              solution.camera: transform_entry(solution.parent_frame, solution.child_frame, solution.pose)}
    header = "# Written by `robofollow calibrate`; optical frames: +z forward, +x right, +y down.\n"
    path.write_text(header + yaml.safe_dump(merged, sort_keys=False, default_flow_style=None), encoding="utf-8")


def _sim_verify(args: argparse.Namespace) -> int:
    cameras = [c.strip() for c in args.cameras.split(",") if c.strip()]
    if not cameras:
        raise CliError("--cameras: name at least one camera")
    for camera in cameras:
        _check_camera(camera, "--cameras")
    from robofollow_ros.perception.calib_verify import TOLERANCE_DEG, TOLERANCE_M, verify_camera, write_solutions

    if args.out is not None:
        if args.out.exists() and not args.out.is_dir():
            raise CliError(f"--out: {args.out} exists and is not a directory")
        _existing_yaml(args.out / "extrinsics.yaml", "--out")  # merged into at the end: refused now if unreadable

    with tempfile.TemporaryDirectory(prefix="robofollow_calib_") as tmp:
        work = args.out if args.out is not None else Path(tmp)
        with writing(work, "--out") if args.out is not None else contextlib.nullcontext():
            checks = [verify_camera(camera, work, args.views, args.intrinsic_views) for camera in cameras]
            if args.out is not None:
                write_solutions(args.out, [c.solution for c in checks])
    report = {"tolerance_m": TOLERANCE_M, "tolerance_deg": TOLERANCE_DEG, "ok": all(c.ok for c in checks),
              "cameras": [c.summary() for c in checks]}
    if args.json:
        print_json(report)
    else:
        for check in checks:
            c = check.summary()
            print(f"{c['camera']}: {'ok' if c['ok'] else 'FAILED'} translation {c['translation_error_m'] * 1000:.2f} mm"
                  f" rotation {c['rotation_error_deg']:.3f} deg focal {c['focal_error_px']:+.2f} px")
    return 0 if report["ok"] else 1
