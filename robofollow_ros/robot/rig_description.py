"""Loading a rig by name or path: the YAML's fields checked, the lab's description composed, provenance kept.

``--rig NAME|PATH`` everywhere resolves here: a path to a rig YAML or to a folder holding ``rig.yaml``, or a
name — ``robofollow`` (the built-in rig, ``config/robot/rig.yaml``) or a folder of ``config/rigs/``
(``aloha``, ``piper``). ``ROBOFOLLOW_RIG`` names the active rig of a process and its children, so a node, a
Ray worker and the in-process oracle all load the same one. A loaded rig is cached per YAML path and
modification time.

The description is the whole bench in one file (``urdf:`` or ``mjcf:``), or one file per arm (``arms:``,
e.g. AgileX's single-arm ``piper_description`` twice)::

    arms:
      left:  {urdf: package://piper_description/urdf/piper_description.xacro, prefix: left/,
              mount: {xyz: [-0.3, -0.3, 0.82], rpy: [0, 0, 1.5707963]}}
      right: {urdf: ..., prefix: right/, mount: {...}}

Each arm's tree is copied with every link and joint name prefixed (the only renaming, and only because one
tree cannot hold two links of one name) and hung on a ``world`` root by its mount. In ``joints``,
``grippers``, ``tcp`` and ``cameras`` the lab writes the arm's own, unprefixed names, scoped by arm:
``joints.left: [joint1, …]`` means ``left/joint1``…, ``tcp.left.link: link6`` means ``left/link6``, and a
camera on an arm says which (``{arm: left, link: link6, xyz, rpy, fovy}``); a camera without ``arm`` hangs on
a link of the composed tree as it is named there (``world`` for a head camera).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robofollow_ros.contract import ARMS, BASE_FRAMES, CAMERA_FRAMES, CAMERA_NAMES, TCP_FRAMES
from robofollow_ros.paths import share_path
from robofollow_ros.robot.cameras import BODY_FROM_OPTICAL
from robofollow_ros.robot.rig_compose import (
    ArmTree,
    FixedFrame,
    RigComposeError,
    compose,
    compose_arms,
    matrix_to_rpy,
    parse_urdf,
    resolve_meshes,
    write_cached,
)
from robofollow_ros.robot.rig_fields import Fields
from robofollow_ros.robot.rig_files import RigFileError, distribution_folder, resolve_uri
from robofollow_ros.robot.rig_model import ArmJoint, FingerJoint, GripperGeometry, RigConfig, RigConfigError, RigFile
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.robot.urdf_model import UrdfError, UrdfModel
from robofollow_ros.yamlio import read_yaml_mapping

#: The environment variable naming the active rig (a name or a path), set by ``--rig``.
ENV_RIG = "ROBOFOLLOW_RIG"
BUILT_IN_RIG = "robofollow"
RIGS_DIR = share_path("config", "rigs")
#: The built-in rig's YAML (``rig_config.DEFAULT_RIG_CONFIG`` names the same file).
DEFAULT_RIG_CONFIG = share_path("config", "robot", "rig.yaml")


def known_rigs() -> list[str]:
    """The names ``--rig`` accepts besides a path."""
    names = [BUILT_IN_RIG]
    if RIGS_DIR.is_dir():
        names += sorted(p.name for p in RIGS_DIR.iterdir() if (p / "rig.yaml").is_file())
    return names


def rig_yaml(spec: str | Path | None) -> Path:
    """The rig YAML that ``spec`` (name, YAML path, folder, or None for the active rig) names."""
    if spec is None or str(spec) == "":
        spec = os.environ.get(ENV_RIG) or None
        if spec is None:
            return DEFAULT_RIG_CONFIG
    text = str(spec)
    if text == BUILT_IN_RIG:
        return DEFAULT_RIG_CONFIG
    path = Path(text).expanduser()
    if path.is_dir():
        return (path / "rig.yaml").resolve()
    if path.is_file() or path.suffix in (".yaml", ".yml") or os.sep in text:
        return path.resolve()
    named = RIGS_DIR / text / "rig.yaml"
    if named.is_file():
        return named
    raise RigConfigError(f"rig: {text!r} is neither a rig YAML, a folder holding rig.yaml, nor a known rig "
                         f"({', '.join(known_rigs())})")


def load_rig(spec: str | Path | None = None) -> RigConfig:
    source = rig_yaml(spec)
    if not source.is_file():
        raise RigConfigError(f"rig config: no such file {str(source)!r}")
    return _load_cached(str(source), source.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _load_cached(source_text: str, _mtime: int) -> RigConfig:
    return _load(Path(source_text))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(source: Path) -> RigConfig:
    data = read_yaml_mapping(source, "rig config", RigConfigError)
    f = Fields(data, source)
    name = f.text(data.get("name", source.parent.name if source.name == "rig.yaml" else source.stem), "name")
    folder = _files_folder(f)
    search = [(source.parent / f.text(p, "package_path[]")).resolve() for p in data.get("package_path", [])]
    read: list[Path] = [source]
    root, description, mjcf_fovy, arms = _description(f, folder, search, read, name)
    if arms:
        f = Fields(_scoped(f, arms), source)
    model_text = _tostring(root)
    try:
        lab = UrdfModel.from_text(model_text, str(description))
    except UrdfError as exc:
        raise RigConfigError(str(exc)) from None
    arm_joints = {arm: _arm_joints(f, arm, lab) for arm in ARMS}
    fingers = {arm: _fingers(f, arm, lab) for arm in ARMS}
    home = {arm: f.vector(f.per_arm("home")[arm], f"home.{arm}", 6) for arm in ARMS}
    _check_home(f, home, arm_joints, lab)
    frames, fovy = _frames(f, lab, arm_joints, mjcf_fovy, read)
    mount = None
    if "mount" in data:
        if arms:
            raise f.error("mount", "is the whole-bench description's; with 'arms' each arm has its own "
                          "(arms.<arm>.mount)", data["mount"])
        xyz, rpy = f.offset(f.mapping(data["mount"], "mount"), "mount")
        mount = FixedFrame("world", "", xyz, rpy)
    try:
        text = compose(root, str(description), mount, frames)
    except RigComposeError as exc:
        raise RigConfigError(f"{source}: fields 'mount', 'tcp' or 'cameras': {exc}") from None
    unchanged = mount is None and len(read) == 2 and description.suffix == ".urdf" and all(
        fr.name in lab.links for fr in frames)
    urdf_path = description if unchanged else write_cached(name, text)
    drives = f.mapping(f.require("drives"), "drives")
    files = tuple(RigFile(p, _sha256(p)) for p in dict.fromkeys(read))
    return RigConfig(
        name=name, source=source, urdf_path=urdf_path, files=files, home=home, arm_joints=arm_joints,
        fingers=fingers, tcp_links=dict(TCP_FRAMES), fingertip_offset=f.positive(f.require("fingertip_offset"),
                                                                                "fingertip_offset"),
        camera_links=dict(CAMERA_FRAMES), camera_fovy=fovy,
        max_velocity=f.positive(f.require("max_velocity"), "max_velocity"),
        max_acceleration=f.positive(f.require("max_acceleration"), "max_acceleration"),
        gripper_full_stroke_steps=int(f.positive(f.require("gripper_full_stroke_steps"), "gripper_full_stroke_steps")),
        arm_drive=f.gains(drives, "arm"), gripper_drive=f.gains(drives, "gripper"),
        finger_friction=f.positive(f.require("finger_friction"), "finger_friction"),
        finger_half_gap=_half_gap(f),
        driver_config=_driver_config(f),
        workspace=_workspace(f),
        gripper_geometry=_gripper_geometry(f),
    )


def _driver_config(f: Fields) -> str | None:
    """A preset's name as it is; a path relative to the rig YAML made absolute (it must exist)."""
    if "driver_config" not in f.data:
        return None
    value = f.text(f.data["driver_config"], "driver_config")
    if "/" not in value and not value.endswith((".yaml", ".yml")):
        return value
    path = (f.source.parent / value).resolve()
    if not path.is_file():
        raise f.error("driver_config", "names a missing file", value)
    return str(path)


