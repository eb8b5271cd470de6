"""A rig is the lab's own files plus a YAML: the built-in rig and the ALOHA bench (gym-aloha's MJCF and meshes,
read where pip installed them) load through one path; a joint map with signs and offsets, a calibration file
and every refusal are checked against the files themselves."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from robofollow_ros.contract import ARM_SLICE, BASE_FRAMES, CAMERA_FRAMES, TCP_FRAMES
from robofollow_ros.robot.cameras import BODY_FROM_OPTICAL
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG, RigConfigError, load_rig_config
from robofollow_ros.robot.rig_description import ENV_RIG, known_rigs
from robofollow_ros.robot.rig_files import distribution_folder, find_package
from robofollow_ros.robot.rig_model import GripperGeometry
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.robot.urdf_model import UrdfModel

ROOT = Path(__file__).resolve().parents[1]
GYM_ALOHA = distribution_folder("gym-aloha", "gym_aloha/assets")


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


#: the built-in rig's gripper, as a rig YAML's ``gripper_geometry`` block gives it
GRIPPER = {"finger_inner_closed": 0.002, "finger_travel": 0.04, "finger_thickness": 0.01, "finger_half_across": 0.012,
           "finger_below_tcp": 0.04, "palm_half_along": 0.05, "palm_half_across": 0.02, "palm_above_tcp": 0.0}


def _builtin(**changes: object) -> dict:
    data = yaml.safe_load(DEFAULT_RIG_CONFIG.read_text(encoding="utf-8"))
    data["urdf"] = str(ROOT / "urdf" / "robofollow_rig.urdf")
    data.update(changes)
    return data


def test_the_builtin_rig_is_its_own_urdf_and_records_what_it_read() -> None:
    rig = load_rig_config("robofollow")
    assert rig.name == "robofollow" and rig.urdf_path == ROOT / "urdf" / "robofollow_rig.urdf"
    files = {f.path: f.sha256 for f in rig.files}
    assert set(files) == {DEFAULT_RIG_CONFIG, rig.urdf_path}
    for path, digest in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert {"robofollow", "aloha"} <= set(known_rigs())


def test_the_aloha_rig_reads_gym_alohas_files_as_they_are() -> None:
    rig = load_rig_config("aloha")
    model = UrdfModel.from_file(rig.urdf_path)
    assert model.root == "world"
    # The lab's names are kept; the contract's frames are added beside them.
    assert "vx300s_left/gripper_link" in model.links and "vx300s_right/wrist_link" in model.links
    assert {*TCP_FRAMES.values(), *CAMERA_FRAMES.values(), "left_base", "right_base"} <= set(model.links)
    assert model.joints["vx300s_left/left_finger"].kind == "prismatic"
    assert (model.joints["vx300s_left/left_finger"].lower, model.joints["vx300s_left/left_finger"].upper) == (
        pytest.approx(0.021), pytest.approx(0.057))
    assert model.joints["vx300s_left/shoulder"].lower == pytest.approx(-1.85005)
    # Every mesh is gym-aloha's own file, and each one read is in the provenance with its hash.
    meshes = {f.path for f in rig.files if f.path.suffix == ".stl"}
    assert meshes and all(p.parent == GYM_ALOHA for p in meshes)
    assert GYM_ALOHA / "vx300s_dependencies.xml" in {f.path for f in rig.files}
    for f in rig.files:
        assert hashlib.sha256(f.path.read_bytes()).hexdigest() == f.sha256
    # Mounted as the YAML says: gym-aloha's base line y = 0.5 at table y = -0.1, its table top at 0.74.
    kin = RigKinematics(rig)
    base = kin.link_pose(kin.home_vector(), "left_base").position
    assert np.allclose(base, [-0.469, -0.1, 0.74], atol=1e-9)
    # The TCP is 0.04 m behind the fingertips: TCP + 0.04 along +x is the fingers' far end (0.1537 m on gripper_link).
    vector = kin.home_vector()
    tcp = kin.tcp_poses(vector)["left"]
    gripper = kin.link_pose(vector, "vx300s_left/gripper_link")
    assert np.allclose(gripper.rotation.T @ (tcp.position + 0.04 * tcp.rotation[:, 0] - gripper.position),
                       [0.1537, 0, 0], atol=1e-9)


def test_a_gripper_drives_every_finger_between_its_closed_and_open_positions() -> None:
    kin = RigKinematics(load_rig_config("aloha"))
    qpos = kin.joint_map.to_qpos(np.array([0.0] * 6 + [0.25] + [0.0] * 6 + [1.0]))
    index = {name: i for i, name in enumerate(kin.model.moving_joints)}
    assert qpos[index["vx300s_left/left_finger"]] == pytest.approx(0.021 + 0.25 * 0.036)
    assert qpos[index["vx300s_left/right_finger"]] == pytest.approx(-0.021 - 0.25 * 0.036)
    assert qpos[index["vx300s_right/right_finger"]] == pytest.approx(-0.057)


def test_a_joint_map_with_sign_and_offset_moves_the_same_links(tmp_path: Path) -> None:
    """Contract joint1 of the left arm mapped as lab = 0.3 − contract: the contract value c puts the arm where the
    unmapped rig's value 0.3 − c does, and the limits read in contract units are the lab's, mirrored."""
    joints = _builtin()["joints"]
    joints["left"][0] = {"name": "left_joint1", "sign": -1, "offset": 0.3}
    home = _builtin()["home"]
    home["left"][0] = 0.3 - home["left"][0]
    mapped = RigKinematics(load_rig_config(_write(tmp_path / "rig.yaml", _builtin(joints=joints, home=home))))
    plain = RigKinematics(load_rig_config("robofollow"))
    vector = mapped.home_vector()
    vector[0] = 0.5
    same = vector.copy()
    same[0] = 0.3 - 0.5
    assert np.allclose(mapped.tcp_poses(vector)["left"].position, plain.tcp_poses(same)["left"].position)
    lower, upper = mapped.arm_limits("left")
    assert (lower[0], upper[0]) == (pytest.approx(0.3 - 2.6), pytest.approx(0.3 + 2.6))
    target = plain.tcp_poses(same)["left"]
    result = mapped.ik("left", target.position, target.quat_wxyz, seed=vector[ARM_SLICE["left"]] + 0.05)
    assert result.success
    assert np.allclose(mapped.tcp_poses(mapped.arm_vector(vector, "left", result.joints))["left"].position,
                       target.position, atol=1e-4)


def test_a_calibration_file_moves_the_head_camera_to_where_it_says(tmp_path: Path) -> None:
    calibration = tmp_path / "calibration"
    calibration.mkdir()
    # An optical frame 10 cm right of and 5 cm lower than the built-in head camera, turned 0.2 rad about world z.
    rig = RigKinematics(load_rig_config("robofollow"))
    builtin = rig.link_pose(rig.home_vector(), "head_camera")
    turn = np.array([[np.cos(0.2), -np.sin(0.2), 0], [np.sin(0.2), np.cos(0.2), 0], [0, 0, 1]])
    optical = turn @ builtin.rotation @ BODY_FROM_OPTICAL
    from robofollow_ros.robot.transforms import matrix_to_quat

    w, x, y, z = matrix_to_quat(optical)
    where = builtin.position + np.array([0.1, 0.0, -0.05])
    _write(calibration / "extrinsics.yaml", {"head": {"parent_frame": "world", "child_frame": "head_camera_optical",
                                                      "translation": where.tolist(),
                                                      "rotation_xyzw": [float(v) for v in (x, y, z, w)]}})
    _write(calibration / "head.yaml", {"image_width": 640, "image_height": 480,
                                       "camera_matrix": {"rows": 3, "cols": 3,
                                                         "data": [600.0, 0, 320, 0, 600.0, 240, 0, 0, 1]}})
    cameras = _builtin()["cameras"]
    cameras["head"] = {"calibration": "calibration"}
    moved = load_rig_config(_write(tmp_path / "rig.yaml", _builtin(cameras=cameras)))
    kin = RigKinematics(moved)
    pose = kin.link_pose(kin.home_vector(), "head_camera")
    assert np.allclose(pose.position, where, atol=1e-9)
    assert np.allclose(pose.rotation @ BODY_FROM_OPTICAL, optical, atol=1e-9)
    assert moved.camera_fovy["head"] == pytest.approx(2 * np.arctan(240 / 600))
    assert {calibration / "extrinsics.yaml", calibration / "head.yaml"} <= {f.path for f in moved.files}
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.sim.world import SimWorld

    world = SimWorld(render=False, rig=moved)
    world.reset(default_registry().layout("scene1", "default"), 1)
    position, quat = world.camera_pose("head")
    assert np.allclose(position, where, atol=1e-5)
    assert np.allclose(quat_to_matrix(quat) @ BODY_FROM_OPTICAL, optical, atol=1e-5)


@pytest.mark.parametrize("change, expected", [
    ({"joints": {"left": ["left_joint1", "left_joint2", "left_joint3", "left_joint4", "left_joint5", "nope"],
                 "right": [f"right_joint{k}" for k in range(1, 7)]}},
     "field 'joints.left[5]' names 'nope', which is not a moving joint of"),
    ({"home": {"left": [0.0, 0.0, 0.0, 0.0, 1.57, 0.0], "right": [9.0, 0.0, 0.0, 0.0, 1.57, 0.0]}},
     "field 'home.right[0]' is 9.0: joint 'right_joint1' at 9.0 breaks its limits [-2.6, 2.6]"),
    ({"grippers": {"left": [{"joint": "left_gripper", "closed": 0.0, "open": 0.05}],
                   "right": [{"joint": "right_gripper", "closed": 0.0, "open": 0.04}]}},
     "field 'grippers.left[0].open' is 0.05, outside joint 'left_gripper''s limits [0.0, 0.04]"),
    ({"tcp": {"left": {"link": "no_such_link"}, "right": "right_tcp"}},
     "no link 'no_such_link' to hang frame 'left_tcp' on"),
    ({"cameras": {"head": {"link": "head_camera"}, "left_wrist": {"link": "left_wrist_camera", "fovy": 1.0},
                  "right_wrist": {"link": "right_wrist_camera", "fovy": 1.0}}},
     "field 'cameras.head' needs a fovy"),
    ({"gripper_geometry": {**GRIPPER, "palm_height": 0.1}},
     "field 'gripper_geometry' has unknown keys ['palm_height']"),
    ({"gripper_geometry": {k: v for k, v in GRIPPER.items() if k != "finger_travel"}},
     "field 'gripper_geometry' misses ['finger_travel']"),
    ({"gripper_geometry": {**GRIPPER, "finger_thickness": 0.0}},
     "field 'gripper_geometry.finger_thickness' must be a finite number > 0, got 0.0"),
    ({"gripper_geometry": {**GRIPPER, "finger_inner_closed": -0.02}},
     "field 'gripper_geometry.finger_inner_closed' must leave each closed finger's outer face beyond the TCP"),
    ({"gripper_geometry": {**GRIPPER, "palm_above_tcp": -0.05}},
     "field 'gripper_geometry.palm_above_tcp' must put the palm above the fingertips"),
])
def test_a_bad_rig_yaml_is_one_line_naming_the_file_field_and_value(tmp_path: Path, change: dict,
                                                                   expected: str) -> None:
    path = _write(tmp_path / "rig.yaml", _builtin(**change))
    with pytest.raises(RigConfigError) as error:
        load_rig_config(path)
    message = str(error.value)
    assert expected in message and str(path) in message and "\n" not in message, message


def test_a_gripper_geometry_replaces_the_built_in_rigs_figures(tmp_path: Path) -> None:
    assert load_rig_config("robofollow").gripper_geometry == GripperGeometry()
    rig = load_rig_config(_write(tmp_path / "rig.yaml", _builtin(gripper_geometry={**GRIPPER, "palm_above_tcp": 0.05})))
    assert rig.gripper_geometry == GripperGeometry(**{**GRIPPER, "palm_above_tcp": 0.05})


def test_a_missing_mesh_names_the_file_the_link_and_the_uri(tmp_path: Path) -> None:
    urdf = tmp_path / "arm.urdf"
    text = (ROOT / "urdf" / "robofollow_rig.urdf").read_text(encoding="utf-8")
    text = text.replace('<link name="left_link3">', '<link name="left_link3"><visual><geometry>'
                        '<mesh filename="package://my_arm/meshes/link3.stl"/></geometry></visual>', 1)
    urdf.write_text(text, encoding="utf-8")
    with pytest.raises(RigConfigError) as error:
        load_rig_config(_write(tmp_path / "rig.yaml", _builtin(urdf="arm.urdf")))
    message = str(error.value)
    assert f"{urdf}: link 'left_link3' mesh 'package://my_arm/meshes/link3.stl': no ROS package 'my_arm'" in message
    # Found once the rig YAML names the package's folder.
    (tmp_path / "pkgs" / "my_arm" / "meshes").mkdir(parents=True)
    (tmp_path / "pkgs" / "my_arm" / "meshes" / "link3.stl").write_bytes(
        (GYM_ALOHA / "vx300s_4_upper_forearm.stl").read_bytes())
    rig = load_rig_config(_write(tmp_path / "rig.yaml", _builtin(urdf="arm.urdf", package_path=["pkgs"])))
    assert tmp_path / "pkgs" / "my_arm" / "meshes" / "link3.stl" in {f.path for f in rig.files}
    assert 'filename="file://' + str(tmp_path / "pkgs" / "my_arm" / "meshes" / "link3.stl") in rig.robot_description()


def test_the_active_rig_is_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_RIG, "aloha")
    assert load_rig_config().name == "aloha"
    monkeypatch.setenv(ENV_RIG, "nope")
    with pytest.raises(RigConfigError, match=r"'nope' is neither a rig YAML, a folder holding rig\.yaml, nor a known"):
        load_rig_config()


def test_a_rigs_simulated_calibration_is_written_from_its_own_cameras() -> None:
    """Perception and the reset check read camera_info and extrinsics: for the ALOHA twin they are its cameras'
    (the MJCF's `top` camera at 78 degrees, 0.8 m above gym-aloha's table centre), not the built-in rig's files."""
    from robofollow_ros.robot.calibration import DEFAULT_CALIBRATION_DIR, rig_calibration_dir

    assert rig_calibration_dir(load_rig_config("robofollow")) == DEFAULT_CALIBRATION_DIR
    rig = load_rig_config("aloha")
    folder = rig_calibration_dir(rig)
    assert folder != DEFAULT_CALIBRATION_DIR and rig_calibration_dir(rig) == folder
    head = yaml.safe_load((folder / "head.yaml").read_text(encoding="utf-8"))
    fy = head["camera_matrix"]["data"][4]
    assert 2 * np.arctan(head["image_height"] / 2 / fy) == pytest.approx(np.radians(78), abs=1e-4)
    extrinsics = yaml.safe_load((folder / "extrinsics.yaml").read_text(encoding="utf-8"))
    assert extrinsics["head"]["parent_frame"] == "world"
    assert np.allclose(extrinsics["head"]["translation"], [0.0, 0.0, 1.54], atol=1e-5)
    assert (folder / "colour.yaml").read_bytes() == (DEFAULT_CALIBRATION_DIR / "colour.yaml").read_bytes()


