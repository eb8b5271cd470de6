"""robot.mjcf: MJCF → URDF, judged by MuJoCo itself.

MuJoCo (``mujoco-core``, pinned in requirements.txt for this) compiles the same MJCF and computes its own
forward kinematics; every kept body's world pose, every camera's pose and every inertia must match what our
NumPy kinematics reads from the converted URDF. SAPIEN must load the URDF as one articulation. The models are
gym-aloha's ALOHA bench (installed as data, never imported) and a hand-written MJCF that exercises every
orientation form, eulerseq, default classes, includes, frames, joint anchors and several joints in one body.
"""

from __future__ import annotations

import math
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
import sapien

from robofollow_ros.robot.mjcf import (
    MUJOCO_FROM_SAPIEN_CAMERA,
    MjcfConversion,
    MjcfError,
    gym_aloha_assets,
    matrix_rpy,
    mjcf_to_urdf,
)
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.robot.urdf_model import UrdfModel, rpy_matrix

ARMS = ["vx300s_left", "vx300s_right"]
TOL = 1e-6


@pytest.fixture(scope="module")
def aloha_file() -> Path:
    return gym_aloha_assets() / "bimanual_viperx_transfer_cube.xml"


@pytest.fixture(scope="module")
def aloha(aloha_file: Path) -> MjcfConversion:
    return mjcf_to_urdf(aloha_file, ARMS)