def _half_gap(f: Fields) -> tuple[float, float]:
    value = f.data.get("finger_half_gap", {"closed": 0.0, "open": 0.04})
    spec = f.mapping(value, "finger_half_gap")
    closed = f.number(spec.get("closed"), "finger_half_gap.closed")
    wide = f.number(spec.get("open"), "finger_half_gap.open")
    if not 0.0 <= closed < wide:
        raise f.error("finger_half_gap", "must have 0 <= closed < open", value)
    return closed, wide


def _workspace(f: Fields) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """``workspace: {min: [x, y, z], max: [x, y, z]}`` (world frame, m): the box the arm bridge keeps both TCPs in
    by default; without it, the built-in rig's box."""
    from robofollow_ros.robot.rig_model import BUILT_IN_WORKSPACE

    if "workspace" not in f.data:
        return BUILT_IN_WORKSPACE
    spec = f.keys(f.data["workspace"], "workspace", {"min", "max"})
    low, high = (f.vector(spec.get(key), f"workspace.{key}", 3) for key in ("min", "max"))
    if not all(lo < hi for lo, hi in zip(low, high, strict=True)):
        raise f.error("workspace", "must have min < max on every axis", f.data["workspace"])
    return (low[0], low[1], low[2]), (high[0], high[1], high[2])


