"""The documented perturbation suites of ``robofollow perception eval --perturb SUITE``.

Each item is one perturbation at one level: picture-side operations applied to the rendered frame
(``perturb.py``), or a scene-side change rendered by SAPIEN (``scene``: a table texture, a second
shadow-casting light, distractor objects; ``robofollow_ros.sim.scene_style``). ``goal`` marks the
items at the levels issue 19 states goals for (identity ≥ 99 %, median ≤ 1 cm, p95 ≤ 2 cm).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robofollow_ros.perception import perturb, perturb_faults

#: Scene variants a suite item may ask SAPIEN for (``clean`` = today's scene).
SCENES = ("clean", "oak", "birch", "checker", "gingham", "shadows", "distractors", "lookalike")


@dataclass(frozen=True)
class Perturbation:
    """One row of the benchmark: a scene variant plus picture operations, applied in order."""

    name: str
    description: str
    scene: str = "clean"
    ops: tuple[tuple[str, tuple[Any, ...]], ...] = field(default=())
    goal: bool = False

    @property
    def depth_offset(self) -> tuple[float, float, float] | None:
        """Where the item's separate depth camera sits in the colour frame (perception aligns with it)."""
        for op, args in self.ops:
            if op == "depth_camera_offset":
                return float(args[0]), float(args[1]), float(args[2])
        return None

    def apply(self, rgb: np.ndarray, depth: np.ndarray, camera_k: np.ndarray, rng: np.random.Generator,
              index: int = 0, segmentation: np.ndarray | None = None, ids: Mapping[str, int] | None = None,
              flat: frozenset[str] = frozenset()) -> tuple[np.ndarray, np.ndarray | None]:
        """The perturbed (rgb, depth); depth None on a stalled frame (colour only). The inputs are not
        modified. ``index`` (the frame's place in the trial), ``segmentation``/``ids`` (which pixels are which
        object) and ``flat`` (the layout's labels) only build the multi-frame faults (``perturb_faults``)."""
        focal_px = float(camera_k[0, 0])
        out_depth: np.ndarray | None = depth
        for op, args in self.ops:
            if op in ("half_hidden", "fragments"):
                if segmentation is None or ids is None:
                    raise ValueError(f"perturbation {self.name!r}: {op} needs the frame's segmentation")
                if op == "half_hidden":
                    rgb, depth, _ = perturb_faults.half_hidden(rgb, depth, segmentation, ids, flat, rng, *args)
                else:
                    rgb, depth = perturb_faults.fragments(rgb, depth, segmentation, ids, rng, *args)
            elif op == "flying_pixels":
                depth = perturb.flying_pixels(depth, rng, *args)
            elif op == "depth_stall":
                if perturb_faults.stalled(index, *args):
                    out_depth = None
            elif op == "white_balance":
                rgb = perturb.white_balance(rgb, args)
            elif op == "white_balance_codes":
                rgb = perturb.white_balance_codes(rgb, args)
            elif op == "exposure":
                rgb = perturb.exposure(rgb, *args)
            elif op == "depth_noise":
                depth = perturb.depth_noise(depth, float(args[0]), rng)
            elif op == "edge_holes":
                depth = perturb.edge_holes(depth, focal_px, *args)
            elif op == "misregister":
                depth = perturb.misregister(depth, *args)
            elif op == "jpeg":
                rgb = perturb.jpeg(rgb, *args)
            elif op == "motion_blur":
                rgb = perturb.motion_blur(rgb, *args)
            elif op == "depth_camera_offset":
                depth = perturb.offset_depth_camera(depth, camera_k, tuple(args))
            else:
                raise ValueError(f"perturbation {self.name!r}: unknown operation {op!r}")
        return rgb, (None if out_depth is None else depth)


def _wb(name: str, gains: tuple[float, float, float], goal: bool = True) -> Perturbation:
    return Perturbation(name, f"white balance: linear gains R×{gains[0]:.2f} G×{gains[1]:.2f} B×{gains[2]:.2f}",
                        ops=(("white_balance", gains),), goal=goal)


def _exposure(factor: float) -> Perturbation:
    return Perturbation(f"exposure x{factor:g}", f"exposure ×{factor:g} (linear light, highlights clip)",
                        ops=(("exposure", (factor,)),), goal=0.5 <= factor <= 1.5)


def _noise(rho: float) -> Perturbation:
    return Perturbation(f"depth noise {rho * 100:g}%",
                        f"depth noise σ(z) = {rho * 100:g} % · z²/1 m ({rho * 0.64 * 1000:.1f} mm at 0.8 m)",
                        ops=(("depth_noise", (rho,)),), goal=rho <= 0.01)


