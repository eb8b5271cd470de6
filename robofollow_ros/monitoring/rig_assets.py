"""The robot description's mesh files, served to live viewers through the websocket's asset fetch.

``/robot_description`` on the graph and in recordings names each mesh by ``file://`` URL (what
``RigConfig.robot_description`` writes, RViz and robot_state_publisher's convention). A browser cannot
load ``file://`` (Lichtblick web, app.foxglove.dev), and a viewer on another machine has no such file.
For ``package://`` URLs both Foxglove and Lichtblick (web and desktop) first ask the player: over a
Foxglove WebSocket connection that is the server's ``fetchAsset`` (advertised as the ``assets``
capability, which foxglove-sdk adds when the server has an asset handler); the desktop apps fall back
to ``ROS_PACKAGE_PATH`` when the server refuses. So the *live* view's copy of the description names each
local mesh ``package://robofollow_rig/<robot>/<path below the meshes' common folder>`` and
``RigAssets.fetch`` answers exactly those URIs with their files; the recording keeps the ``file://``
text unchanged (docs/foxglove.md says what each resolves against).

The handler is an allow-list, never a file server: only the exact URIs that the latest description
names (built here from its ``<mesh>`` and ``<texture>`` filenames with a mesh or image suffix) map to
files; any other URI, a traversal attempt, a file gone missing, something that is not a regular file or
a file over ``max_bytes`` is refused with the reason (the app shows it in the 3-D panel's problems).
"""

from __future__ import annotations

import os
import re
import stat
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import quote, unquote, urlsplit
from xml.sax.saxutils import unescape

#: The package name of the served URIs (``package://robofollow_rig/<robot>/<file>``).
PACKAGE = "robofollow_rig"
#: Largest file served (an STL of a detailed arm link is a few MB; ALOHA's are ≤ 2 MB).
MAX_ASSET_BYTES = 64 * 1024 * 1024
#: Most files one description may have served (the rest keep their ``file://`` URL).
MAX_ASSETS = 1024
#: Files a viewer loads for a URDF: meshes (STL, COLLADA, OBJ, glTF) and the textures they name.
ASSET_SUFFIXES = frozenset({".stl", ".dae", ".obj", ".glb", ".gltf", ".png", ".jpg", ".jpeg"})
_FILENAME = re.compile(r"""(\bfilename\s*=\s*)(["'])(.*?)\2""", re.DOTALL)
_ATTRIBUTE_ENTITIES = {"&quot;": '"', "&apos;": "'"}


class AssetRefused(LookupError):
    """A fetch the handler does not answer; the SDK sends the viewer ``AssetRefused: <message>``."""


@dataclass(frozen=True)
class ServedDescription:
    """A description as the live view gets it, and the files its ``package://`` URIs stand for."""

    urdf: str
    files: dict[str, str] = field(default_factory=dict)  # package URI -> absolute local path


def _local_path(filename: str) -> str | None:
    """The absolute local path a ``file:///…`` URL (or a bare absolute path) names, else None."""
    if filename.startswith("/"):
        path = filename
    else:
        parts = urlsplit(filename)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            return None
        path = parts.path
        if "%" in path and not os.path.exists(path):
            path = unquote(path)  # a percent-encoded URL; RigConfig writes paths as they are
    path = os.path.normpath(path)
    return path if os.path.isabs(path) and PurePosixPath(path).suffix.lower() in ASSET_SUFFIXES else None


def _segment(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip(".") or "robot"


def serve_description(urdf: str) -> ServedDescription:
    """``urdf`` with each local mesh and texture named by a ``package://robofollow_rig/…`` URI.

    The robot's name (``<robot name>``) is the URI's second segment; below it each file's path relative to
    the folder all the served files share (ALOHA: ``vx300s_1_base.stl``). Not a URDF, or nothing local to
    serve: the text unchanged and no files. ``package://``, ``http(s)://`` and relative names stay as written.
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError:
        return ServedDescription(urdf)
    named = [el.get("filename", "") for el in root.iter() if el.tag in ("mesh", "texture")]
    local: dict[str, str] = {}  # filename as written -> local path
    paths: set[str] = set()
    for filename in named:
        path = _local_path(filename)
        if path is not None and (path in paths or len(paths) < MAX_ASSETS):
            local[filename] = path
            paths.add(path)
    if not local:
        return ServedDescription(urdf)
    common = os.path.commonpath([os.path.dirname(p) for p in paths])
    prefix = f"package://{PACKAGE}/{_segment(root.get('name') or '')}/"
    uri_of = {path: prefix + quote(os.path.relpath(path, common), safe="/-_.~") for path in paths}
    by_name = {filename: uri_of[path] for filename, path in local.items()}

    def rewrite(match: re.Match[str]) -> str:  # the text as written, only the served filenames replaced
        uri = by_name.get(unescape(match[3], _ATTRIBUTE_ENTITIES))
        return match[0] if uri is None else f"{match[1]}{match[2]}{uri}{match[2]}"

    return ServedDescription(_FILENAME.sub(rewrite, urdf), {uri: path for path, uri in uri_of.items()})


class RigAssets:
    """The live view's robot description and the asset handler that serves its files (thread-safe).

    ``live_description`` is called with every description published; the latest one's files are the
    allow-list. ``fetch`` is the foxglove-sdk ``asset_handler`` (called on the SDK's worker threads).
    ``requested`` / ``served`` count URIs asked for and answered, ``refused`` the refusals' reasons.
    """

    def __init__(self, max_bytes: int = MAX_ASSET_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes: must be > 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._files: dict[str, str] = {}
        self._cache: tuple[str, str] | None = None  # (description, its live text)
        self.requested: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.refused: list[str] = []

    @property
    def files(self) -> dict[str, str]:
        with self._lock:
            return dict(self._files)

    def live_description(self, urdf: str) -> str:
        """The live view's text of ``urdf`` (``package://`` URIs); its files become the ones served."""
        with self._lock:
            if self._cache is not None and self._cache[0] == urdf:
                return self._cache[1]
        served = serve_description(urdf)
        with self._lock:
            self._files, self._cache = served.files, (urdf, served.urdf)
        return served.urdf

    def fetch(self, uri: str) -> bytes:
        """The bytes of an allowed URI's file; ``AssetRefused`` naming why for anything else."""
        with self._lock:
            self.requested[uri] += 1
            path = self._files.get(uri)
        try:
            if path is None:
                raise AssetRefused(f"{uri[:300]!r} is not a file of the current robot description")
            try:
                info = os.stat(path)
            except OSError as exc:
                raise AssetRefused(f"{uri}: {exc.strerror or exc}") from None
            if not stat.S_ISREG(info.st_mode):
                raise AssetRefused(f"{uri}: not a regular file")
            if info.st_size > self.max_bytes:
                raise AssetRefused(f"{uri}: {info.st_size} bytes, more than the {self.max_bytes} served")
            try:
                with open(path, "rb") as handle:
                    data = handle.read(self.max_bytes + 1)
            except OSError as exc:
                raise AssetRefused(f"{uri}: {exc.strerror or exc}") from None
            if len(data) > self.max_bytes:
                raise AssetRefused(f"{uri}: more than the {self.max_bytes} bytes served")
        except AssetRefused as refused:
            with self._lock:
                self.refused.append(str(refused))
                del self.refused[:-100]
            raise
        with self._lock:
            self.served[uri] += 1
        return data


__all__ = ["ASSET_SUFFIXES", "MAX_ASSETS", "MAX_ASSET_BYTES", "PACKAGE", "AssetRefused", "RigAssets",
           "ServedDescription", "serve_description"]