# -- the per-arm form: one arm's file, twice ------------------------------------------------------------------------

BUILTIN_URDF = ROOT / "urdf" / "robofollow_rig.urdf"


def _local(name: str) -> str:
    """The built-in left arm's name as a one-arm file names it: ``left_base`` → ``base_link``, ``left_joint3`` →
    ``joint3``, ``left_tcp`` → ``tcp``."""
    return "base_link" if name == "left_base" else name.removeprefix("left_")


def _one_arm(path: Path, mimic: bool = True) -> Path:
    """The built-in rig's left arm (its ``left_*`` links and joints below the mount) as a file of its own."""
    import xml.etree.ElementTree as ET

    rig = ET.parse(BUILTIN_URDF).getroot()
    arm = ET.Element("robot", {"name": "one_arm"})
    for link in rig.findall("link"):
        if str(link.get("name")).startswith("left_"):
            link.set("name", _local(str(link.get("name"))))
            arm.append(link)
    for joint in rig.findall("joint"):
        child, parent = joint.find("child"), joint.find("parent")
        assert child is not None and parent is not None
        if not str(child.get("link")).startswith("left_") or parent.get("link") == "world":
            continue
        joint.set("name", _local(str(joint.get("name"))))
        child.set("link", _local(str(child.get("link"))))
        parent.set("link", _local(str(parent.get("link"))))
        if mimic and joint.get("name") == "gripper_mirror":
            ET.SubElement(joint, "mimic", {"joint": "gripper"})
        arm.append(joint)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ET.tostring(arm, encoding="unicode"), encoding="utf-8")
    return path