def _gripper_geometry(f: Fields) -> GripperGeometry:
    """``gripper_geometry: {finger_inner_closed, finger_travel, finger_thickness, finger_half_across,
    finger_below_tcp, palm_half_along, palm_half_across, palm_above_tcp}`` (m, TCP frame): the fingers and palm
    OWDA's world model checks room for; every field given, or none (the built-in rig's gripper)."""
    from dataclasses import fields

    if "gripper_geometry" not in f.data:
        return GripperGeometry()
    names = [field.name for field in fields(GripperGeometry)]
    spec = f.keys(f.data["gripper_geometry"], "gripper_geometry", set(names))
    missing = [name for name in names if name not in spec]
    if missing:
        raise f.error("gripper_geometry", f"misses {missing} (a rig gives all of {names})", spec)
    signed = ("finger_inner_closed", "palm_above_tcp")  # offsets from the TCP; the rest are sizes
    value = {name: (f.number if name in signed else f.positive)(spec[name], f"gripper_geometry.{name}")
             for name in names}
    if value["finger_inner_closed"] + value["finger_thickness"] <= 0.0:
        raise f.error("gripper_geometry.finger_inner_closed", "must leave each closed finger's outer face beyond "
                      "the TCP (finger_inner_closed + finger_thickness > 0)", spec["finger_inner_closed"])
    if value["palm_above_tcp"] <= -value["finger_below_tcp"]:
        raise f.error("gripper_geometry.palm_above_tcp", "must put the palm above the fingertips "
                      "(palm_above_tcp > -finger_below_tcp)", spec["palm_above_tcp"])
    return GripperGeometry(**value)


def _tostring(root: Any) -> str:
    import xml.etree.ElementTree as ET

    return ET.tostring(root, encoding="unicode")


def _files_folder(f: Fields) -> Path:
    """Where the description's files are: beside the YAML, or in an installed Python distribution."""
    spec = f.data.get("files_from")
    if spec is None:
        return f.source.parent
    spec = f.mapping(spec, "files_from")
    try:
        return distribution_folder(f.text(spec.get("distribution"), "files_from.distribution"),
                                   f.text(spec.get("folder"), "files_from.folder"))
    except RigFileError as exc:
        raise RigConfigError(f"{f.source}: field 'files_from': {exc}") from None


