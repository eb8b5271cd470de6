"""One URDF for the whole rig, composed from the lab's description without renaming anything in it.

The simulator (SAPIEN's URDF loader) and the NumPy kinematics read one file. A lab's description has
its own link and joint names, meshes behind ``package://`` or relative URIs, perhaps no ``world`` root
and no frame named as the contract names TCPs and cameras. This module copies the lab's tree as it is and
only *adds* to it: a ``world`` root with the rig YAML's mount, the contract's frames (``left_base``,
``left_tcp``, ``head_camera`` …) as massless fixed links on the lab's links, and every mesh URI resolved to
an absolute path. The result is written once per content hash under the user's cache folder, so every
process of a run (nodes, Ray workers) composes the same file.

A lab whose description is one arm (AgileX's ``piper_description``: ``base_link``, ``link1..8``,
``joint1..8``) names it once per arm (the rig YAML's ``arms``): :func:`compose_arms` copies each arm's tree
with every link and joint name prefixed (``left/link6``) and hangs it on a ``world`` root by its mount. The
prefix is the only renaming, and only because one tree cannot hold two links of one name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robofollow_ros.contract import WORLD_FRAME
from robofollow_ros.robot.rig_files import RigFileError, resolve_uri
from robofollow_ros.robot.urdf_model import rpy_matrix


class RigComposeError(ValueError):
    """A description that cannot be composed into the rig's URDF; the message names the file, element and value."""


@dataclass(frozen=True)
class FixedFrame:
    """A frame the contract needs, hung on one of the description's links with a fixed offset."""

    name: str
    parent: str
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


