"""MJCF (MuJoCo's XML) to URDF: a lab's robot described only for MuJoCo, for SAPIEN and our NumPy kinematics.

SAPIEN 3.0.3 has no MJCF loader and ``urdf_model`` reads URDF, so a rig described in MJCF (the ALOHA bench's
``gym-aloha`` files) is converted here, in memory, from where its files are installed. Read: ``<include>``
(relative to the main file, as MuJoCo does), ``<compiler angle eulerseq meshdir assetdir strippath
autolimits>`` (MuJoCo's defaults: degrees, "xyz"), ``<default>`` classes (``class``/``childclass``), mesh and
material assets, ``<frame>`` and the body tree. MuJoCo (a test dependency) judges the result in the tests.

* Body → link of the same name (slashes kept); no joint → fixed joint; hinge → ``revolute`` (``continuous``
  when unlimited), slide → ``prismatic``, named as in the MJCF. Several joints in one body, or a hinge whose
  ``pos`` is off the body origin, chain through links ``<body>__<joint>``, so a body's link frame is MuJoCo's
  body frame at every joint vector. Free and ball joints, ``ref`` and unlimited slides are errors.
* Limits from ``range`` when limited (``limited="true"``, or auto with a range). Effort: the joint's
  ``actuatorfrcrange``, else the largest ``forcerange`` of a force-limited actuator on it, else 1000 (N·m or
  N); MJCF has no speed limits, so velocity is a generous 10 (rad/s or m/s).
* Geoms → ``<visual>``, and ``<collision>`` unless contype and conaffinity are 0: meshes (absolute path, the
  asset's scale), box, sphere, cylinder, capsule (SAPIEN reads URDF ``<capsule>``), ``fromto`` as MuJoCo
  compiles it (+z from the second point to the first); planes skipped; colour by MuJoCo's rule (an rgba other
  than its default beats the material). Ellipsoids, height fields, primitives fitted to meshes: errors.
* Inertia: ``<inertial>`` as given. A body without one but with collision shapes gets none either (SAPIEN then
  takes mass from the shapes at 1000 kg/m³, MuJoCo's default density, as ``inertiafromgeom`` would); other
  links (helpers, cameras, shapeless bodies) get 0.01 kg and 1e-6 kg·m² so SAPIEN accepts them.
* Cameras → fixed links named after the camera, in SAPIEN's camera convention (+x forward, +y left, +z up;
  MuJoCo's look along −z with +y up). ``targetbody``/``targetbodycom`` is aimed once, at qpos0, by MuJoCo's
  rule (−z towards the target, +x ⊥ world +z) and then frozen in the camera's body: MuJoCo re-aims it as
  joints move, this link does not. ``fovy`` (degrees in MJCF) is returned in radians.
* ``bodies`` keeps the named top-level bodies (None: every one without a free joint, and the world body's
  geoms); world-body cameras are always kept, on the root link. Errors: :class:`MjcfError`, one line naming
  the file, the element and the value.
"""

from __future__ import annotations

import copy
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robofollow_ros.robot.rig_files import distribution_folder
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.robot.urdf_model import axis_rotation

#: Effort and velocity of a moving joint when the MJCF bounds neither (see the module docstring).
DEFAULT_EFFORT = 1000.0
DEFAULT_VELOCITY = 10.0
#: Mass (kg) and principal inertia (kg·m²) of links that MuJoCo leaves without mass.
SMALL_MASS = 0.01
SMALL_INERTIA = 1e-6
#: SAPIEN's camera axes (x forward, y left, z up) in a MuJoCo camera's frame (looks along −z, +y up):
#: R_sapien = R_mujoco @ MUJOCO_FROM_SAPIEN_CAMERA.
MUJOCO_FROM_SAPIEN_CAMERA = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])

_ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")
_MJMINVAL = 1e-15  # MuJoCo's mjMINVAL: below it a vector is "zero" when normalised
_IGNORED = frozenset({"site", "light"})
_UNSUPPORTED = frozenset({"composite", "flexcomp", "attach", "replicate", "plugin", "skin"})


class MjcfError(ValueError):
    """An MJCF that cannot be converted; the message names the file, the element and the value."""


@dataclass(frozen=True)
class MjcfCamera:
    name: str  # the MJCF camera name; also the URDF link name emitted for it
    parent: str  # URDF link it hangs from (the body name, or the root link for world-body cameras)
    fovy: float  # radians (MJCF gives degrees)


@dataclass(frozen=True)
class MjcfConversion:
    urdf: str  # URDF text
    root_link: str  # the root link's name
    cameras: dict[str, MjcfCamera]
    files: tuple[Path, ...]  # every file read (the MJCF files, includes and meshes), resolved absolute paths


def gym_aloha_assets() -> Path:
    """The ALOHA bench's MJCF folder in the installed ``gym-aloha`` wheel (located, never imported)."""
    return distribution_folder("gym-aloha", "gym_aloha/assets")