def _description(f: Fields, folder: Path, search: list[Path], read: list[Path],
                 name: str) -> tuple[Any, Path, dict[str, float], dict[str, ArmTree]]:
    """The lab's tree (an XML element), its file (the rig YAML for the per-arm form), the fovy of cameras an
    MJCF declares, and each arm's own tree (the per-arm form only)."""
    forms = [key for key in ("urdf", "mjcf", "arms") if key in f.data]
    if len(forms) != 1:
        raise RigConfigError(f"{f.source}: give exactly one of 'urdf' (a file), 'mjcf' ({{file, bodies}}) or 'arms' "
                             f"(a file per arm: {{urdf, prefix, mount}}), got {forms or 'none'}")
    if forms == ["arms"]:
        arms = _arm_trees(f, folder, search, read)
        try:
            root = compose_arms(arms.values(), name, str(f.source))
        except RigComposeError as exc:
            raise RigConfigError(str(exc)) from None
        return root, f.source, {}, arms
    if forms == ["urdf"]:
        path = (folder / f.text(f.data["urdf"], "urdf")).resolve()
        if not path.is_file():
            raise RigConfigError(f"{f.source}: field 'urdf' names a missing file {str(path)!r}")
        return _read_urdf(path, search, read), path, {}, {}
    from robofollow_ros.robot.mjcf import MjcfError, mjcf_to_urdf

    spec = f.mapping(f.data["mjcf"], "mjcf")
    path = (folder / f.text(spec.get("file"), "mjcf.file")).resolve()
    bodies = spec.get("bodies")
    if bodies is not None and (not isinstance(bodies, list) or not all(isinstance(b, str) for b in bodies)):
        raise f.error("mjcf.bodies", "must list body names", bodies)
    try:
        conversion = mjcf_to_urdf(path, bodies)
    except MjcfError as exc:
        raise RigConfigError(f"{f.source}: field 'mjcf': {exc}") from None
    read += list(conversion.files)
    root = parse_urdf(conversion.urdf, str(path))
    return root, path, {c.name: c.fovy for c in conversion.cameras.values()}, {}


def _read_urdf(path: Path, search: list[Path], read: list[Path]) -> Any:
    """A URDF file's tree with every mesh resolved; the file and its meshes join ``read``."""
    read.append(path)
    try:
        root = parse_urdf(path.read_text(encoding="utf-8"), str(path))
        read += resolve_meshes(root, path.parent, search, str(path))
    except RigComposeError as exc:
        raise RigConfigError(str(exc)) from None
    return root


def _arm_trees(f: Fields, folder: Path, search: list[Path], read: list[Path]) -> dict[str, ArmTree]:
    """Each arm's description (``arms.<arm>``: ``urdf``, ``prefix``, ``mount``, optionally ``inertials``)."""
    trees = {}
    for arm in ARMS:
        field = f"arms.{arm}"
        spec = f.keys(f.per_arm("arms")[arm], field, {"urdf", "prefix", "mount", "inertials"})
        path = _arm_file(f, spec, field, "urdf", folder, search)
        prefix = spec.get("prefix")
        if not isinstance(prefix, str):
            raise f.error(f"{field}.prefix", "must be a string (what every link and joint name of this arm's file "
                          "gets in front of it, e.g. 'left/')", prefix)
        if "mount" not in spec:
            raise f.error(field, "needs a mount ({xyz, rpy} of the arm's root link in the table frame)", spec)
        xyz, rpy = f.offset(f.keys(spec["mount"], f"{field}.mount", {"xyz", "rpy"}), f"{field}.mount")
        root = _read_urdf(path, search, read)
        if "inertials" in spec:
            _take_inertials(f, root, path, _arm_file(f, spec, field, "inertials", folder, search), read,
                            f"{field}.inertials")
        trees[arm] = ArmTree(arm, root, str(path), prefix, xyz, rpy)
    return trees