STANDARD: tuple[Perturbation, ...] = (
    Perturbation("clean", "the rendered frame as it is"),
    _wb("wb red +12%", (1.12, 1.0, 1.0)),
    _wb("wb warm", (1.2, 1.0, 0.8)),
    _wb("wb cool", (0.8, 1.0, 1.2)),
    _wb("wb green", (0.8, 1.2, 0.8)),
    _wb("wb magenta", (1.2, 0.8, 1.2)),
    Perturbation("wb codes +12% red", "gains R×1.12 B×0.88 on the sRGB codes (≈ ×1.28 / ×0.75 in linear light): "
                 "the earlier experiment that made the table 'yellow'",
                 ops=(("white_balance_codes", (1.12, 1.0, 0.88)),)),
    _exposure(0.25), _exposure(0.5), _exposure(1.5), _exposure(1.7),
    _noise(0.005), _noise(0.01), _noise(0.02),
    Perturbation("depth holes", "stereo occlusion band (D435 baseline 50 mm) + 1 px matcher failures at depth edges",
                 ops=(("edge_holes", ()),)),
    Perturbation("misreg 1px", "depth 1 px right of colour", ops=(("misregister", (1, 0)),), goal=True),
    Perturbation("misreg 2px x", "depth 2 px right of colour", ops=(("misregister", (2, 0)),), goal=True),
    Perturbation("misreg 2px y", "depth 2 px below colour", ops=(("misregister", (0, 2)),), goal=True),
    Perturbation("depth camera 15mm", "depth from a stereo origin 15 mm right of the colour camera, aligned by "
                 "perception with the calibrated extrinsics", ops=(("depth_camera_offset", (0.015, 0.0, 0.0)),),
                 goal=True),
    Perturbation("jpeg q50", "JPEG quality 50 (4:2:0)", ops=(("jpeg", (50,)),), goal=True),
    Perturbation("jpeg q30", "JPEG quality 30 (4:2:0)", ops=(("jpeg", (30,)),)),
    Perturbation("motion blur 5px", "horizontal motion blur over 5 px", ops=(("motion_blur", (5, 0.0)),)),
    Perturbation("motion blur 9px", "diagonal motion blur over 9 px", ops=(("motion_blur", (9, 30.0)),)),
    Perturbation("table oak", "oak-textured table (SAPIEN)", scene="oak", goal=True),
    Perturbation("table birch", "birch-textured table (SAPIEN)", scene="birch", goal=True),
    Perturbation("table checker", "dark/light checkered tablecloth (SAPIEN)", scene="checker"),
    Perturbation("table gingham", "red/white gingham tablecloth (SAPIEN)", scene="gingham"),
    Perturbation("shadows", "second, shadow-casting light (SAPIEN)", scene="shadows"),
    Perturbation("distractors", "unused-colour objects on the table (SAPIEN)", scene="distractors"),
    # Holes before noise: a stereo camera loses depth where the geometry has edges, not where its noise does.
    Perturbation("rig-like combined", "oak table, wb warm ×1.1, exposure ×0.8, edge holes, noise 1 %, "
                 "1 px misregistration, JPEG q70",
                 scene="oak", ops=(("white_balance", (1.1, 1.0, 0.9)), ("exposure", (0.8,)), ("edge_holes", ()),
                                   ("depth_noise", (0.01,)), ("misregister", (1, 0)), ("jpeg", (70,)))),
)

#: The fault families of issue 37 (a real RealSense bench), with the earlier families they sit beside.
FAULTS: tuple[Perturbation, ...] = (
    STANDARD[0],
    Perturbation("depth stall", "no fresh depth on 2 of every 4 frames: colour only, as perception_node does with "
                 "depth more than 1 s old", ops=(("depth_stall", (4, 2)),)),
    Perturbation("half hidden", "a grey arm 8 cm nearer hides half of one object (a label first)",
                 ops=(("half_hidden", (0.5,)),)),
    Perturbation("flying pixels", "mixed depth within 2 px of every depth edge", ops=(("flying_pixels", (2,)),)),
    Perturbation("look-alike", "one object taken off the table, a 4 cm cube of its colour where it stood (SAPIEN)",
                 scene="lookalike"),
    Perturbation("fragments", "two 6×6 px patches of a layout colour standing 2 cm up on the table",
                 ops=(("fragments", (2,)),)),
    *(p for p in STANDARD if p.name in ("wb warm", "depth noise 1%", "depth holes", "motion blur 9px", "table oak")),
    Perturbation("realistic mix", "rig-like combined plus flying pixels, a half-hidden object and depth stalls",
                 scene="oak", ops=(("white_balance", (1.1, 1.0, 0.9)), ("exposure", (0.8,)), ("edge_holes", ()),
                                   ("flying_pixels", (2,)), ("depth_noise", (0.01,)), ("misregister", (1, 0)),
                                   ("half_hidden", (0.5,)), ("jpeg", (70,)), ("depth_stall", (4, 1)))),
)

SUITES: dict[str, tuple[Perturbation, ...]] = {
    "standard": STANDARD,
    "faults": FAULTS,
    "goals": tuple(p for p in STANDARD if p.goal or p.name == "clean"),
    "pictures": tuple(p for p in STANDARD if p.scene == "clean"),
    "clean": (STANDARD[0],),
}


def resolve_suite(spec: str) -> tuple[Perturbation, ...]:
    """A suite by name, or a comma-separated list of item names (``"clean,jpeg q50"``)."""
    if spec in SUITES:
        return SUITES[spec]
    by_name = {p.name: p for p in (*STANDARD, *FAULTS)}
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in by_name]
    if not names or unknown:
        raise ValueError(f"--perturb: {spec!r} is neither a suite ({', '.join(SUITES)}) nor a list of items; "
                         f"unknown: {unknown or [spec]}")
    return tuple(by_name[n] for n in names)


def scenes_of(items: Sequence[Perturbation]) -> list[str]:
    """Scene variants the items need, ``clean`` first, each once."""
    out = ["clean"]
    for p in items:
        if p.scene not in out:
            out.append(p.scene)
    return out
