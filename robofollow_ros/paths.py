"""Where the package's shared files (config, urdf, calibration, launch) live.

Installed by colcon they sit under ``share/robofollow_ros`` and the ament index finds them; in a
source checkout or ``pip install -e .`` they sit at the repository root beside ``package.xml``.
"""

from __future__ import annotations

import functools
from pathlib import Path

PACKAGE = "robofollow_ros"


@functools.lru_cache(maxsize=1)
def package_share() -> Path:
    """The directory holding ``config/``, ``urdf/``, ``calibration/`` and ``launch/``."""
    source_root = Path(__file__).resolve().parent.parent
    if (source_root / "package.xml").is_file() and (source_root / "config").is_dir():
        return source_root
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception as exc:
        raise FileNotFoundError(
            f"cannot find the {PACKAGE} share directory: not a source checkout and not in the ament index ({exc})"
        ) from None


def share_path(*parts: str) -> Path:
    """A file under the share directory, e.g. ``share_path("config", "rig", "arm_drivers.yaml")``."""
    return package_share().joinpath(*parts)