# -- rotations ----------------------------------------------------------------------------------------------
def matrix_rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF ``rpy`` of a rotation matrix: the inverse of ``urdf_model.rpy_matrix`` (R = Rz(yaw)·Ry(pitch)·Rx(roll)).

    Roll comes from the last row; pitch and yaw from R·Rx(roll)ᵀ = Rz·Ry, whose entries stay well conditioned
    at pitch = ±90° (where any roll is absorbed exactly by yaw), so the round trip holds to rounding everywhere.
    """
    r = np.asarray(rotation, dtype=np.float64)
    roll = math.atan2(r[2, 1], r[2, 2])
    c, s = math.cos(roll), math.sin(roll)
    m = r @ np.array([[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]])  # R · Rx(roll)ᵀ
    pitch = math.atan2(-m[2, 0], m[2, 2])
    yaw = math.atan2(-m[0, 1], m[1, 1])
    return roll, pitch, yaw


def _normalized(vector: np.ndarray) -> np.ndarray:
    """MuJoCo's mju_normalize3: a vector shorter than mjMINVAL becomes +x."""
    norm = float(np.linalg.norm(vector))
    return np.array([1.0, 0.0, 0.0]) if norm < _MJMINVAL else vector / norm


def z_to_vector(vector: np.ndarray) -> np.ndarray:
    """MuJoCo's ``zaxis`` rule: the minimal rotation taking (0, 0, 1) to ``vector`` (mju_quatZ2Vec)."""
    norm = float(np.linalg.norm(vector))
    if norm < _MJMINVAL:
        return np.eye(3)
    v = vector / norm
    axis = np.cross([0.0, 0.0, 1.0], v)
    sine = float(np.linalg.norm(axis))
    if sine < _MJMINVAL:
        return np.diag([1.0, -1.0, -1.0]) if v[2] < 0 else np.eye(3)
    return axis_rotation(axis / sine, math.atan2(sine, float(v[2])))


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """MuJoCo's ``targetbody`` camera frame (mj_camlight): −z towards ``target``, +x ⊥ (world +z, z), columns x y z."""
    z = _normalized(eye - target)
    x = _normalized(np.cross([0.0, 0.0, 1.0], z))
    y = _normalized(np.cross(z, x))
    return np.column_stack([x, y, z])


# -- the parsed document ------------------------------------------------------------------------------------
@dataclass
class _Body:
    name: str
    element: ET.Element | None  # None for the world body
    parent: _Body | None
    pos: np.ndarray  # in the parent body's frame (enclosing <frame>s folded in)
    rot: np.ndarray
    #: Direct items (joint, freejoint, geom, camera, inertial) with their <frame> pose and class.
    items: list[tuple[ET.Element, np.ndarray, np.ndarray, str]] = field(default_factory=list)
    children: list[_Body] = field(default_factory=list)
    world_pos: np.ndarray = field(default_factory=lambda: np.zeros(3))  # at qpos0
    world_rot: np.ndarray = field(default_factory=lambda: np.eye(3))

    def tagged(self, *tags: str) -> list[tuple[ET.Element, np.ndarray, np.ndarray, str]]:
        return [item for item in self.items if item[0].tag in tags]


@dataclass(frozen=True)
class _Mesh:
    element: ET.Element
    path: Path
    scale: tuple[float, float, float]