def _builtin_origin(joint: str) -> dict[str, list[float]]:
    """``{xyz, rpy}`` of one of the built-in URDF's fixed joints (an arm's mount, the head camera)."""
    import xml.etree.ElementTree as ET

    element = ET.parse(BUILTIN_URDF).getroot().find(f"joint[@name='{joint}']")
    assert element is not None
    origin = element.find("origin")
    assert origin is not None
    return {key: [float(v) for v in str(origin.get(key)).split()] for key in ("xyz", "rpy")}


def _per_arm(urdf: str, prefixes: tuple[str, str] = ("left_", "right_"), **changes: object) -> dict:
    """The built-in rig's YAML in the per-arm form: the one-arm file twice, at the built-in rig's mounts."""
    data = _builtin()
    del data["urdf"]
    data["arms"] = {arm: {"urdf": urdf, "prefix": prefix, "mount": _builtin_origin(f"{arm}_mount")}
                    for arm, prefix in zip(("left", "right"), prefixes, strict=True)}
    data["joints"] = {arm: [f"joint{k}" for k in range(1, 7)] for arm in ("left", "right")}
    data["grippers"] = {arm: [{"joint": "gripper", "closed": 0.0, "open": 0.04},
                              {"joint": "gripper_mirror", "closed": 0.0, "open": 0.04}] for arm in ("left", "right")}
    data["tcp"] = {"left": "tcp", "right": {"link": "tcp"}}
    data["cameras"] = {"head": {"link": "world", **_builtin_origin("head_camera_joint"), "fovy": 0.7},
                       "left_wrist": {"arm": "left", "link": "wrist_camera", "fovy": 1.0},
                       "right_wrist": {"arm": "right", "link": "wrist_camera", "fovy": 1.0}}
    data.update(changes)
    return data


