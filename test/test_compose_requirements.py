"""tools/compose_requirements.py: the matrix venvs' requirements are requirements.txt with overlays swapped in
by name, and the overlays only name what requirements.txt pins (a renamed pin cannot slip past unnoticed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from compose_requirements import _name, compose  # noqa: E402


def test_overlay_lines_replace_the_base_lines_of_the_same_name_in_place():
    base = ["# ROS", "ros-rclpy==7.1.6", "numpy==1.24.2", "Torch==2.13.0", "ray[client]==2.60.0", "pytest==9.2.0"]
    overlay = ['numpy==1.24.2; python_version < "3.12"  # why', 'numpy==1.26.4; python_version >= "3.12"',
               "ros_rclpy==9.1.2", "extra-only==1.0"]
    assert compose(base, [overlay], {"torch", "ray"}) == [
        "ros_rclpy==9.1.2", 'numpy==1.24.2; python_version < "3.12"', 'numpy==1.26.4; python_version >= "3.12"',
        "pytest==9.2.0", "extra-only==1.0"]


def test_every_overlay_name_is_one_requirements_txt_pins():
    pinned = {_name(line) for line in (ROOT / "requirements.txt").read_text().splitlines()} - {None}
    for overlay in ("requirements-kilted.txt", "requirements-matrix.txt"):
        names = {_name(line) for line in (ROOT / overlay).read_text().splitlines()} - {None}
        assert names and names <= pinned, f"{overlay}: {sorted(names - pinned)} not in requirements.txt"


def test_a_missing_file_is_one_line():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "compose_requirements.py"), "requirements.txt",
                           "nope.txt"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert done.returncode == 2 and done.stderr == "error: requirements file nope.txt: no such file\n"