def mujoco_poses(m: mujoco.MjModel, d: mujoco.MjData, model: UrdfModel, q: np.ndarray
                 ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """MuJoCo's body and camera poses (cameras in SAPIEN's convention) for our joint vector ``q``."""
    d.qpos[:] = m.qpos0
    for name, index in model.index.items():
        d.qpos[m.joint(name).qposadr[0]] = q[index]
    mujoco.mj_forward(m, d)
    bodies = {m.body(b).name: (d.xmat[b].reshape(3, 3).copy(), d.xpos[b].copy()) for b in range(1, m.nbody)}
    cameras = {m.camera(c).name: (d.cam_xmat[c].reshape(3, 3) @ MUJOCO_FROM_SAPIEN_CAMERA, d.cam_xpos[c].copy())
               for c in range(m.ncam)}
    return bodies, cameras


def worst_gap(model: UrdfModel, q: np.ndarray, expected: dict[str, tuple[np.ndarray, np.ndarray]],
              names: list[str], position_only: bool = False) -> float:
    worst = 0.0
    for name in names:
        rotation, position = model.link_pose(q, name)
        worst = max(worst, float(np.abs(position - expected[name][1]).max()))
        if not position_only:
            worst = max(worst, float(np.abs(rotation - expected[name][0]).max()))
    return worst


def random_vectors(model: UrdfModel, count: int, seed: int) -> list[np.ndarray]:
    lower, upper = model.limits()
    lower, upper = np.where(np.isfinite(lower), lower, -math.pi), np.where(np.isfinite(upper), upper, math.pi)
    rng = np.random.default_rng(seed)
    return [rng.uniform(lower, upper) for _ in range(count)]


def urdf_inertials(urdf: str) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """link -> (mass, centre of mass, inertia tensor in the link frame)."""
    out = {}
    for link in ET.fromstring(urdf).findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin, inertia = inertial.find("origin"), inertial.find("inertia")
        assert inertia is not None
        xyz = np.array([float(v) for v in origin.get("xyz", "0 0 0").split()]) if origin is not None else np.zeros(3)
        rpy = [float(v) for v in origin.get("rpy", "0 0 0").split()] if origin is not None else [0.0] * 3
        i = {k: float(inertia.get(k, "0")) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        tensor = np.array([[i["ixx"], i["ixy"], i["ixz"]], [i["ixy"], i["iyy"], i["iyz"]],
                           [i["ixz"], i["iyz"], i["izz"]]])
        rotation = rpy_matrix(*rpy)
        mass = inertial.find("mass")
        assert mass is not None
        out[str(link.get("name"))] = (float(mass.get("value", "nan")), xyz, rotation @ tensor @ rotation.T)
    return out


def assert_inertials_match(m: mujoco.MjModel, urdf: str, bodies: list[str]) -> None:
    ours = urdf_inertials(urdf)
    for name in bodies:
        b = m.body(name)
        rotation = quat_to_matrix(b.iquat)
        mass, com, tensor = ours[name]
        assert mass == pytest.approx(float(b.mass[0]), abs=1e-12), name
        np.testing.assert_allclose(com, b.ipos, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(tensor, rotation @ np.diag(b.inertia) @ rotation.T, atol=1e-9, err_msg=name)


def assert_primitive_geoms_match(m: mujoco.MjModel, d: mujoco.MjData, model: UrdfModel, q: np.ndarray,
                                 urdf: str) -> int:
    """Every non-mesh geom's world pose and size equal MuJoCo's (``d`` computed at ``q``); returns how many."""
    root, checked = ET.fromstring(urdf), 0
    for b in range(1, m.nbody):
        name = m.body(b).name
        link = root.find(f"link[@name='{name}']")
        assert link is not None, name
        visuals = link.findall("visual")
        geoms = range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
        assert len(visuals) == len(geoms), name
        rotation, position = model.link_pose(q, name)
        for visual, g in zip(visuals, geoms, strict=True):
            if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
                continue  # MuJoCo recentres meshes on their inertia frame: its geom frame is not the file's
            origin, shape = visual.find("origin"), visual.find("geometry/*")
            assert origin is not None and shape is not None
            rpy = [float(v) for v in origin.get("rpy", "").split()]
            xyz = np.array([float(v) for v in origin.get("xyz", "").split()])
            np.testing.assert_allclose(rotation @ rpy_matrix(*rpy), d.geom_xmat[g].reshape(3, 3), atol=TOL)
            np.testing.assert_allclose(position + rotation @ xyz, d.geom_xpos[g], atol=TOL)
            size = {key: np.array([float(v) for v in value.split()]) for key, value in shape.attrib.items()}
            if shape.tag == "box":
                got = size["size"] / 2.0
            elif shape.tag == "sphere":
                got = size["radius"]
            else:
                got = np.concatenate([size["radius"], size["length"] / 2.0])
            np.testing.assert_allclose(got, m.geom_size[g][:len(got)], atol=1e-12, err_msg=shape.tag)
            checked += 1
    return checked


# -- rotations ---------------------------------------------------------------------------------------------------
def test_matrix_rpy_inverts_urdfs_rpy_everywhere_including_at_gimbal_lock() -> None:
    rng = np.random.default_rng(3)
    angles = [tuple(rng.uniform(-math.pi, math.pi, 3)) for _ in range(200)]
    angles += [(r, s * math.pi / 2 + e, y) for r, y in rng.uniform(-3, 3, (20, 2))
               for s in (1, -1) for e in (0.0, 1e-9, -1e-7, 1e-4)]
    worst = 0.0
    for roll, pitch, yaw in angles:
        rotation = rpy_matrix(roll, pitch, yaw)
        back = rpy_matrix(*matrix_rpy(rotation))
        worst = max(worst, float(np.abs(back - rotation).max()))
    assert worst < 1e-12, worst


# -- ALOHA, judged by MuJoCo -------------------------------------------------------------------------------------
def test_aloha_body_poses_equal_mujocos_at_the_keyframe_and_random_joints(aloha: MjcfConversion,
                                                                          aloha_file: Path) -> None:
    model = UrdfModel.from_text(aloha.urdf)
    m = mujoco.MjModel.from_xml_path(str(aloha_file))
    d = mujoco.MjData(m)
    arm_joints = [m.joint(j).name for j in range(m.njnt) if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE]
    assert list(model.moving_joints) == arm_joints  # MuJoCo's qpos order, names exactly as in the MJCF
    assert len(arm_joints) == 16
    for name in arm_joints:
        joint = model.joints[name]
        assert (joint.lower, joint.upper) == tuple(m.joint(name).range), name
        assert joint.kind == ("prismatic" if name.endswith("finger") else "revolute")
    kept = [m.body(b).name for b in range(1, m.nbody)
            if m.body(m.body_rootid[b]).name in ARMS]
    assert len(kept) == 22 and set(kept) <= set(model.links)
    assert not {"table", "box", "midair"} & set(model.links)
    key = np.array([m.key_qpos[0][m.joint(n).qposadr[0]] for n in model.moving_joints])
    for q in [key, *random_vectors(model, 20, seed=11)]:
        bodies, cameras = mujoco_poses(m, d, model, q)
        assert worst_gap(model, q, bodies, kept) < TOL
        # a camera's position is fixed in its body in every mode, so it holds at any joint vector
        assert worst_gap(model, q, cameras, ["left_wrist", "right_wrist"], position_only=True) < TOL


def test_aloha_cameras_equal_mujocos_at_qpos0_and_stay_frozen_in_their_body(aloha: MjcfConversion,
                                                                            aloha_file: Path) -> None:
    model = UrdfModel.from_text(aloha.urdf)
    m = mujoco.MjModel.from_xml_path(str(aloha_file))
    d = mujoco.MjData(m)
    names = [m.camera(c).name for c in range(m.ncam)]
    assert sorted(aloha.cameras) == sorted(names)
    for c, name in enumerate(names):
        camera = aloha.cameras[name]
        assert camera.fovy == pytest.approx(math.radians(float(m.cam_fovy[c])), abs=1e-12)
        parent = m.body(m.cam_bodyid[c]).name
        assert camera.parent == ("mjcf_world" if parent == "world" else parent)
        assert model.parent_link(name) == camera.parent
    q0 = np.zeros(len(model.moving_joints))
    _, cameras = mujoco_poses(m, d, model, q0)
    assert worst_gap(model, q0, cameras, names) < TOL
    # "top" looks straight down on the table, MuJoCo's degenerate case: its +x stays world +x, so in SAPIEN's
    # convention forward is world -z, left is world -x and up is world +y
    np.testing.assert_allclose(model.link_pose(q0, "top")[0], [[0, -1, 0], [0, 0, 1], [-1, 0, 0]], atol=1e-12)
    # MuJoCo keeps re-aiming a targetbody camera (its +x level) while the wrist rolls; ours is frozen at qpos0 in
    # the gripper (pitching alone keeps the two equal: camera and target lie in the gripper's x-z plane)
    rolled = np.array([m.key_qpos[0][m.joint(n).qposadr[0]] for n in model.moving_joints])
    _, moved = mujoco_poses(m, d, model, rolled)
    assert worst_gap(model, rolled, moved, ["left_wrist"]) < TOL
    rolled[model.index["vx300s_left/wrist_rotate"]] = 0.7
    _, moved = mujoco_poses(m, d, model, rolled)
    assert worst_gap(model, rolled, moved, ["left_wrist"], position_only=True) < TOL
    assert worst_gap(model, rolled, moved, ["left_wrist"]) > 0.1


def test_aloha_inertials_equal_mujocos(aloha: MjcfConversion, aloha_file: Path) -> None:
    m = mujoco.MjModel.from_xml_path(str(aloha_file))
    moving = [m.body(b).name for b in range(1, m.nbody) if m.body_jntnum[b] > 0 and m.body(b).name != "box"]
    moving.append("vx300s_left/gripper_prop_link")
    assert_inertials_match(m, aloha.urdf, moving)


def test_aloha_urdf_loads_in_sapien_as_one_articulation_with_meshes(aloha: MjcfConversion, tmp_path: Path) -> None:
    urdf = tmp_path / "aloha.urdf"
    urdf.write_text(aloha.urdf, encoding="utf-8")
    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actors, _ = loader.parse(str(urdf))
    assert len(builders) == 1 and not actors
    link_builders = builders[0].link_builders
    visuals = [r for b in link_builders for r in b.visual_records]
    assert len(visuals) == 22 and all(r.type == "file" and Path(r.filename).is_file() for r in visuals)
    assert {tuple(r.scale) for r in visuals} == {(0.001, 0.001, 0.001)}
    for b in link_builders:
        b.visual_records = []  # no render system in this scene
    robot = builders[0].build()
    model = UrdfModel.from_text(aloha.urdf)
    joints = robot.active_joints
    assert len(joints) == 16
    for joint in joints:
        expected = model.joints[joint.name]
        np.testing.assert_allclose(joint.limits, [[expected.lower, expected.upper]])
    # the two arms' base plates are visual-only in the MJCF (contype = conaffinity = 0); 20 collision meshes
    assert sum(len(link.collision_shapes) for link in robot.links) == 20
    # SAPIEN's own kinematic model of the URDF agrees with ours (float32 inside, hence the tolerance)
    pinocchio = robot.create_pinocchio_model()
    names = [j.name for j in joints]
    for q in random_vectors(model, 5, seed=5):
        pinocchio.compute_forward_kinematics(np.array([q[model.index[n]] for n in names]))
        for i, link in enumerate(robot.links):
            pose = pinocchio.get_link_pose(i)
            rotation, position = model.link_pose(q, link.name)
            assert np.abs(position - pose.p).max() < 1e-5 and np.abs(rotation - quat_to_matrix(pose.q)).max() < 1e-5


def test_aloha_files_are_read_where_installed_without_importing_gym_aloha(aloha: MjcfConversion,
                                                                          aloha_file: Path) -> None:
    assert "gym_aloha" not in sys.modules
    names = [p.name for p in aloha.files]
    assert names[:5] == ["bimanual_viperx_transfer_cube.xml", "scene.xml", "vx300s_dependencies.xml",
                         "vx300s_left.xml", "vx300s_right.xml"]
    assert "vx300s_10_custom_finger_left.stl" in names and "tabletop.stl" not in names  # the table is left out
    assert all(p.is_absolute() and p.is_file() and p.parent == aloha_file.parent for p in aloha.files)
    assert len(names) == len(set(names)) == 5 + 11


def test_without_a_body_list_every_body_but_the_free_box_is_kept(aloha_file: Path) -> None:
    conversion = mjcf_to_urdf(aloha_file)
    model = UrdfModel.from_text(conversion.urdf)
    assert {"table", "midair", *ARMS} <= set(model.links) and "box" not in model.links
    assert "red_box_joint" not in model.joints
    assert "tabletop.stl" in [p.name for p in conversion.files]


# -- a hand-written model: every frame form, judged by MuJoCo ------------------------------------------------------
MAIN = """<mujoco model="handmade">
  <compiler angle="{angle}" eulerseq="{seq}" meshdir="meshes"/>
  <default>
    <joint axis="0 1 0" damping="0.1"/>
    <geom rgba="0.2 0.4 0.6 1"/>
    <default class="arm">
      <joint range="-60 45"/>
      <geom type="capsule" size="0.02"/>
      <default class="wrist">
        <joint axis="1 0 0"/>
      </default>
    </default>
  </default>
  <asset>
    <mesh file="tetra.stl" scale="0.5 0.5 0.5"/>
    <material name="red" rgba="1 0 0 1"/>
  </asset>
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <camera name="overview" pos="0.8 -0.6 0.7" xyaxes="0.6 0.8 0 -0.4 0.3 0.9" fovy="60"/>
    <camera name="watcher" pos="0 -1 0.5" mode="targetbody" target="hand"/>
    <camera name="com_watcher" pos="1 1 1" mode="targetbodycom" target="upper"/>
    <include file="parts/robot.xml"/>
  </worldbody>
</mujoco>
"""
ROBOT = """<mujocoinclude>
  <body name="base" pos="0.1 0.2 0.05" euler="10 20 30">
    <geom type="box" size="0.1 0.08 0.05" material="red"/>
    <body name="upper" pos="0 0 0.1" axisangle="1 1 0 30" childclass="arm">
      <inertial pos="0 0 0.1" quat="0.9 0.1 0.2 0.3" mass="1" diaginertia="0.01 0.02 0.03"/>
      <joint name="shoulder_yaw" axis="0 0 1" pos="0.01 0 0"/>
      <joint name="shoulder_pitch" pos="0 0.02 0.03"/>
      <geom fromto="0 0 0 0 0 0.3"/>
      <body name="fore" pos="0 0 0.3" xyaxes="0 1 0 -1 0.3 0.2">
        <inertial pos="0.05 0 0" mass="0.5" fullinertia="0.03 0.04 0.05 0.001 0.002 0.003"/>
        <joint name="elbow" class="wrist" limited="false"/>
        <geom type="cylinder" fromto="0 0 0 0.2 0 0" size="0.015"/>
        <frame pos="0.2 0 0" euler="0 90 0">
          <body name="hand" zaxis="1 1 1">
            <inertial pos="0 0 0.02" mass="0.2" diaginertia="0.001 0.001 0.001"/>
            <joint name="wrist" class="wrist" pos="0 0 0.01"/>
            <geom type="mesh" mesh="tetra"/>
            <camera name="hand_cam" pos="0 0.05 0" euler="0 -90 90" fovy="50"/>
            <camera name="hand_focus" pos="0 0 -0.1" mode="targetbody" target="finger"/>
            <body name="finger" pos="0 0 0.05" zaxis="0 0 -2">
              <inertial pos="0 0 0" mass="0.05" diaginertia="1e-5 1e-5 1e-5"/>
              <joint name="slide" type="slide" pos="0.01 0 0" axis="0 1 1" range="-0.02 0.03"/>
              <geom type="sphere" size="0.01" contype="0" conaffinity="0"/>
            </body>
          </body>
        </frame>
      </body>
    </body>
  </body>
  <body name="spinner" pos="-0.3 0 0.2" quat="0.5 0.5 -0.5 0.5">
    <joint name="spin" axis="0 0 1"/>
    <geom type="box" fromto="0 0 0 0.1 0 0" size="0.01" rgba="0.5 0.5 0.5 1" material="red"/>
  </body>
</mujocoinclude>
"""


def write_stl(path: Path) -> None:
    """A binary STL tetrahedron (outward faces)."""
    v = [(0.0, 0.0, 0.0), (0.1, 0.0, 0.0), (0.0, 0.1, 0.0), (0.0, 0.0, 0.1)]
    faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
    data = b"\0" * 80 + struct.pack("<I", len(faces))
    for face in faces:
        data += struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *v[i]) for i in face) + b"\0\0"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def handmade(folder: Path, angle: str = "degree", seq: str = "xyz") -> Path:
    write_stl(folder / "meshes" / "tetra.stl")
    (folder / "parts").mkdir(parents=True, exist_ok=True)
    (folder / "parts" / "robot.xml").write_text(ROBOT, encoding="utf-8")
    main = folder / "handmade.xml"
    main.write_text(MAIN.format(angle=angle, seq=seq), encoding="utf-8")
    return main


@pytest.mark.parametrize(("angle", "seq"), [("degree", "xyz"), ("radian", "XYZ"), ("degree", "zXy")])
def test_handmade_model_equals_mujoco(tmp_path: Path, angle: str, seq: str) -> None:
    path = handmade(tmp_path, angle, seq)
    conversion = mjcf_to_urdf(path, ["base", "spinner"])
    model = UrdfModel.from_text(conversion.urdf)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    assert list(model.moving_joints) == ["shoulder_yaw", "shoulder_pitch", "elbow", "wrist", "slide", "spin"]
    kinds = {name: model.joints[name].kind for name in model.moving_joints}
    assert kinds == {"shoulder_yaw": "revolute", "shoulder_pitch": "revolute", "elbow": "continuous",
                     "wrist": "revolute", "slide": "prismatic", "spin": "continuous"}
    for name in ("shoulder_yaw", "shoulder_pitch", "wrist", "slide"):
        np.testing.assert_allclose([model.joints[name].lower, model.joints[name].upper], m.joint(name).range,
                                   atol=1e-12)
    # the anchored joints go through helper links, so the body's own link keeps MuJoCo's body frame
    assert {"upper__shoulder_yaw", "upper__shoulder_pitch", "hand__wrist"} <= set(model.links)
    assert "finger__slide" not in model.links  # a slide's anchor moves nothing
    bodies = [m.body(b).name for b in range(1, m.nbody)]
    fixed_cameras = ["overview", "hand_cam"]
    for q in [np.zeros(len(model.moving_joints)), *random_vectors(model, 20, seed=2)]:
        expected, cameras = mujoco_poses(m, d, model, q)
        assert worst_gap(model, q, expected, bodies) < TOL
        assert worst_gap(model, q, cameras, fixed_cameras) < TOL
        checked = assert_primitive_geoms_match(m, d, model, q, conversion.urdf)
        assert checked == 5  # box, capsule and cylinder (both fromto), sphere, box (fromto)
    q0 = np.zeros(len(model.moving_joints))
    _, cameras = mujoco_poses(m, d, model, q0)
    assert worst_gap(model, q0, cameras, [m.camera(c).name for c in range(m.ncam)]) < TOL
    assert {c.name: c.fovy for c in conversion.cameras.values()} == pytest.approx(
        {m.camera(c).name: math.radians(float(m.cam_fovy[c])) for c in range(m.ncam)}, abs=1e-12)
    assert_inertials_match(m, conversion.urdf, ["upper", "fore", "hand", "finger"])
    assert [p.name for p in conversion.files] == ["handmade.xml", "robot.xml", "tetra.stl"]


def test_handmade_geometry_reaches_sapien_as_the_right_shapes(tmp_path: Path) -> None:
    conversion = mjcf_to_urdf(handmade(tmp_path))
    root = ET.fromstring(conversion.urdf)
    finger = root.find("link[@name='finger']")
    assert finger is not None and len(finger.findall("visual")) == 1 and not finger.findall("collision")
    colours = {v.get("name"): v.find("material/color").get("rgba")  # type: ignore[union-attr]
               for v in root.iter("visual")}
    # MuJoCo's rule: an rgba other than its internal default (here from the defaults class) beats the material
    assert colours["base__geom0"] == "0.2 0.4 0.6 1" and colours["spinner__geom0"] == "1 0 0 1"
    assert colours["upper__geom0"] == "0.2 0.4 0.6 1"
    urdf = tmp_path / "handmade.urdf"
    urdf.write_text(conversion.urdf, encoding="utf-8")
    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actors, _ = loader.parse(str(urdf))
    assert len(builders) == 1 and not actors
    for b in builders[0].link_builders:
        b.visual_records = []
    robot = builders[0].build()
    shapes = {link.name: [type(s).__name__.removeprefix("PhysxCollisionShape") for s in link.collision_shapes]
              for link in robot.links}
    assert shapes["base"] == ["Box"] and shapes["upper"] == ["Capsule"] and shapes["fore"] == ["Cylinder"]
    assert shapes["hand"] == ["ConvexMesh"] and shapes["spinner"] == ["Box"] and shapes["finger"] == []
    capsule = robot.find_link_by_name("upper").collision_shapes[0]
    assert (capsule.radius, capsule.half_length) == pytest.approx((0.02, 0.15))
    box = robot.find_link_by_name("spinner").collision_shapes[0]
    np.testing.assert_allclose(box.half_size, [0.01, 0.01, 0.05], rtol=1e-6)  # fromto: size[0] across, half the length


# -- errors --------------------------------------------------------------------------------------------------------
def check_error(exc: pytest.ExceptionInfo[MjcfError], *parts: str) -> None:
    message = str(exc.value)
    assert "\n" not in message
    for part in parts:
        assert part in message, (part, message)


def write(tmp_path: Path, body: str, name: str = "model.xml") -> Path:
    path = tmp_path / name
    path.write_text(f"<mujoco><worldbody>{body}</worldbody></mujoco>", encoding="utf-8")
    return path


def test_a_missing_mesh_file_names_the_asset_and_the_path(tmp_path: Path) -> None:
    path = tmp_path / "model.xml"
    path.write_text('<mujoco><asset><mesh name="arm" file="nope.stl"/></asset><worldbody><body name="b">'
                    '<geom type="mesh" mesh="arm"/></body></worldbody></mujoco>', encoding="utf-8")
    with pytest.raises(MjcfError) as exc:
        mjcf_to_urdf(path)
    check_error(exc, str(path), "<mesh name='arm'>", "file='nope.stl'", str(tmp_path / "nope.stl"))


def test_a_body_not_in_the_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, '<body name="arm"><geom size="0.1"/></body>')
    with pytest.raises(MjcfError) as exc:
        mjcf_to_urdf(path, ["arm", "ghost"])
    check_error(exc, str(path), "<worldbody>", "body='ghost'", "['arm']")