class _Model:
    """One MJCF model: includes spliced, compiler settings, default classes, assets and the body tree."""

    def __init__(self, path: Path, root_link: str) -> None:
        self.main = path
        self.files: list[Path] = [path]
        self.source: dict[ET.Element, Path] = {}
        self.root = self._parse(path)
        if self.root.tag != "mujoco":
            raise MjcfError(f"{path}: the top element is <{self.root.tag}>, expected <mujoco>")
        self._splice_includes(self.root, set())
        self._read_compiler()
        self.classes: dict[str, dict[str, dict[str, str]]] = {"main": {}}
        for element in self.root.findall("default"):
            self._read_default(element, "main", top=True)
        self.meshes: dict[str, _Mesh] = {}
        self.materials: dict[str, str] = {}
        for asset in self.root.findall("asset"):
            self._read_assets(asset)
        self.world = _Body(root_link, None, None, np.zeros(3), np.eye(3))
        self.bodies: dict[str, _Body] = {}
        for worldbody in self.root.findall("worldbody"):
            self._walk(worldbody, self.world, np.zeros(3), np.eye(3), "main")

    # -- errors ----------------------------------------------------------------------------------------------
    def where(self, element: ET.Element) -> str:
        name = element.get("name")
        label = f"<{element.tag} name={name!r}>" if name else f"<{element.tag}>"
        return f"{self.source.get(element, self.main)}: {label}"

    def fail(self, element: ET.Element, attribute: str, value: object, problem: str) -> MjcfError:
        return MjcfError(f"{self.where(element)} {attribute}={value!r}: {problem}")

    # -- files ---------------------------------------------------------------------------------------------
    def _parse(self, path: Path) -> ET.Element:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise MjcfError(f"{path}: not valid XML ({exc})") from None
        except OSError as exc:
            raise MjcfError(f"{path}: cannot be read ({exc.strerror})") from None
        for element in root.iter():
            self.source[element] = path
        return root

    def _splice_includes(self, parent: ET.Element, seen: set[Path]) -> None:
        index = 0
        while index < len(parent):
            child = parent[index]
            if child.tag != "include":
                self._splice_includes(child, seen)
                index += 1
                continue
            name = child.get("file")
            if not name:
                raise self.fail(child, "file", name, "an <include> needs a file")
            path = (self.main.parent / name).resolve()  # MuJoCo: relative to the main model file's directory
            if not path.is_file():
                raise self.fail(child, "file", name, f"no such file {str(path)!r}")
            if path in seen or path == self.main:
                raise self.fail(child, "file", name, "the file is included more than once")
            seen.add(path)
            self.files.append(path)
            included = self._parse(path)
            if len(included) == 0:
                raise self.fail(child, "file", name, "the included file has no elements under its top element")
            del parent[index]
            for offset, element in enumerate(list(included)):
                parent.insert(index + offset, element)
            # the spliced elements are visited in turn (nested includes resolve the same way)

    # -- compiler, defaults, assets ---------------------------------------------------------------------------
    def _read_compiler(self) -> None:
        settings: dict[str, str] = {}
        elements = self.root.findall("compiler")
        for element in elements:
            settings.update(element.attrib)
        last = elements[-1] if elements else ET.Element("compiler")
        self.angle = settings.get("angle", "degree")
        if self.angle not in ("degree", "radian"):
            raise self.fail(last, "angle", self.angle, "must be 'degree' or 'radian'")
        self.eulerseq = settings.get("eulerseq", "xyz")
        if len(self.eulerseq) != 3 or any(c not in "xyzXYZ" for c in self.eulerseq):
            raise self.fail(last, "eulerseq", self.eulerseq, "must be 3 letters of x, y, z, X, Y, Z")
        if settings.get("coordinate", "local") != "local":
            raise self.fail(last, "coordinate", settings["coordinate"], "only local coordinates exist in MuJoCo 3")
        self.autolimits = self._flag(last, "autolimits", settings.get("autolimits", "true"))
        self.strippath = self._flag(last, "strippath", settings.get("strippath", "false"))
        self.inertiafromgeom = settings.get("inertiafromgeom", "auto")
        self.meshdir = settings.get("meshdir", settings.get("assetdir", ""))

    def _flag(self, element: ET.Element, attribute: str, text: str) -> bool:
        if text not in ("true", "false"):
            raise self.fail(element, attribute, text, "must be 'true' or 'false'")
        return text == "true"

    def _read_default(self, element: ET.Element, parent: str, top: bool = False) -> None:
        name = element.get("class", "main" if top else None)
        if name is None:
            raise self.fail(element, "class", None, "a nested <default> needs a class")
        if name in self.classes and not (top and name == "main"):
            raise self.fail(element, "class", name, "the class is defined twice")
        inherited = self.classes.get(parent, {}) if name != parent else {}
        entries = {tag: dict(attrs) for tag, attrs in inherited.items()}
        entries.update({tag: dict(attrs) for tag, attrs in self.classes.get(name, {}).items()})
        for child in element:
            if child.tag == "default":
                continue
            merged = entries.setdefault(child.tag, {})
            if any(key in child.attrib for key in _ORIENTATIONS):
                for key in _ORIENTATIONS:
                    merged.pop(key, None)
            merged.update(child.attrib)
        self.classes[name] = entries
        for child in element.findall("default"):
            self._read_default(child, name)

    def attributes(self, element: ET.Element, childclass: str) -> dict[str, str]:
        """The element's attributes over those of its defaults class (its own ``class``, else the childclass)."""
        name = element.get("class", childclass)
        if name not in self.classes:
            raise self.fail(element, "class", name, "no <default> class of that name")
        merged = dict(self.classes[name].get(element.tag, {}))
        if any(key in element.attrib for key in _ORIENTATIONS):
            for key in _ORIENTATIONS:
                merged.pop(key, None)
        merged.update(element.attrib)
        merged.pop("class", None)
        return merged

    def _read_assets(self, asset: ET.Element) -> None:
        for element in asset:
            if element.tag == "material" and element.get("name"):
                self.materials[str(element.get("name"))] = element.get("rgba", "1 1 1 1")
            if element.tag != "mesh":
                continue
            attrs = self.attributes(element, "main")
            file = attrs.get("file")
            name = attrs.get("name") or (Path(file).stem if file else None)
            if not name:
                raise self.fail(element, "name", None, "a mesh without a file needs a name")
            for key, identity in (("refpos", (0.0, 0.0, 0.0)), ("refquat", (1.0, 0.0, 0.0, 0.0))):
                if key in attrs and self.numbers(element, key, attrs[key], len(identity)) != identity:
                    raise self.fail(element, key, attrs[key], "mesh reference frames are not supported")
            scale = self.numbers(element, "scale", attrs.get("scale", "1 1 1"), 3)
            path = self._mesh_path(file) if file else Path()
            self.meshes[name] = _Mesh(element, path, (scale[0], scale[1], scale[2]))

    def _mesh_path(self, file: str) -> Path:
        name = Path(file).name if self.strippath else file
        if Path(name).is_absolute():
            return Path(name)
        if Path(self.meshdir).is_absolute():
            return Path(self.meshdir) / name
        return (self.main.parent / self.meshdir / name).resolve()

    # -- numbers and frames -------------------------------------------------------------------------------
    def numbers(self, element: ET.Element, attribute: str, text: str, count: int | tuple[int, int]
                ) -> tuple[float, ...]:
        low, high = (count, count) if isinstance(count, int) else count
        try:
            values = tuple(float(v) for v in text.split())
        except ValueError:
            values = ()
        if not low <= len(values) <= high or not all(math.isfinite(v) for v in values):
            wanted = f"{low}" if low == high else f"{low} to {high}"
            raise self.fail(element, attribute, text, f"expected {wanted} finite numbers")
        return values

    def number(self, element: ET.Element, attribute: str, text: str) -> float:
        return self.numbers(element, attribute, text, 1)[0]

    def angle_scale(self) -> float:
        return math.pi / 180.0 if self.angle == "degree" else 1.0

    def pose(self, element: ET.Element, attrs: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
        """(position, rotation) of an element with a spatial frame, in its parent's frame."""
        pos = np.array(self.numbers(element, "pos", attrs.get("pos", "0 0 0"), 3))
        given = [key for key in _ORIENTATIONS if key in attrs]
        if len(given) > 1:
            raise self.fail(element, given[1], attrs[given[1]], f"give one orientation, not {' and '.join(given)}")
        if not given:
            return pos, np.eye(3)
        key = given[0]
        text = attrs[key]
        if key == "quat":
            q = np.array(self.numbers(element, key, text, 4))
            if np.linalg.norm(q) < _MJMINVAL:
                raise self.fail(element, key, text, "a zero quaternion")
            return pos, quat_to_matrix(q)
        if key == "axisangle":
            values = self.numbers(element, key, text, 4)
            axis = np.array(values[:3])
            if np.linalg.norm(axis) < _MJMINVAL:
                raise self.fail(element, key, text, "a zero axis")
            return pos, axis_rotation(axis / np.linalg.norm(axis), values[3] * self.angle_scale())
        if key == "euler":
            rotation = np.eye(3)
            for letter, angle in zip(self.eulerseq, self.numbers(element, key, text, 3), strict=True):
                step = axis_rotation(np.eye(3)["xyz".index(letter.lower())], angle * self.angle_scale())
                rotation = rotation @ step if letter.islower() else step @ rotation  # intrinsic / extrinsic
            return pos, rotation
        if key == "xyaxes":
            axes = np.array(self.numbers(element, key, text, 6))
            x, y = axes[:3], axes[3:]
            if np.linalg.norm(x) < _MJMINVAL:
                raise self.fail(element, key, text, "a zero x axis")
            x = x / np.linalg.norm(x)
            y = y - x * float(x @ y)
            if np.linalg.norm(y) < _MJMINVAL:
                raise self.fail(element, key, text, "the y axis is parallel to the x axis")
            y = y / np.linalg.norm(y)
            return pos, np.column_stack([x, y, np.cross(x, y)])
        return pos, z_to_vector(np.array(self.numbers(element, key, text, 3)))

    # -- the body tree -----------------------------------------------------------------------------------------
    def _walk(self, container: ET.Element, body: _Body, frame_pos: np.ndarray, frame_rot: np.ndarray,
              childclass: str) -> None:
        for child in container:
            tag = child.tag
            if tag == "body":
                pos, rot = self.pose(child, dict(child.attrib))
                name = child.get("name") or f"{body.name}__body{len(body.children)}"
                if name in self.bodies or name == self.world.name:
                    raise self.fail(child, "name", name, "two bodies (or a body and the root link) share this name")
                new = _Body(name, child, body, frame_pos + frame_rot @ pos, frame_rot @ rot)
                new.world_pos = body.world_pos + body.world_rot @ new.pos
                new.world_rot = body.world_rot @ new.rot
                body.children.append(new)
                self.bodies[name] = new
                self._walk(child, new, np.zeros(3), np.eye(3), child.get("childclass", childclass))
            elif tag == "frame":
                pos, rot = self.pose(child, dict(child.attrib))
                self._walk(child, body, frame_pos + frame_rot @ pos, frame_rot @ rot,
                           child.get("childclass", childclass))
            elif tag in ("joint", "freejoint", "geom", "camera", "inertial"):
                body.items.append((child, frame_pos, frame_rot, childclass))
            elif tag in _UNSUPPORTED:
                raise self.fail(child, "tag", tag, "this element is not supported by the URDF converter")
            elif tag not in _IGNORED:
                raise self.fail(child, "tag", tag, f"unknown element inside <{container.tag}>")

    def has_free_joint(self, body: _Body) -> bool:
        for element, _, _, childclass in body.tagged("joint", "freejoint"):
            if element.tag == "freejoint" or self.attributes(element, childclass).get("type") == "free":
                return True
        return False

    def static(self, body: _Body) -> bool:
        """True when no joint lies between ``body`` and the world."""
        node: _Body | None = body
        while node is not None and node.element is not None:
            if node.tagged("joint", "freejoint"):
                return False
            node = node.parent
        return True


# -- URDF writing -------------------------------------------------------------------------------------------
def _text(values: Sequence[float] | np.ndarray) -> str:
    return " ".join(f"{float(v) + 0.0:.15g}" for v in values)


def _origin(parent: ET.Element, pos: np.ndarray, rot: np.ndarray) -> None:
    ET.SubElement(parent, "origin", xyz=_text(pos), rpy=_text(matrix_rpy(rot)))


class _Writer:
    def __init__(self, model: _Model, robot_name: str) -> None:
        self.model = model
        self.robot = ET.Element("robot", name=robot_name)
        self.links: set[str] = set()
        self.joints: set[str] = set()
        self.meshes_used: list[Path] = []
        self.effort = self._efforts()

    def _efforts(self) -> dict[str, float]:
        """Largest |forcerange| of a force-limited actuator on each joint."""
        model, out = self.model, dict[str, float]()
        for block in model.root.findall("actuator"):
            for element in block:
                joint = element.get("joint")
                if not joint:
                    continue
                attrs = model.attributes(element, "main")
                bound = self._bound(element, attrs, "forcelimited", "forcerange")
                if bound is not None:
                    out[joint] = max(out.get(joint, 0.0), bound)
        return out

    def _bound(self, element: ET.Element, attrs: dict[str, str], flag: str, key: str) -> float | None:
        limited = attrs.get(flag, "auto")
        if limited == "false" or key not in attrs or (limited != "true" and not self.model.autolimits):
            return None
        low, high = self.model.numbers(element, key, attrs[key], 2)
        return max(abs(low), abs(high)) or None

    def link(self, name: str, element: ET.Element | None) -> ET.Element:
        if name in self.links:
            where = self.model.where(element) if element is not None else str(self.model.main)
            raise MjcfError(f"{where} name={name!r}: two URDF links would share this name")
        self.links.add(name)
        return ET.SubElement(self.robot, "link", name=name)

    def joint(self, name: str, kind: str, parent: str, child: str, pos: np.ndarray, rot: np.ndarray,
              element: ET.Element | None) -> ET.Element:
        if name in self.joints:
            where = self.model.where(element) if element is not None else str(self.model.main)
            raise MjcfError(f"{where} name={name!r}: two URDF joints would share this name")
        self.joints.add(name)
        joint = ET.SubElement(self.robot, "joint", name=name, type=kind)
        _origin(joint, pos, rot)
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=child)
        return joint

    @staticmethod
    def small_inertial(link: ET.Element) -> None:
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "mass", value=_text([SMALL_MASS]))
        ET.SubElement(inertial, "inertia", ixx=_text([SMALL_INERTIA]), iyy=_text([SMALL_INERTIA]),
                      izz=_text([SMALL_INERTIA]), ixy="0", ixz="0", iyz="0")

    # -- bodies ---------------------------------------------------------------------------------------------
    def body(self, body: _Body, parent_link: str) -> None:
        model = self.model
        assert body.element is not None
        if model.has_free_joint(body):
            element = next(e for e, *_ in body.tagged("joint", "freejoint"))
            raise model.fail(element, "type", "free", f"body {body.name!r} is free-floating; a URDF of the rig "
                             "cannot hold it (leave it out of 'bodies')")
        carry_pos, carry_rot, link_parent = body.pos, body.rot, parent_link
        joints = body.tagged("joint")
        for index, (element, frame_pos, frame_rot, childclass) in enumerate(joints):
            attrs = model.attributes(element, childclass)
            name = attrs.get("name") or f"{body.name}__joint{index}"
            kind = attrs.get("type", "hinge")
            if kind not in ("hinge", "slide"):
                raise model.fail(element, "type", kind, "only hinge and slide joints have a URDF form")
            if "ref" in attrs and model.number(element, "ref", attrs["ref"]) != 0.0:
                raise model.fail(element, "ref", attrs["ref"], "a nonzero joint reference is not supported")
            axis = frame_rot @ np.array(model.numbers(element, "axis", attrs.get("axis", "0 0 1"), 3))
            if np.linalg.norm(axis) < _MJMINVAL:
                raise model.fail(element, "axis", attrs.get("axis"), "a zero axis")
            anchor = frame_pos + frame_rot @ np.array(model.numbers(element, "pos", attrs.get("pos", "0 0 0"), 3))
            if kind == "slide":
                anchor = np.zeros(3)  # a slide's anchor does not move anything
            last = index == len(joints) - 1
            child = body.name if last and not anchor.any() else f"{body.name}__{name}"
            self.joint_element(element, attrs, name, kind, link_parent, child, carry_pos + carry_rot @ anchor,
                               carry_rot, axis / np.linalg.norm(axis))
            if child != body.name:
                self.small_inertial(self.link(child, element))
            carry_pos, carry_rot, link_parent = -anchor, np.eye(3), child
        if link_parent != body.name:
            self.joint(f"{body.name}__fixed", "fixed", link_parent, body.name, carry_pos, carry_rot, body.element)
        self.body_link(body)
        for child_body in body.children:
            self.body(child_body, body.name)

    def joint_element(self, element: ET.Element, attrs: dict[str, str], name: str, kind: str, parent: str,
                      child: str, pos: np.ndarray, rot: np.ndarray, axis: np.ndarray) -> None:
        model = self.model
        limited = attrs.get("limited", "auto")
        if limited not in ("true", "false", "auto"):
            raise model.fail(element, "limited", limited, "must be 'true', 'false' or 'auto'")
        has_range = "range" in attrs
        is_limited = limited == "true" or (limited == "auto" and has_range and model.autolimits)
        if is_limited and not has_range:
            raise model.fail(element, "limited", limited, "a limited joint needs a range")
        urdf_kind = "revolute" if kind == "hinge" else "prismatic"
        if not is_limited:
            if kind == "slide":
                raise model.fail(element, "range", attrs.get("range"), "an unlimited slide joint has no URDF form "
                                 "(give it a range)")
            urdf_kind = "continuous"
        joint = self.joint(name, urdf_kind, parent, child, pos, rot, element)
        ET.SubElement(joint, "axis", xyz=_text(axis))
        effort = self._bound(element, attrs, "actuatorfrclimited", "actuatorfrcrange") or self.effort.get(name)
        limit = {"effort": _text([effort or DEFAULT_EFFORT]), "velocity": _text([DEFAULT_VELOCITY])}
        if is_limited:
            low, high = model.numbers(element, "range", attrs["range"], 2)
            if low > high:
                raise model.fail(element, "range", attrs["range"], "the lower bound exceeds the upper")
            scale = model.angle_scale() if kind == "hinge" else 1.0
            limit.update(lower=_text([low * scale]), upper=_text([high * scale]))
        ET.SubElement(joint, "limit", limit)

    def body_link(self, body: _Body) -> None:
        link = self.link(body.name, body.element)
        inertials = body.tagged("inertial")
        shapes = self.geoms(body, link)
        if inertials:
            self.inertial(link, *inertials[-1][:3])
        elif not shapes:
            self.small_inertial(link)

    def inertial(self, link: ET.Element, element: ET.Element, frame_pos: np.ndarray, frame_rot: np.ndarray) -> None:
        model = self.model
        attrs = dict(element.attrib)
        pos, rot = model.pose(element, attrs)
        mass = model.number(element, "mass", attrs.get("mass", ""))
        if "fullinertia" in attrs:
            given = [key for key in _ORIENTATIONS if key in attrs]
            if given:  # as MuJoCo: the full matrix is in the body frame
                raise model.fail(element, given[0], attrs[given[0]], "give fullinertia or an orientation, not both")
            xx, yy, zz, xy, xz, yz = model.numbers(element, "fullinertia", attrs["fullinertia"], 6)
        elif "diaginertia" in attrs:
            xx, yy, zz = model.numbers(element, "diaginertia", attrs["diaginertia"], 3)
            xy = xz = yz = 0.0
        else:
            raise model.fail(element, "diaginertia", None, "an <inertial> needs diaginertia or fullinertia")
        inertial = ET.SubElement(link, "inertial")
        _origin(inertial, frame_pos + frame_rot @ pos, frame_rot @ rot)
        ET.SubElement(inertial, "mass", value=_text([mass]))
        ET.SubElement(inertial, "inertia", ixx=_text([xx]), iyy=_text([yy]), izz=_text([zz]), ixy=_text([xy]),
                      ixz=_text([xz]), iyz=_text([yz]))

    # -- geoms ---------------------------------------------------------------------------------------------
    def geoms(self, body: _Body, link: ET.Element) -> int:
        """Writes the body's geoms into ``link``; returns how many collision shapes it got."""
        collisions = 0
        for index, (element, frame_pos, frame_rot, childclass) in enumerate(body.tagged("geom")):
            attrs = self.model.attributes(element, childclass)
            shape = self.geometry(element, attrs)
            if shape is None:
                continue
            geometry, pos, rot = shape
            pos, rot = frame_pos + frame_rot @ pos, frame_rot @ rot
            name = attrs.get("name") or f"{body.name}__geom{index}"
            visual = ET.SubElement(link, "visual", name=name)
            _origin(visual, pos, rot)
            ET.SubElement(visual, "geometry").append(geometry)
            rgba = self.rgba(element, attrs)
            material = ET.SubElement(visual, "material", name="mjcf_rgba_" + "_".join(f"{v:g}" for v in rgba))
            ET.SubElement(material, "color", rgba=_text(rgba))
            contype = int(self.model.number(element, "contype", attrs.get("contype", "1")))
            conaffinity = int(self.model.number(element, "conaffinity", attrs.get("conaffinity", "1")))
            if contype or conaffinity:
                collision = ET.SubElement(link, "collision", name=name)
                _origin(collision, pos, rot)
                ET.SubElement(collision, "geometry").append(copy.copy(geometry))
                collisions += 1
        return collisions

    def rgba(self, element: ET.Element, attrs: dict[str, str]) -> tuple[float, ...]:
        """MuJoCo's rule: an rgba other than the internal default beats the material (the geom's, else its mesh's)."""
        rgba = self.model.numbers(element, "rgba", attrs.get("rgba", "0.5 0.5 0.5 1"), 4)
        mesh = self.model.meshes.get(attrs.get("mesh", "")) if attrs.get("type") == "mesh" else None
        material = attrs.get("material") or (mesh.element.get("material") if mesh else None)
        if rgba == (0.5, 0.5, 0.5, 1.0) and material in self.model.materials:
            return self.model.numbers(element, "rgba", self.model.materials[str(material)], 4)
        return rgba

    def geometry(self, element: ET.Element, attrs: dict[str, str]
                 ) -> tuple[ET.Element, np.ndarray, np.ndarray] | None:
        model = self.model
        kind = attrs.get("type", "sphere")
        if kind == "plane":
            return None
        if kind not in ("mesh", "box", "sphere", "cylinder", "capsule"):
            raise model.fail(element, "type", kind, "this geom type has no URDF form")
        if kind != "mesh" and "mesh" in attrs:
            raise model.fail(element, "mesh", attrs["mesh"], f"a {kind} fitted to a mesh is not supported")
        pos, rot = model.pose(element, attrs)
        size = model.numbers(element, "size", attrs.get("size", "0"), (1, 3)) if kind != "mesh" else ()
        half_length = None
        if "fromto" in attrs and kind != "mesh":
            if kind == "sphere":
                raise model.fail(element, "fromto", attrs["fromto"], "fromto does not apply to a sphere")
            ends = np.array(model.numbers(element, "fromto", attrs["fromto"], 6))
            # +z from the second point to the first, as MuJoCo compiles it (its docs say the reverse); the shape
            # is symmetric either way, the geom frame then equals MuJoCo's
            pos, rot = (ends[:3] + ends[3:]) / 2.0, z_to_vector(ends[:3] - ends[3:])
            half_length = float(np.linalg.norm(ends[3:] - ends[:3])) / 2.0
        if kind == "mesh":
            return self.mesh(element, attrs), pos, rot
        if kind == "sphere":
            return ET.Element("sphere", radius=_text(size[:1])), pos, rot
        if kind == "box":
            if half_length is not None:
                halves = (size[0], size[0], half_length)
            elif len(size) == 3:
                halves = size
            else:
                raise model.fail(element, "size", attrs.get("size"), "a box needs 3 half-sizes")
            return ET.Element("box", size=_text([2.0 * h for h in halves])), pos, rot
        if half_length is None:
            if len(size) < 2:
                raise model.fail(element, "size", attrs.get("size"), f"a {kind} needs a radius and a half-length")
            half_length = size[1]
        return ET.Element(kind, radius=_text(size[:1]), length=_text([2.0 * half_length])), pos, rot

    def mesh(self, element: ET.Element, attrs: dict[str, str]) -> ET.Element:
        model = self.model
        name = attrs.get("mesh")
        if name is None or name not in model.meshes:
            raise model.fail(element, "mesh", name, "no <mesh> asset of that name")
        mesh = model.meshes[name]
        file = mesh.element.get("file")
        if not file:
            raise model.fail(mesh.element, "file", file, "meshes given by inline vertices are not supported")
        if not mesh.path.is_file():
            raise model.fail(mesh.element, "file", file, f"no such file {str(mesh.path)!r}")
        if mesh.path.suffix.lower() not in (".stl", ".obj"):
            raise model.fail(mesh.element, "file", file, "SAPIEN reads STL and OBJ meshes only")
        path = mesh.path.resolve()
        if path not in self.meshes_used:
            self.meshes_used.append(path)
        return ET.Element("mesh", filename=str(path), scale=_text(mesh.scale))

    # -- cameras -----------------------------------------------------------------------------------------------
    def cameras(self, body: _Body, link: str) -> dict[str, MjcfCamera]:
        model, out = self.model, {}
        for index, (element, frame_pos, frame_rot, childclass) in enumerate(body.tagged("camera")):
            attrs = model.attributes(element, childclass)
            name = attrs.get("name") or f"{link}__camera{index}"
            if attrs.get("projection", "perspective") != "perspective":
                raise model.fail(element, "projection", attrs["projection"], "only perspective cameras are supported")
            if "sensorsize" in attrs:
                raise model.fail(element, "sensorsize", attrs["sensorsize"], "give the camera a fovy instead")
            fovy = model.number(element, "fovy", attrs.get("fovy", "45"))
            pos, rot = model.pose(element, attrs)
            pos, rot = frame_pos + frame_rot @ pos, frame_rot @ rot
            mode = attrs.get("mode", "fixed")
            if mode in ("targetbody", "targetbodycom"):
                target = self.target(element, attrs, mode)
                world = look_at(body.world_pos + body.world_rot @ pos, target)
                rot = body.world_rot.T @ world
            elif mode in ("track", "trackcom"):
                if mode == "trackcom" or not model.static(body):
                    raise model.fail(element, "mode", mode, "a camera tracking a moving body has no URDF form")
            elif mode != "fixed":
                raise model.fail(element, "mode", mode, "unknown camera mode")
            self.small_inertial(self.link(name, element))
            self.joint(f"{name}__fixed", "fixed", link, name, pos, rot @ MUJOCO_FROM_SAPIEN_CAMERA, element)
            out[name] = MjcfCamera(name, link, math.radians(fovy))
        return out

    def target(self, element: ET.Element, attrs: dict[str, str], mode: str) -> np.ndarray:
        """World position the camera looks at, at qpos0: the target body's origin or its subtree's centre of mass."""
        model = self.model
        name = attrs.get("target")
        body = model.world if name in ("world", model.world.name) else model.bodies.get(str(name))
        if body is None:
            raise model.fail(element, "target", name, "no body of that name")
        if mode == "targetbody":
            return body.world_pos
        weighted, total = np.zeros(3), 0.0
        stack = [body]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            inertials = node.tagged("inertial")
            if not inertials:
                if node.tagged("geom") and model.inertiafromgeom != "false":
                    raise model.fail(element, "mode", mode, f"body {node.name!r} takes its mass from its geoms; "
                                     "only explicit <inertial>s are summed")
                continue
            inertial, frame_pos, frame_rot, _ = inertials[-1]
            pos, _ = model.pose(inertial, dict(inertial.attrib))
            mass = model.number(inertial, "mass", inertial.get("mass", ""))
            weighted += mass * (node.world_pos + node.world_rot @ (frame_pos + frame_rot @ pos))
            total += mass
        if total <= 0.0:
            raise model.fail(element, "target", name, "the target subtree has no mass")
        return weighted / total


