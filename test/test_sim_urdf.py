"""The rig URDF: well-formed, current, loadable, and its home pose suits every scene."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import sapien

from robofollow_ros.contract import JOINT_NAMES
from robofollow_ros.robot.kinematics import RigKinematics
from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG, RigConfigError, load_rig_config
from robofollow_ros.robot.rig_urdf import rig_urdf_text
from robofollow_ros.sim.articulation import load_rig_articulation

URDF = Path(__file__).resolve().parents[1] / "urdf" / "robofollow_rig.urdf"
OPERATION_AREA = ((-0.20, 0.15), (-0.15, 0.15), (0.74, 1.0))


def test_committed_urdf_matches_its_generator() -> None:
    assert URDF.read_text(encoding="utf-8") == rig_urdf_text(), "regenerate: robofollow sim urdf --out urdf/..."


def test_urdf_is_a_valid_tree_with_sane_limits_and_inertia() -> None:
    root = ET.parse(URDF).getroot()
    links = {link.get("name") for link in root.findall("link")}
    children: list[str] = []
    for joint in root.findall("joint"):
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")  # type: ignore[union-attr]
        assert parent in links and child in links, joint.get("name")
        children.append(str(child))
        if joint.get("type") in ("revolute", "prismatic"):
            limit = joint.find("limit")
            assert limit is not None, joint.get("name")
            assert float(limit.get("lower")) < float(limit.get("upper")), joint.get("name")  # type: ignore[arg-type]
            assert float(limit.get("velocity")) > 0  # type: ignore[arg-type]
            axis = [float(v) for v in joint.find("axis").get("xyz").split()]  # type: ignore[union-attr]
            assert np.isclose(np.linalg.norm(axis), 1.0)
    assert len(children) == len(set(children)), "a link has two parents"
    roots = links - set(children)
    assert roots == {"world"}
    for link in root.findall("link"):
        inertial = link.find("inertial")
        assert inertial is not None, link.get("name")
        assert float(inertial.find("mass").get("value")) > 0  # type: ignore[union-attr, arg-type]
        inertia = inertial.find("inertia")
        assert inertia is not None
        assert all(float(inertia.get(k)) > 0 for k in ("ixx", "iyy", "izz"))  # type: ignore[arg-type]
    joint_names = {j.get("name") for j in root.findall("joint")}
    assert set(JOINT_NAMES) <= joint_names


def test_urdf_loads_in_sapien_with_every_contract_joint() -> None:
    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    robot = load_rig_articulation(scene, load_rig_config(), visuals=False)
    names = [j.name for j in robot.active_joints]
    assert set(JOINT_NAMES) <= set(names)
    assert robot.dof == 16  # 12 arm joints + 2 fingers per gripper


def test_home_tcps_and_fingertips_lie_outside_the_operation_area() -> None:
    kin = RigKinematics()
    home = kin.home_vector()
    for scene in ("scene1", "scene2", "scene3", "scene4"):
        for arm, point in kin.ee_points(home, scene).items():
            inside = all(lo <= v <= hi for v, (lo, hi) in zip(point, OPERATION_AREA, strict=True))
            assert not inside, (scene, arm, point)


def test_rig_config_errors_name_the_field(tmp_path: Path) -> None:
    text = DEFAULT_RIG_CONFIG.read_text(encoding="utf-8").replace("urdf: ../../urdf/robofollow_rig.urdf",
                                                                  f"urdf: {URDF}")
    bad = tmp_path / "rig.yaml"
    bad.write_text(text.replace("max_velocity: 1.5", "max_velocity: -1"), encoding="utf-8")
    with pytest.raises(RigConfigError, match=r"max_velocity.*-1"):
        load_rig_config(bad)
    bad.write_text(text.replace("left: [0.35, 0.0, 0.0, 0.0, 1.5707963, 0.0]", "left: [0.35]"), encoding="utf-8")
    with pytest.raises(RigConfigError, match=r"home\.left"):
        load_rig_config(bad)
    bad.write_text(text.replace(f"urdf: {URDF}", "urdf: missing.urdf"), encoding="utf-8")
    with pytest.raises(RigConfigError, match=r"urdf.*missing.urdf"):
        load_rig_config(bad)
    with pytest.raises(RigConfigError, match="no such file"):
        load_rig_config(tmp_path / "absent.yaml")