@pytest.mark.parametrize("joint", ['<freejoint name="loose"/>', '<joint name="loose" type="free"/>'])
def test_a_free_joint_in_a_kept_body_is_an_error(tmp_path: Path, joint: str) -> None:
    path = write(tmp_path, f'<body name="box">{joint}<geom type="box" size="0.1 0.1 0.1"/></body>')
    with pytest.raises(MjcfError) as exc:
        mjcf_to_urdf(path, ["box"])
    check_error(exc, str(path), "name='loose'", "'free'", "'box'")
    assert "box" not in UrdfModel.from_text(mjcf_to_urdf(path).urdf).links  # None: left out, no error


def test_a_malformed_number_names_the_included_file_the_element_and_the_text(tmp_path: Path) -> None:
    part = tmp_path / "part.xml"
    part.write_text('<mujocoinclude><body name="b" pos="0 0 0.1"><joint name="j" range="-1 oops"/>'
                    '<geom size="0.1"/></body></mujocoinclude>', encoding="utf-8")
    path = write(tmp_path, '<include file="part.xml"/>')
    with pytest.raises(MjcfError) as exc:
        mjcf_to_urdf(path)
    check_error(exc, str(part), "<joint name='j'>", "range='-1 oops'")
    path = write(tmp_path, '<body name="b" pos="0 0 x"><geom size="0.1"/></body>')
    with pytest.raises(MjcfError) as exc:
        mjcf_to_urdf(path)
    check_error(exc, str(path), "<body name='b'>", "pos='0 0 x'")