@pytest.mark.parametrize("prefixes", [("left_", "right_"), ("L/", "R/")])
def test_one_arms_file_twice_is_the_builtin_rig(tmp_path: Path, prefixes: tuple[str, str]) -> None:
    """The built-in rig's arm as a one-arm file (found as ``package://``), composed twice with prefixes and the
    built-in mounts: every contract frame (bases, TCPs, cameras) and every arm link sits where the built-in rig
    has it, at home and at random joint vectors; the same arms, composed two different ways."""
    arm_file = _one_arm(tmp_path / "pkgs" / "my_arm" / "urdf" / "arm.urdf")
    rig = load_rig_config(_write(tmp_path / "rig.yaml", _per_arm("package://my_arm/urdf/arm.urdf", prefixes,
                                                                  package_path=["pkgs"])))
    builtin = RigKinematics(load_rig_config("robofollow"))
    composed = RigKinematics(rig)
    left, right = prefixes
    assert f"{left}link6" in composed.model.links and f"{right}joint3" in composed.model.joints
    assert [j.name for j in rig.arm_joints["right"]] == [f"{right}joint{k}" for k in range(1, 7)]
    assert rig.gripper_joints["left"] == (f"{left}gripper", f"{left}gripper_mirror")
    # The mimic element names the prefixed joint (the kinematics ignore it: the grippers list drives both fingers).
    assert f'<mimic joint="{left}gripper" />' in rig.urdf_path.read_text(encoding="utf-8")
    assert [f.path for f in rig.files] == [tmp_path / "rig.yaml", arm_file]
    frames = [*BASE_FRAMES.values(), *TCP_FRAMES.values(), *CAMERA_FRAMES.values()]
    links = [(f"{p}{_local('left_' + n)}", f"{arm}_{n}") for p, arm in zip(prefixes, ("left", "right"), strict=True)
             for n in ("link1", "link3", "link6", "finger_a", "finger_b", "palm")]
    rng = np.random.default_rng(7)
    vectors = [builtin.home_vector()]
    for _ in range(5):
        vector = builtin.home_vector()
        for arm in ("left", "right"):
            lower, upper = builtin.arm_limits(arm)
            vector[ARM_SLICE[arm]] = rng.uniform(lower, upper)
        vector[[6, 13]] = rng.uniform(0.0, 1.0, 2)
        vectors.append(vector)
    for vector in vectors:
        for mine, theirs in [*((f, f) for f in frames), *links]:
            a, b = composed.link_pose(vector, mine), builtin.link_pose(vector, theirs)
            assert np.allclose(a.position, b.position, atol=1e-9), (mine, a.position, b.position)
            assert np.allclose(a.rotation, b.rotation, atol=1e-9), mine
    for arm in ("left", "right"):
        assert np.allclose(composed.arm_limits(arm), builtin.arm_limits(arm))
    assert rig.camera_fovy == load_rig_config("robofollow").camera_fovy


