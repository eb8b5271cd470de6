"""Which ROS 2 release doctor runs on: a sourced install's ``$ROS_DISTRO``, else the venv's rclpy wheel."""

from __future__ import annotations

from collections.abc import Mapping

#: rclpy's major.minor per release (rclpy's own tags: humble 3.3.x, jazzy 7.1.x, kilted 9.1.x).
RCLPY_RELEASES = {(3, 3): "humble", (7, 1): "jazzy", (9, 1): "kilted"}


def ros_distro(rclpy_version: str | None, env: Mapping[str, str]) -> str:
    """``"jazzy (ROS_DISTRO)"``, ``"kilted (ros-rclpy 9.1.2)"`` or ``"unknown (...)"``: the release and how it was
    told, as doctor prints it."""
    if env.get("ROS_DISTRO"):
        return f"{env['ROS_DISTRO']} (ROS_DISTRO)"
    if rclpy_version is None:
        return "unknown (no ROS_DISTRO and no ros-rclpy wheel)"
    try:
        major, minor = (int(part) for part in rclpy_version.split(".")[:2])
    except ValueError:
        return f"unknown (ros-rclpy {rclpy_version})"
    return f"{RCLPY_RELEASES.get((major, minor), 'unknown')} (ros-rclpy {rclpy_version})"