def _arm_file(f: Fields, spec: dict[str, Any], field: str, key: str, folder: Path, search: list[Path]) -> Path:
    """The file ``arms.<arm>.<key>`` names: relative to the YAML (or ``files_from``), ``package://`` or ``file://``."""
    uri = f.text(spec.get(key), f"{field}.{key}")
    try:
        return resolve_uri(uri, folder, search)
    except RigFileError as exc:
        raise RigConfigError(f"{f.source}: field '{field}.{key}': {exc}") from None


def _take_inertials(f: Fields, root: Any, description: Path, source: Path, read: list[Path], field: str) -> None:
    """Replace each link's ``<inertial>`` with the one the same link has in ``source`` (links it gives none keep
    theirs): for a description whose masses are placeholders (``piper_description.xacro`` gives every link
    1e-5 kg for Gazebo, which leaves the twin's fingers too light for PhysX to hold a block) beside a file of the
    same arm with the CAD masses (``piper_description.urdf``). Nothing else is read from ``source``."""
    try:
        other = parse_urdf(source.read_text(encoding="utf-8"), str(source))
    except RigComposeError as exc:
        raise RigConfigError(f"{f.source}: field '{field}': {exc}") from None
    read.append(source)
    links = {str(link.get("name")): link for link in root.findall("link")}
    for link in other.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        name = str(link.get("name"))
        if name not in links:
            raise RigConfigError(f"{f.source}: field '{field}': link {name!r} of {source} is not a link of "
                                 f"{description}")
        for old in links[name].findall("inertial"):
            links[name].remove(old)
        links[name].insert(0, inertial)


def _scoped(f: Fields, arms: dict[str, ArmTree]) -> dict[str, Any]:
    """The YAML's fields with the lab's per-arm names (``joint1``, ``link6``) turned into the composed tree's
    (``left/joint1``): ``joints`` and ``grippers`` by their arm, ``tcp`` by its arm, a camera by its ``arm`` key."""
    data = copy.deepcopy(f.data)

    def scope(arm: str, value: Any, kind: str, field: str) -> str:
        tree = arms[arm]
        local = f.text(value, field)
        if local not in (tree.joints if kind == "joint" else tree.links):
            raise RigConfigError(f"{f.source}: field {field!r} names {local!r}, which is not a {kind} of arm "
                                 f"{arm!r} ({tree.source}; the per-arm form names the arm's own links and joints, "
                                 "unprefixed)")
        return tree.prefix + local

    joints = f.per_arm("joints")
    for arm in ARMS:
        entries = joints[arm]
        if not isinstance(entries, list):
            raise f.error(f"joints.{arm}", "must list the 6 joints of the arm, joint1 first", entries)
        scoped: list[Any] = []
        for k, entry in enumerate(entries):
            if isinstance(entry, dict):
                scoped.append({**entry, "name": scope(arm, entry.get("name"), "joint", f"joints.{arm}[{k}].name")})
            else:
                scoped.append(scope(arm, entry, "joint", f"joints.{arm}[{k}]"))
        data["joints"][arm] = scoped
        fingers = f.per_arm("grippers")[arm]
        if isinstance(fingers, list):
            data["grippers"][arm] = [
                {**finger, "joint": scope(arm, finger.get("joint"), "joint", f"grippers.{arm}[{k}].joint")}
                if isinstance(finger, dict) else finger for k, finger in enumerate(fingers)]
        tcp = f.per_arm("tcp")[arm]
        if isinstance(tcp, dict):
            data["tcp"][arm] = {**tcp, "link": scope(arm, tcp.get("link"), "link", f"tcp.{arm}.link")}
        else:
            data["tcp"][arm] = scope(arm, tcp, "link", f"tcp.{arm}")
    cameras = data.get("cameras")
    if isinstance(cameras, dict):
        for camera, spec in cameras.items():
            if isinstance(spec, dict) and "arm" in spec:
                arm = spec["arm"]
                if arm not in ARMS:
                    raise f.error(f"cameras.{camera}.arm", f"must be one of {list(ARMS)}", arm)
                rest = {key: value for key, value in spec.items() if key != "arm"}
                cameras[camera] = {**rest, "link": scope(arm, spec.get("link"), "link", f"cameras.{camera}.link")}
    return data