@pytest.mark.parametrize("change, expected", [
    ({"prefixes": ("arm/", "arm/")},
     "field 'arms.right.prefix' is 'arm/': link 'base_link' of {arm} would be named 'arm/base_link', which arm "
     "'left' already has"),
    ({"joints": {"left": ["joint1", "joint2", "joint3", "joint4", "joint5", "nope"],
                 "right": [f"joint{k}" for k in range(1, 7)]}},
     "field 'joints.left[5]' names 'nope', which is not a joint of arm 'left' ({arm}"),
    ({"joints": {"left": [f"left_joint{k}" for k in range(1, 7)], "right": [f"joint{k}" for k in range(1, 7)]}},
     "field 'joints.left[0]' names 'left_joint1', which is not a joint of arm 'left'"),
    ({"grippers": {"left": [{"joint": "finger", "closed": 0.0, "open": 0.04}],
                   "right": [{"joint": "gripper", "closed": 0.0, "open": 0.04}]}},
     "field 'grippers.left[0].joint' names 'finger', which is not a joint of arm 'left'"),
    ({"tcp": {"left": "no_link", "right": "tcp"}}, "field 'tcp.left' names 'no_link', which is not a link of arm"),
    ({"cameras": {"head": {"link": "world", "fovy": 0.7}, "left_wrist": {"arm": "middle", "link": "link6", "fovy": 1},
                  "right_wrist": {"arm": "right", "link": "link6", "fovy": 1.0}}},
     "field 'cameras.left_wrist.arm' must be one of ['left', 'right'], got 'middle'"),
    ({"cameras": {"head": {"link": "nowhere", "fovy": 0.7}, "left_wrist": {"arm": "left", "link": "link6", "fovy": 1},
                  "right_wrist": {"arm": "right", "link": "link6", "fovy": 1.0}}},
     "no link 'nowhere' to hang frame 'head_camera' on"),
    ({"mount": {"xyz": [0.0, 0.0, 0.74]}}, "field 'mount' is the whole-bench description's"),
    ({"urdf": "arm.urdf"}, "give exactly one of 'urdf' (a file), 'mjcf' ({file, bodies}) or 'arms'"),
    ({"arm_file": "package://nope/arm.urdf"}, "field 'arms.left.urdf': 'package://nope/arm.urdf': no ROS package"),
    ({"arm_prefix": None}, "field 'arms.left.prefix' must be a string"),
])
def test_a_bad_per_arm_rig_is_one_line_naming_the_file_field_and_value(tmp_path: Path, change: dict,
                                                                       expected: str) -> None:
    arm = _one_arm(tmp_path / "arm.urdf")
    change = dict(change)
    data = _per_arm(change.pop("arm_file", "arm.urdf"), change.pop("prefixes", ("left_", "right_")))
    if "arm_prefix" in change:
        data["arms"]["left"]["prefix"] = change.pop("arm_prefix")
    data.update(change)
    path = _write(tmp_path / "rig.yaml", data)
    with pytest.raises(RigConfigError) as error:
        load_rig_config(path)
    message = str(error.value)
    assert expected.replace("{arm}", str(arm)) in message and str(path) in message and "\n" not in message, message


