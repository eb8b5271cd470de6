"""A rig: the lab's own description files plus one YAML that maps them onto the contract.

The YAML (``config/robot/rig.yaml`` for the built-in rig, ``config/rigs/<name>/rig.yaml`` for the others,
or any lab's file; ``docs/rigs.md`` describes every field) names the description — a URDF, or an MJCF
read by ``robot.mjcf`` — and where its files are (beside the YAML, in an installed Python distribution,
``package://`` through a search path), how it is mounted on the table, which of its joints are the
contract's ``joint1..6`` of each arm (sign and offset where the lab's zero differs), the finger joints
and their closed/open positions, the TCP and camera frames (a link plus an offset, or a calibration
file written by ``robofollow calibrate``), the home pose, planner limits and the simulator's drive gains.
``rig_description`` composes the URDF everything else loads; nothing in the lab's files is renamed.
"""

from __future__ import annotations

from pathlib import Path

from robofollow_ros.paths import share_path
from robofollow_ros.robot.rig_model import ArmJoint, DriveGains, FingerJoint, RigConfig, RigConfigError, RigFile

DEFAULT_RIG_CONFIG = share_path("config", "robot", "rig.yaml")

__all__ = ["DEFAULT_RIG_CONFIG", "ArmJoint", "DriveGains", "FingerJoint", "RigConfig", "RigConfigError", "RigFile",
           "load_rig_config"]


def load_rig_config(path: Path | str | None = None) -> RigConfig:
    """Read, check and compose a rig (a YAML path, a folder holding ``rig.yaml``, or a rig's name).

    ``None`` is the active rig: ``ROBOFOLLOW_RIG`` when set (``robofollow … --rig`` sets it for the process
    and its children), else the built-in one.
    """
    from robofollow_ros.robot.rig_description import load_rig

    return load_rig(path)