def mjcf_to_urdf(path: Path | str, bodies: Sequence[str] | None = None, root_link: str = "mjcf_world",
                 robot_name: str | None = None) -> MjcfConversion:
    """Convert the MJCF model at ``path`` (its kept bodies and cameras) to URDF text; see the module docstring."""
    path = Path(path).resolve()
    if not path.is_file():
        raise MjcfError(f"{path}: no such file")
    model = _Model(path, root_link)
    writer = _Writer(model, robot_name or model.root.get("model") or path.stem)
    if bodies is None:
        kept = [b for b in model.world.children if not model.has_free_joint(b)]
    else:
        by_name = {b.name: b for b in model.world.children}
        missing = [name for name in bodies if name not in by_name]
        if missing:
            worldbody = model.root.find("worldbody")
            element = worldbody if worldbody is not None else model.root
            raise MjcfError(f"{model.where(element)} body={missing[0]!r}: no top-level body of that name "
                            f"(there are {sorted(by_name)})")
        kept = [by_name[name] for name in dict.fromkeys(bodies)]
    root = writer.link(root_link, None)
    if bodies is None:
        shapes = writer.geoms(model.world, root)
        if not shapes:
            writer.small_inertial(root)
    else:
        writer.small_inertial(root)
    cameras = writer.cameras(model.world, root_link)
    for body in kept:
        writer.body(body, root_link)
    stack = list(kept)
    while stack:
        body = stack.pop(0)
        stack.extend(body.children)
        cameras.update(writer.cameras(body, body.name))
    ET.indent(writer.robot)
    files = tuple(dict.fromkeys([*model.files, *writer.meshes_used]))
    return MjcfConversion(ET.tostring(writer.robot, encoding="unicode") + "\n", root_link, cameras, files)