def test_a_xacro_file_is_read_only_when_xacro_would_add_nothing(tmp_path: Path) -> None:
    """A macro that makes no link or joint (Gazebo transmissions) and its calls are left aside; anything xacro would
    expand (a property, an include, ``${…}``) is refused with what to do."""
    arm = _one_arm(tmp_path / "arm.urdf")
    text = arm.read_text(encoding="utf-8")
    head = '<robot name="one_arm" xmlns:xacro="http://ros.org/wiki/xacro">'
    macro = ('<xacro:macro name="tran" params="joint"><transmission name="t_${joint}"><joint name="${joint}"/>'
             '</transmission></xacro:macro><xacro:tran joint="joint1"/>')
    (tmp_path / "arm.xacro").write_text(text.replace('<robot name="one_arm">', head + macro, 1), encoding="utf-8")
    rig = load_rig_config(_write(tmp_path / "rig.yaml", _per_arm("arm.xacro")))
    assert "transmission" not in rig.urdf_path.read_text(encoding="utf-8")
    for extra, expected in [('<xacro:property name="l" value="0.1"/>', "uses xacro (<xacro:property>)"),
                            ('<link name="${name}"/>', "has name='${name}', a xacro substitution")]:
        (tmp_path / "arm.xacro").write_text(text.replace('<robot name="one_arm">', head + extra, 1), encoding="utf-8")
        with pytest.raises(RigConfigError, match=re.escape(expected)):
            load_rig_config(_write(tmp_path / "rig.yaml", _per_arm("arm.xacro")))