def _arm_joints(f: Fields, arm: str, lab: UrdfModel) -> tuple[ArmJoint, ...]:
    entries = f.data.get("joints", {}).get(arm) if isinstance(f.data.get("joints"), dict) else None
    if entries is None:
        entries = [f"{arm}_joint{k}" for k in range(1, 7)]
    if not isinstance(entries, list) or len(entries) != 6:
        raise f.error(f"joints.{arm}", "must list the 6 joints of the arm, joint1 first", entries)
    out = []
    for k, entry in enumerate(entries):
        field = f"joints.{arm}[{k}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        entry = f.mapping(entry, field)
        joint = ArmJoint(f.text(entry.get("name"), f"{field}.name"), f.number(entry.get("sign", 1.0), f"{field}.sign"),
                         f.number(entry.get("offset", 0.0), f"{field}.offset"))
        if joint.sign not in (1.0, -1.0):
            raise f.error(f"{field}.sign", "must be 1 or -1", entry.get("sign"))
        if joint.name not in lab.joints or not lab.joints[joint.name].moving:
            raise RigConfigError(f"{f.source}: field {field!r} names {joint.name!r}, which is not a moving joint "
                                 f"of {lab.source}")
        out.append(joint)
    return tuple(out)


def _fingers(f: Fields, arm: str, lab: UrdfModel) -> tuple[FingerJoint, ...]:
    grippers = f.per_arm("grippers")[arm]
    if not isinstance(grippers, list) or not grippers:
        raise f.error(f"grippers.{arm}", "must list the finger joints ({joint, closed, open})", grippers)
    out = []
    for k, entry in enumerate(grippers):
        field = f"grippers.{arm}[{k}]"
        entry = f.mapping(entry, field)
        finger = FingerJoint(f.text(entry.get("joint"), f"{field}.joint"), f.number(entry.get("closed"),
                             f"{field}.closed"), f.number(entry.get("open"), f"{field}.open"))
        joint = lab.joints.get(finger.name)
        if joint is None or not joint.moving:
            raise RigConfigError(f"{f.source}: field '{field}.joint' names {finger.name!r}, which is not a moving "
                                 f"joint of {lab.source}")
        for key in ("closed", "open"):
            value = getattr(finger, key)
            if not joint.lower - 1e-9 <= value <= joint.upper + 1e-9:
                raise RigConfigError(f"{f.source}: field '{field}.{key}' is {value}, outside joint {finger.name!r}'s "
                                     f"limits [{joint.lower}, {joint.upper}] in {lab.source}")
        out.append(finger)
    return tuple(out)


def _check_home(f: Fields, home: dict[str, tuple[float, ...]], arm_joints: dict[str, tuple[ArmJoint, ...]],
                lab: UrdfModel) -> None:
    for arm in ARMS:
        for k, (value, joint) in enumerate(zip(home[arm], arm_joints[arm], strict=True)):
            lab_value = joint.offset + joint.sign * value
            limit = lab.joints[joint.name]
            if not limit.lower - 1e-9 <= lab_value <= limit.upper + 1e-9:
                raise RigConfigError(f"{f.source}: field 'home.{arm}[{k}]' is {value}: joint {joint.name!r} at "
                                     f"{lab_value} breaks its limits [{limit.lower}, {limit.upper}] in {lab.source}")