def test_other_unconvertible_models_are_refused_with_the_element(tmp_path: Path) -> None:
    cases = {
        '<body name="b"><joint name="ball" type="ball"/><geom size="0.1"/></body>': ("<joint name='ball'>", "'ball'"),
        '<body name="b"><joint name="s" type="slide"/><geom size="0.1"/></body>': ("<joint name='s'>", "range"),
        '<body name="b"><geom type="ellipsoid" size="0.1 0.2 0.3"/></body>': ("<geom>", "'ellipsoid'"),
        '<body name="b" quat="1 0 0 0" euler="0 0 1"><geom size="0.1"/></body>': ("<body name='b'>", "euler"),
        '<body name="b"><geom class="nope" size="0.1"/></body>': ("<geom>", "class='nope'"),
        '<body name="b"/><body name="b"/>': ("<body name='b'>", "name='b'"),
        '<include file="missing.xml"/>': ("<include>", "file='missing.xml'"),
        '<body name="b"><joint/><inertial mass="1" quat="1 0 0 0" fullinertia="1 1 1 0 0 0"/></body>':
            ("<inertial>", "quat='1 0 0 0'"),
    }
    for body, parts in cases.items():
        path = write(tmp_path, body)
        with pytest.raises(MjcfError) as exc:
            mjcf_to_urdf(path)
        check_error(exc, str(path), *parts)