def test_inertials_come_from_a_second_file_of_the_same_arm(tmp_path: Path) -> None:
    """``arms.<arm>.inertials``: each link's ``<inertial>`` taken from another file of the arm (placeholder masses
    in the description, the CAD masses beside it); the file is recorded, and a link it has that the description
    lacks is refused."""
    import xml.etree.ElementTree as ET

    real = _one_arm(tmp_path / "real.urdf")
    light = ET.parse(real).getroot()
    for mass in light.iter("mass"):
        mass.set("value", "1e-05")
    (tmp_path / "light.urdf").write_text(ET.tostring(light, encoding="unicode"), encoding="utf-8")
    data = _per_arm("light.urdf")
    for arm in ("left", "right"):
        data["arms"][arm]["inertials"] = "real.urdf"
    rig = load_rig_config(_write(tmp_path / "rig.yaml", data))
    composed = ET.parse(rig.urdf_path).getroot()
    masses = {str(link.get("name")): float(str(m.get("value"))) for link in composed.findall("link")
              if (m := link.find("inertial/mass")) is not None}
    assert masses["right_link2"] == pytest.approx(0.8) and masses["left_finger_a"] == pytest.approx(0.05)
    assert real in {f.path for f in rig.files}
    extra = ET.parse(real).getroot()
    ET.SubElement(ET.SubElement(ET.SubElement(extra, "link", {"name": "camera_mount"}), "inertial"), "mass",
                  {"value": "0.1"})
    (tmp_path / "real.urdf").write_text(ET.tostring(extra, encoding="unicode"), encoding="utf-8")
    with pytest.raises(RigConfigError, match=r"field 'arms.left.inertials': link 'camera_mount' of .*real.urdf is not "
                                             r"a link of .*light.urdf"):
        load_rig_config(_write(tmp_path / "rig.yaml", data))