def _frames(f: Fields, lab: UrdfModel, arm_joints: dict[str, tuple[ArmJoint, ...]], mjcf_fovy: dict[str, float],
            read: list[Path]) -> tuple[list[FixedFrame], dict[str, float]]:
    """The contract's base, TCP and camera frames on the lab's links, and each camera's vertical field of view."""
    frames = []
    for arm in ARMS:
        parent = lab.joints[arm_joints[arm][0].name].parent
        frames.append(FixedFrame(BASE_FRAMES[arm], BASE_FRAMES[arm] if BASE_FRAMES[arm] in lab.links else parent))
        tcp = f.per_arm("tcp")[arm]
        tcp = {"link": tcp} if isinstance(tcp, str) else f.mapping(tcp, f"tcp.{arm}")
        xyz, rpy = f.offset(tcp, f"tcp.{arm}")
        frames.append(FixedFrame(TCP_FRAMES[arm], f.text(tcp.get("link"), f"tcp.{arm}.link"), xyz, rpy))
    cameras = f.require("cameras")
    if not isinstance(cameras, dict) or set(cameras) != set(CAMERA_NAMES):
        raise f.error("cameras", f"must map exactly {list(CAMERA_NAMES)}", cameras)
    fovy = {}
    for camera in CAMERA_NAMES:
        spec = cameras[camera]
        spec = {"link": spec} if isinstance(spec, str) else f.mapping(spec, f"cameras.{camera}")
        if "calibration" in spec:
            frame, fovy[camera] = _calibrated_camera(f, camera, spec, read)
        else:
            link = f.text(spec.get("link"), f"cameras.{camera}.link")
            xyz, rpy = f.offset(spec, f"cameras.{camera}")
            frame = FixedFrame(CAMERA_FRAMES[camera], link, xyz, rpy)
            if "fovy" in spec:
                fovy[camera] = f.positive(spec["fovy"], f"cameras.{camera}.fovy")
            elif link in mjcf_fovy:
                fovy[camera] = mjcf_fovy[link]
            else:
                raise RigConfigError(f"{f.source}: field 'cameras.{camera}' needs a fovy (radians): the description "
                                     "does not give one")
        frames.append(frame)
    return frames, fovy


def _calibrated_camera(f: Fields, camera: str, spec: dict[str, Any], read: list[Path]) -> tuple[FixedFrame, float]:
    """A camera placed by ``robofollow calibrate``'s files: ``extrinsics.yaml`` and ``<camera>.yaml`` (camera_info)."""
    field = f"cameras.{camera}.calibration"
    folder = (f.source.parent / f.text(spec["calibration"], field)).resolve()
    extrinsics_path, info_path = folder / "extrinsics.yaml", folder / f"{camera}.yaml"
    extrinsics = read_yaml_mapping(extrinsics_path, f"{field} extrinsics", RigConfigError)
    entry = extrinsics.get(camera)
    if not isinstance(entry, dict):
        raise RigConfigError(f"{extrinsics_path}: no entry {camera!r} (field {field!r})")
    where = Fields(entry, extrinsics_path)
    parent = where.text(entry.get("parent_frame"), f"{camera}.parent_frame")
    translation = where.vector(entry.get("translation"), f"{camera}.translation", 3)
    x, y, z, w = where.vector(entry.get("rotation_xyzw"), f"{camera}.rotation_xyzw", 4)
    optical = quat_to_matrix(np.array([w, x, y, z]))
    body = optical @ BODY_FROM_OPTICAL.T
    info = read_yaml_mapping(info_path, f"{field} camera_info", RigConfigError)
    try:
        height = float(info["image_height"])
        fy = float(info["camera_matrix"]["data"][4])
    except (KeyError, TypeError, ValueError, IndexError):
        raise RigConfigError(f"{info_path}: not a camera_info file (image_height, camera_matrix.data)") from None
    if not (height > 0 and fy > 0):
        raise RigConfigError(f"{info_path}: image_height {height} and fy {fy} must be > 0")
    read += [extrinsics_path, info_path]
    xyz = (translation[0], translation[1], translation[2])
    return FixedFrame(CAMERA_FRAMES[camera], parent, xyz, matrix_to_rpy(body)), float(2 * np.arctan(height / 2 / fy))


def rig_summary(rig: RigConfig) -> str:
    """One YAML document of what a rig resolved to (``robofollow doctor --rig``)."""
    return yaml.safe_dump({"rig": rig.provenance(), "urdf": str(rig.urdf_path)}, sort_keys=False)
