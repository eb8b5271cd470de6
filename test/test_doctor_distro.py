"""``robofollow doctor`` names the ROS 2 release it runs on (robofollow_ros/diagnostics/distro.py)."""

from __future__ import annotations

from importlib.metadata import version

from robofollow_ros.diagnostics.distro import ros_distro
from robofollow_ros.diagnostics.runtime import check_ros_dds


def test_the_release_comes_from_ros_distro_then_from_the_rclpy_wheel():
    assert ros_distro("7.1.6", {"ROS_DISTRO": "humble"}) == "humble (ROS_DISTRO)"
    assert ros_distro("7.1.6", {}) == "jazzy (ros-rclpy 7.1.6)"
    assert ros_distro("9.1.2", {"ROS_DISTRO": ""}) == "kilted (ros-rclpy 9.1.2)"
    assert ros_distro("3.3.16", {}) == "humble (ros-rclpy 3.3.16)"
    assert ros_distro("8.0.0", {}) == "unknown (ros-rclpy 8.0.0)"
    assert ros_distro("x", {}) == "unknown (ros-rclpy x)"
    assert ros_distro(None, {}).startswith("unknown (no ROS_DISTRO")


def test_the_dds_check_reports_the_venvs_release(monkeypatch):
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    result = check_ros_dds()
    want = {"7": "jazzy", "9": "kilted"}[version("ros-rclpy").split(".")[0]]
    assert result.ok, result.detail
    assert result.extra["distro"] == f"{want} (ros-rclpy {version('ros-rclpy')})"
    assert result.detail.startswith(f"ROS 2 {want} ")
