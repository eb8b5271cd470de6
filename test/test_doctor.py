"""``robofollow doctor`` and the checks behind it, with the real rclpy, SAPIEN, torch and OpenCV."""

from __future__ import annotations

import json
import subprocess

from robofollow_ros.diagnostics import check_ros_dds, check_sapien_physics
from test_cli_tasks import ROBOFOLLOW


def test_dds_round_trip_with_real_rclpy():
    result = check_ros_dds(timeout_s=20)
    assert result.ok, result.detail
    assert result.extra["rmw"] == "rmw_fastrtps_cpp"


def test_sapien_physics_box_comes_to_rest():
    result = check_sapien_physics()
    assert result.ok, result.detail


def test_doctor_json_reports_every_part_with_versions():
    proc = subprocess.run(
        [ROBOFOLLOW, "doctor", "--json", "--require-render"], capture_output=True, text=True, timeout=120
    )
    report = json.loads(proc.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names == ["rclpy + DDS round trip", "SAPIEN physics", "SAPIEN rendering", "torch", "OpenCV", "foxglove-sdk"]
    for check in report["checks"]:
        assert check["ok"], check
        assert check["version"], check
    render = report["checks"][2]
    assert render["extra"]["device"]
    assert proc.returncode == 0 and report["ok"] is True
