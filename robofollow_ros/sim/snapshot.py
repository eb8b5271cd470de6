"""Pictures of one simulated trial's start: the three camera PNGs beside the top-down layout plot.

Used by ``robofollow sim snapshot`` and for the scene pictures in docs/sim.md. The plot itself
(``rig.layout_picture``) is drawn from the settled physics state, so it shows exactly where the seed
put every object.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES


def write_png(path: Path, rgb: np.ndarray) -> Path:
    import cv2

    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"rgb: expected a uint8 (H, W, 3) image, got {rgb.dtype} {rgb.shape}")
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")
    return path


def snapshot_files(out_dir: Path) -> dict[str, Path]:
    """Names of the files a snapshot writes (camera PNGs by camera name, plus ``layout``)."""
    files = {name: out_dir / f"{name}.png" for name in CAMERA_NAMES}
    files["layout"] = out_dir / "layout_topdown.png"
    return files
