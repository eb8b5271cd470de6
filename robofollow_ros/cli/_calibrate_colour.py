"""``robofollow calibrate colour``: the rig's colour model (white balance + colour classes) → colour.yaml.

Three sources, one output format (``perception/colour_model.py``):

- ``--layout scene:key --images DIR``: pictures of a known layout as laid out (``*.png``/``*.jpg``;
  a picture ``NAME.png`` may have its depth beside it as ``NAME.depth.png``, 16-bit millimetres as a
  RealSense saves it, or ``NAME.depth.npy``, float metres);
- ``--checker PICTURE --corners "u,v;u,v;u,v;u,v"``: a ColorChecker Classic and its patch grid's
  corners (top-left = dark skin patch, clockwise);
- ``--sim``: the simulator's own captures (this is how ``calibration/sim/colour.yaml`` is made).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, output_file, print_json, writing

PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg")


def register_colour(sub: Any) -> None:
    col = sub.add_parser("colour", help="white balance + colour classes from a known layout, a colour checker, "
                                        "or the simulator -> colour.yaml")
    col.add_argument("--layout", metavar="SCENE:KEY", help="the layout the pictures show (e.g. scene2:default)")
    col.add_argument("--images", type=Path, metavar="DIR", help="pictures of that layout (+ NAME.depth.png/.npy)")
    col.add_argument("--checker", type=Path, metavar="PICTURE", help="a picture of a ColorChecker Classic")
    col.add_argument("--corners", metavar="U,V;U,V;U,V;U,V", help="the checker's patch-grid corners in pixels")
    col.add_argument("--sim", action="store_true", help="learn from SAPIEN renders of one layout per scene")
    col.add_argument("--calibration", type=Path, metavar="DIR",
                     help="the camera's calibration (head.yaml, extrinsics.yaml); default calibration/sim")
    col.add_argument("--out", type=Path, metavar="FILE",
                     help="colour model to write (default <calibration>/colour.yaml)")
    col.add_argument("--json", action="store_true")
    col.set_defaults(func=_colour)


def _read_picture(path: Path) -> Any:
    import cv2

    picture = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if picture is None:
        raise CliError(f"--images: {path} is not a readable picture")
    return picture[..., ::-1].copy()


def _read_depth(picture: Path) -> Any:
    import cv2
    import numpy as np

    stem = picture.with_suffix("")
    png, npy = Path(f"{stem}.depth.png"), Path(f"{stem}.depth.npy")
    if png.is_file():
        depth = cv2.imread(str(png), cv2.IMREAD_UNCHANGED)
        if depth is None or depth.dtype != np.uint16 or depth.ndim != 2:
            raise CliError(f"--images: {png} must be a 16-bit one-channel PNG (millimetres)")
        return depth.astype(np.float32) / 1000.0
    if npy.is_file():
        depth = np.load(npy, allow_pickle=False)
        if depth.ndim != 2 or not np.issubdtype(depth.dtype, np.floating):
            raise CliError(f"--images: {npy} must hold a 2-D float array (metres)")
        return depth.astype(np.float32)
    return None


def _layout_captures(args: argparse.Namespace, registry: Any) -> tuple[Any, str]:
    scene, _, key = (args.layout or "").partition(":")
    try:
        layout = registry.layout(scene, key)
    except Exception as exc:
        raise CliError(f"--layout: {args.layout!r}: {exc}") from None
    if args.images is None or not args.images.is_dir():
        raise CliError(f"--images: {args.images} is not a directory")
    pictures = sorted(p for p in args.images.iterdir()
                      if p.suffix.lower() in PICTURE_SUFFIXES and not p.name.endswith(".depth.png"))
    if not pictures:
        raise CliError(f"--images: no .png/.jpg pictures in {args.images}")
    frames = [(_read_picture(p), _read_depth(p)) for p in pictures]
    return [(layout, frames)], f"layout {args.layout}, {len(frames)} pictures from {args.images}"


def _corners(text: str | None) -> list[tuple[float, float]]:
    try:
        corners = [tuple(float(v) for v in pair.split(",")) for pair in (text or "").split(";")]
    except ValueError:
        corners = []
    if len(corners) != 4 or any(len(c) != 2 or not all(math.isfinite(v) for v in c) for c in corners):
        raise CliError(f"--corners: expected four 'u,v' pairs separated by ';', got {text!r}")
    return [(c[0], c[1]) for c in corners]


def _colour(args: argparse.Namespace) -> int:
    modes = [bool(args.sim), args.checker is not None, args.layout is not None or args.images is not None]
    if sum(modes) != 1:
        raise CliError("colour: give exactly one of --sim, --checker PICTURE, or --layout SCENE:KEY --images DIR")
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.perception.camera_model import CalibrationError, CameraModel
    from robofollow_ros.perception.colour_calib import ColourCalibrationError, learn_from_layouts
    from robofollow_ros.perception.tracker import COLOUR_MODEL_FILE
    from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR

    calibration = args.calibration or DEFAULT_CALIBRATION_DIR
    try:
        camera = CameraModel.from_calibration_dir(calibration, "head")
    except CalibrationError as exc:
        raise CliError(f"--calibration: {exc}") from None
    registry = default_registry()
    out = output_file(args.out or Path(calibration) / COLOUR_MODEL_FILE, "--out", make_folder=True)
    counts: dict[str, int] = {}
    try:
        if args.checker is not None:
            from robofollow_ros.perception.colour_checker import model_from_checker

            rgb = _read_picture(args.checker) if args.checker.is_file() else None
            if rgb is None:
                raise CliError(f"--checker: {args.checker} is not a file")
            colours = [o.color_rgb for s in registry.layouts.values() for lay in s.values() for o in lay.objects]
            model = model_from_checker(rgb, _corners(args.corners), colours, f"colour checker {args.checker}")
        else:
            if args.sim:
                from robofollow_ros.perception.colour_calib_sim import CALIBRATION_LAYOUTS, render_captures

                captures = render_captures(registry, camera)
                source = "simulation: " + ", ".join(f"{s}:{k}" for s, k in CALIBRATION_LAYOUTS)
            else:
                captures, source = _layout_captures(args, registry)
            model, counts = learn_from_layouts(captures, camera, source)
    except (ColourCalibrationError, ValueError) as exc:
        raise CliError(f"colour: {exc}") from None
    with writing(out, "--out"):
        model.write(out)
    summary = {"out": str(out), "source": model.source, "white_balance": [round(g, 4) for g in model.white_balance],
               "classes": {name: [round(m.hue_deg, 1) for m in modes] for name, modes in model.classes.items()},
               "table": None if model.table is None else [round(v, 4) for v in model.table.mean_linear],
               "object_pixels": counts}
    if args.json:
        print_json(summary)
    else:
        print(f"wrote {out}: white balance {summary['white_balance']}, class hues (deg) {summary['classes']}")
    return 0