# -- the two-Piper rig (config/rigs/piper): AgileX's piper_description, where the lab's workspace has it ------------

PIPER_PACKAGE = find_package("piper_description")


def test_the_piper_rig_names_the_package_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without piper_description on any search path the rig is refused in one line saying what to install where.
    (A copy of the YAML: a rig loaded once is cached per path.)"""
    monkeypatch.setenv("ROS_PACKAGE_PATH", "")
    monkeypatch.setenv("AMENT_PREFIX_PATH", "")
    assert "piper" in known_rigs()
    copy = tmp_path / "rig.yaml"
    copy.write_bytes((ROOT / "config" / "rigs" / "piper" / "rig.yaml").read_bytes())
    with pytest.raises(RigConfigError) as error:
        load_rig_config(copy)
    message = str(error.value)
    assert (f"{copy}: field 'arms.left.urdf': 'package://piper_description/urdf/piper_description.xacro': no ROS "
            "package 'piper_description' found") in message and "\n" not in message


def _stl_vertices(path: Path) -> np.ndarray:
    """The vertices of a binary STL (what piper_description's meshes are)."""
    data = path.read_bytes()
    count = int.from_bytes(data[80:84], "little")
    facets = np.frombuffer(data[84:84 + 50 * count], dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)),
                                                                     ("a", "<u2")]))
    return facets["v"].reshape(-1, 3).astype(np.float64)


@pytest.mark.skipif(PIPER_PACKAGE is None, reason="piper_description is not on ROS_PACKAGE_PATH / AMENT_PREFIX_PATH")
def test_the_piper_rig_puts_its_tcp_behind_the_fingertips_and_opens_along_y() -> None:
    """With AgileX's files: the TCP is 0.04 m behind the finger meshes' far end along its +x, its +y is the way
    the fingers open, home points the tool down, and every file read (the xacro, the .urdf's inertials, 9 meshes)
    is recorded."""
    assert PIPER_PACKAGE is not None
    rig = load_rig_config("piper")
    kin = RigKinematics(rig)
    home = kin.home_vector()
    assert {f.path.name for f in rig.files} >= {"piper_description.xacro", "piper_description.urdf", "link7.STL"}
    for arm in ("left", "right"):
        tcp = kin.tcp_poses(home)[arm]
        assert np.allclose(tcp.rotation[:, 0], [0.0, 0.0, -1.0], atol=1e-3)  # tool down
        for opening in (0.0, 1.0):
            vector = home.copy()
            vector[[6, 13]] = opening
            tcp = kin.tcp_poses(vector)[arm]
            tips = []
            for finger in ("link7", "link8"):
                pose = kin.link_pose(vector, f"{arm}/{finger}")
                world = _stl_vertices(PIPER_PACKAGE / "meshes" / f"{finger}.STL") @ pose.rotation.T + pose.position
                local = (world - tcp.position) @ tcp.rotation  # in the TCP frame
                tips.append(local[:, 0].max())
                # Each finger's inner face is the rig's finger_half_gap from the TCP: link7 on -y, link8 on +y.
                inner = -local[:, 1].max() if finger == "link7" else local[:, 1].min()
                assert inner == pytest.approx(rig.finger_half_gap[int(opening)], abs=1e-4), (arm, finger, opening)
            assert np.allclose(tips, rig.fingertip_offset, atol=1e-4)