def matrix_to_rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF ``rpy`` (R = Rz(yaw)·Ry(pitch)·Rx(roll)) of a rotation matrix; the inverse of ``rpy_matrix``."""
    m = np.asarray(rotation, dtype=np.float64)
    pitch = float(np.arcsin(np.clip(-m[2, 0], -1.0, 1.0)))
    if abs(m[2, 0]) < 1.0 - 1e-9:
        roll = float(np.arctan2(m[2, 1], m[2, 2]))
        yaw = float(np.arctan2(m[1, 0], m[0, 0]))
    else:  # gimbal lock: put the whole turn about z into yaw
        roll = 0.0
        yaw = float(np.arctan2(-m[0, 1], m[1, 1]))
    return roll, pitch, yaw


def _fmt(values: Sequence[float]) -> str:
    return " ".join(repr(float(v)) for v in values)


def resolve_meshes(root: ET.Element, base: Path, search_path: Sequence[Path], source: str) -> list[Path]:
    """Rewrite every ``<mesh filename>`` as an absolute path; returns the mesh files (errors name the link)."""
    files: list[Path] = []
    for link in root.findall("link"):
        for mesh in link.iter("mesh"):
            uri = mesh.get("filename")
            if not uri:
                raise RigComposeError(f"{source}: link {link.get('name')!r} has a <mesh> without filename")
            try:
                path = resolve_uri(uri, base, search_path)
            except RigFileError as exc:
                raise RigComposeError(f"{source}: link {link.get('name')!r} mesh {exc}") from None
            mesh.set("filename", str(path))
            files.append(path)
    return files


def _link_names(root: ET.Element) -> set[str]:
    return {str(link.get("name")) for link in root.findall("link")}


def _root_link(root: ET.Element, source: str) -> str:
    children = {str(c.get("link")) for j in root.findall("joint") for c in j.findall("child")}
    roots = [name for name in (str(link.get("name")) for link in root.findall("link")) if name not in children]
    if len(roots) != 1:
        raise RigComposeError(f"{source}: expected one root link, found {roots}")
    return roots[0]


def _add_fixed(root: ET.Element, name: str, parent: str, xyz: Sequence[float], rpy: Sequence[float]) -> None:
    ET.SubElement(root, "link", {"name": name})
    joint = ET.SubElement(root, "joint", {"name": f"{name}_fixed", "type": "fixed"})
    ET.SubElement(joint, "parent", {"link": parent})
    ET.SubElement(joint, "child", {"link": name})
    ET.SubElement(joint, "origin", {"xyz": _fmt(xyz), "rpy": _fmt(rpy)})


def compose(root: ET.Element, source: str, mount: FixedFrame | None, frames: Sequence[FixedFrame]) -> str:
    """Add the ``world`` root (``mount``: world ← the description's root) and ``frames``; returns the URDF text.

    A frame whose name the description already has is kept as the lab made it when it hangs from the same
    parent with no offset; any other clash is an error rather than a silent rename.
    """
    links = _link_names(root)
    top = _root_link(root, source)
    if mount is not None:
        if WORLD_FRAME in links:
            raise RigComposeError(f"{source}: already has a link {WORLD_FRAME!r}; drop the rig YAML's mount")
        ET.SubElement(root, "link", {"name": WORLD_FRAME})
        joint = ET.SubElement(root, "joint", {"name": f"{WORLD_FRAME}_to_{top}", "type": "fixed"})
        ET.SubElement(joint, "parent", {"link": WORLD_FRAME})
        ET.SubElement(joint, "child", {"link": top})
        ET.SubElement(joint, "origin", {"xyz": _fmt(mount.xyz), "rpy": _fmt(mount.rpy)})
        links = _link_names(root)
    elif top != WORLD_FRAME:
        raise RigComposeError(f"{source}: root link is {top!r}, not {WORLD_FRAME!r}; give the rig YAML a mount "
                              "(xyz, rpy of that link in the table frame)")
    for frame in frames:
        if frame.parent not in links:
            raise RigComposeError(f"{source}: no link {frame.parent!r} to hang frame {frame.name!r} on")
        if frame.name in links:
            if frame.name == frame.parent and not any(frame.xyz) and not any(frame.rpy):
                continue
            _rehang(root, frame, source)
            continue
        _add_fixed(root, frame.name, frame.parent, frame.xyz, frame.rpy)
        links.add(frame.name)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def _rehang(root: ET.Element, frame: FixedFrame, source: str) -> None:
    """Move an existing leaf frame (a camera the lab's file places, now placed by a calibration)."""
    joint = next((j for j in root.findall("joint") if (c := j.find("child")) is not None
                  and c.get("link") == frame.name), None)
    has_children = any((p := j.find("parent")) is not None and p.get("link") == frame.name
                       for j in root.findall("joint"))
    if joint is None or joint.get("type") != "fixed" or has_children:
        raise RigComposeError(f"{source}: already has a link {frame.name!r} that is not a fixed leaf; the rig YAML "
                              f"must name it as the frame itself ({frame.name}) with no offset")
    parent = joint.find("parent")
    assert parent is not None
    parent.set("link", frame.parent)
    for origin in joint.findall("origin"):
        joint.remove(origin)
    ET.SubElement(joint, "origin", {"xyz": _fmt(frame.xyz), "rpy": _fmt(frame.rpy)})


def parse_urdf(text: str, source: str) -> ET.Element:
    """A description's ``<robot>``; a xacro file is read as it is only when xacro would add nothing to its tree."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise RigComposeError(f"{source}: not valid XML ({exc})") from None
    if root.tag != "robot":
        raise RigComposeError(f"{source}: the top element is <{root.tag}>, expected <robot>")
    _check_no_xacro_expansion(root, source)
    return root


XACRO_NAMESPACE = "{http://ros.org/wiki/xacro}"


def _check_no_xacro_expansion(root: ET.Element, source: str) -> None:
    """Refuse a xacro file whose links and joints xacro would change; accept one whose xacro only declares
    macros that make no link or joint (``piper_description.xacro``: transmissions for Gazebo) and calls them.

    Nothing here runs xacro: a file that needs it is expanded by the lab (``xacro FILE > FILE.urdf``).
    """
    harmless: set[str] = set()
    for element in root.iter():
        if not isinstance(element.tag, str) or not element.tag.startswith(XACRO_NAMESPACE):
            continue
        tag = element.tag[len(XACRO_NAMESPACE):]
        if tag == "macro" and not any(child.tag in ("link", "joint") or str(child.tag).startswith(XACRO_NAMESPACE)
                                      for child in element):
            harmless.add(str(element.get("name")))
        elif tag not in harmless:
            raise RigComposeError(f"{source}: uses xacro (<xacro:{tag}>), which this package does not run; expand it "
                                  "(xacro FILE > FILE.urdf) and name the .urdf")
    for element in (*root.findall("link"), *root.findall("joint")):
        for node in element.iter():
            for key, value in node.attrib.items():
                if "${" in value or "$(" in value:
                    raise RigComposeError(f"{source}: {element.tag} {element.get('name')!r} has {key}={value!r}, a "
                                          "xacro substitution; expand the file (xacro FILE > FILE.urdf) and name the "
                                          ".urdf")


@dataclass(frozen=True)
class ArmTree:
    """One arm's description (a ``<robot>`` with meshes resolved), to be copied into the rig under ``prefix``."""

    arm: str
    root: ET.Element
    source: str
    prefix: str
    mount_xyz: tuple[float, float, float]
    mount_rpy: tuple[float, float, float]

    @property
    def links(self) -> set[str]:
        return _link_names(self.root)

    @property
    def joints(self) -> set[str]:
        return {str(joint.get("name")) for joint in self.root.findall("joint")}

    @property
    def top(self) -> str:
        return _root_link(self.root, self.source)


def _renamed(element: ET.Element, prefix: str) -> ET.Element:
    """A deep copy of a ``<link>`` or ``<joint>`` with its own name and every link or joint it names prefixed."""
    copy = ET.fromstring(ET.tostring(element))
    copy.set("name", prefix + str(copy.get("name")))
    if copy.tag == "joint":
        for key in ("parent", "child"):
            for ref in copy.findall(key):
                ref.set("link", prefix + str(ref.get("link")))
        for mimic in copy.findall("mimic"):
            mimic.set("joint", prefix + str(mimic.get("joint")))
    return copy


def compose_arms(arms: Iterable[ArmTree], name: str, source: str) -> ET.Element:
    """One ``<robot>`` rooted at ``world`` holding each arm's links and joints under its prefix, on its mount.

    Only links, joints and top-level materials are copied: a description's ``<transmission>`` and ``<gazebo>``
    elements name the arm's unprefixed joints and links and mean nothing to the simulator or the kinematics.
    Any name two arms would share (equal prefixes, or a prefix that makes one arm's name another's) is an error.
    """
    robot = ET.Element("robot", {"name": name})
    ET.SubElement(robot, "link", {"name": WORLD_FRAME})
    owner: dict[tuple[str, str], str] = {("link", WORLD_FRAME): "the rig's root"}
    materials: dict[str, bytes] = {}
    for arm in arms:
        top = arm.top
        mount_joint = f"{WORLD_FRAME}_to_{arm.prefix}{top}"
        names = [("link", n, arm.prefix + n) for n in sorted(arm.links)]
        names += [("joint", n, arm.prefix + n) for n in sorted(arm.joints)]
        for kind, local, full in [*names, ("joint", "(its mount)", mount_joint)]:
            if (kind, full) in owner:
                raise RigComposeError(f"{source}: field 'arms.{arm.arm}.prefix' is {arm.prefix!r}: {kind} {local!r} of "
                                      f"{arm.source} would be named {full!r}, which {owner[kind, full]} already has")
            owner[kind, full] = f"arm {arm.arm!r}"
        for material in arm.root.findall("material"):
            key, text = str(material.get("name")), ET.tostring(material)
            if key not in materials:
                materials[key] = text
                robot.append(ET.fromstring(text))
            elif materials[key] != text:
                raise RigComposeError(f"{source}: material {key!r} of {arm.source} differs from another arm's "
                                      "material of that name")
        for element in (*arm.root.findall("link"), *arm.root.findall("joint")):
            robot.append(_renamed(element, arm.prefix))
        joint = ET.SubElement(robot, "joint", {"name": mount_joint, "type": "fixed"})
        ET.SubElement(joint, "parent", {"link": WORLD_FRAME})
        ET.SubElement(joint, "child", {"link": arm.prefix + top})
        ET.SubElement(joint, "origin", {"xyz": _fmt(arm.mount_xyz), "rpy": _fmt(arm.mount_rpy)})
    return robot


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "robofollow_ros" / "rigs"


def write_cached(name: str, text: str) -> Path:
    """The composed URDF as a file named by its content hash (written atomically once)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    folder = cache_dir()
    path = folder / f"{name}-{digest}.urdf"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}-", suffix=".urdf")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise RigComposeError(f"cannot write the composed rig URDF under {folder} ({exc.strerror or exc}); "
                              "set XDG_CACHE_HOME to a writable folder") from None
    return path


def rotation_rpy(rpy: Sequence[float]) -> np.ndarray:
    return rpy_matrix(*(float(v) for v in rpy))
