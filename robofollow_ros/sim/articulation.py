"""Loading the rig URDF into a SAPIEN scene as one articulation.

The simulation reads the same URDF as the NumPy kinematics of ``robot/`` (the oracle's IK, the ROS
stage monitor, the robot state publisher), so the simulated arms and the rig's model cannot drift
apart; ``test_sim_kinematics`` checks SAPIEN's Pinocchio model against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import sapien

from robofollow_ros.robot.rig_config import RigConfig, RigConfigError

__all__ = ["Frame", "load_rig_articulation", "load_rig_for_simulation"]


def load_rig_articulation(scene: sapien.Scene, rig: RigConfig, visuals: bool) -> sapien.physx.PhysxArticulation:
    """Build the rig in ``scene``; ``visuals=False`` drops every visual shape so no render system is needed."""
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actor_builders, _cameras = loader.parse(str(rig.urdf_path))
    if len(builders) != 1 or actor_builders:
        raise RigConfigError(f"{rig.urdf_path}: expected one articulation, got {len(builders)} and "
                             f"{len(actor_builders)} loose links")
    if not visuals:
        for link_builder in builders[0].link_builders:
            link_builder.visual_records = []
    robot = builders[0].build()
    robot.set_name("robofollow_rig")
    return robot


@dataclass(frozen=True)
class Frame:
    """A massless URDF leaf link (TCP, camera mount) kept as a fixed offset from its parent link."""

    parent: str
    offset: sapien.Pose


def load_rig_for_simulation(scene: sapien.Scene, rig: RigConfig,
                            visuals: bool) -> tuple[sapien.physx.PhysxArticulation, dict[str, Frame]]:
    """Build the rig without its massless leaf frames, returned as offsets instead.

    Every articulation link costs solver time each physics step; TCP and camera links carry no
    collision shape, so they are folded into their parents (about a fifth fewer links).
    """
    loader = scene.create_urdf_loader()
    loader.fix_root_link = True
    builders, actor_builders, _cameras = loader.parse(str(rig.urdf_path))
    if len(builders) != 1 or actor_builders:
        raise RigConfigError(f"{rig.urdf_path}: expected one articulation, got {len(builders)} and "
                             f"{len(actor_builders)} loose links")
    link_builders = builders[0].link_builders
    parents = {id(b.parent) for b in link_builders if b.parent is not None}
    frames: dict[str, Frame] = {}
    kept = []
    for builder in link_builders:
        record = builder.joint_record
        is_frame = (builder.parent is not None and id(builder) not in parents and record.joint_type == "fixed"
                    and not builder.collision_records and not builder.visual_records)
        if is_frame:
            frames[builder.name] = Frame(builder.parent.name, record.pose_in_parent * record.pose_in_child.inv())
        else:
            kept.append(builder)
    for index, builder in enumerate(kept):
        builder.index = index
        if not visuals:
            builder.visual_records = []
    builders[0].link_builders = kept
    robot = builders[0].build()
    robot.set_name("robofollow_rig")
    return robot, frames

