"""``robofollow doctor`` and the checks behind it, with the real rclpy, SAPIEN, torch and OpenCV."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from robofollow_ros.diagnostics import check_ros_dds, check_sapien_physics

ROOT = Path(__file__).resolve().parents[1]


def test_dds_round_trip_with_real_rclpy():
    result = check_ros_dds(timeout_s=20)
    assert result.ok, result.detail
    assert result.extra["rmw"] == "rmw_fastrtps_cpp"


def test_sapien_physics_box_comes_to_rest():
    result = check_sapien_physics()
    assert result.ok, result.detail


def test_doctor_json_reports_every_part_with_versions():
    proc = subprocess.run(  # this checkout's CLI (the console script may point at another one)
        [sys.executable, "-m", "robofollow_ros.cli", "doctor", "--json", "--require-render"], capture_output=True,
        text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    report = json.loads(proc.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names == ["numpy", "matplotlib", "websockets", "OpenCV", "foxglove-sdk", "rclpy + DDS round trip",
                     "SAPIEN physics", "SAPIEN rendering", "torch"]
    for check in report["checks"]:
        assert check["ok"], check
        assert check["version"], check
    render = report["checks"][names.index("SAPIEN rendering")]
    assert render["extra"]["device"]
    assert proc.returncode == 0 and report["ok"] is True
