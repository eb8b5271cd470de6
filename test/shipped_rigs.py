"""The shipped rigs as the safety tests see them: each rig's joint limits as the arm bridge reads them, and the
shipped driver maps grouped by the rig they belong to (``test_rig_safety``, ``test_rig_safety_properties``)."""

from __future__ import annotations

from pathlib import Path

from robofollow_ros.paths import share_path
from robofollow_ros.rig.driver_config import DriverConfig, driver_config_file, load_driver_config
from robofollow_ros.robot.rig_config import load_rig_config
from robofollow_ros.robot.urdf_limits import JointLimit, rig_joint_limits
from robofollow_ros.yamlio import read_yaml_mapping

#: The shipped rigs, the built-in one first.
RIGS = ("robofollow", "aloha")
#: Each rig's limits under the contract's names (``rig_joint_limits``: arm joints in contract units,
#: ``<arm>_gripper`` the first finger joint's travel), as the arm bridge reads them.
LIMITS: dict[str, dict[str, JointLimit]] = {rig: rig_joint_limits(load_rig_config(rig)) for rig in RIGS}


def rig_of_driver_map(path: Path) -> str:
    """The rig a shipped driver map belongs to: the rig whose YAML names it in ``driver_config`` (the ALOHA's
    ``aloha_interbotix``); the others (the default ``arm_drivers.yaml`` and the AgileX-style benches' presets)
    are the built-in rig's."""
    named = {driver_config_file(spec).resolve(): rig for rig in RIGS
             if (spec := load_rig_config(rig).driver_config) is not None}
    return named.get(path.resolve(), RIGS[0])


def rig_driver_maps() -> dict[str, list[tuple[Path, DriverConfig]]]:
    """Every shipped driver map, loaded (its gripper range checked) against the limits of the rig it belongs to."""
    maps: dict[str, list[tuple[Path, DriverConfig]]] = {rig: [] for rig in RIGS}
    for path in sorted(share_path("config", "rig").glob("*.yaml")):
        if "arms" in read_yaml_mapping(path, "driver_config"):  # not a camera remap preset
            rig = rig_of_driver_map(path)
            maps[rig].append((path, load_driver_config(path, LIMITS[rig])))
    return maps
