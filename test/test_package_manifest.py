"""A stock ROS 2 workspace can install the package: every third-party module the package imports has its
rosdep key in package.xml (and every key there is used), the ones rosdep cannot provide are in the
README's pip command, and the entry points are where ``ros2 run`` looks."""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Python module -> rosdep key (keys checked against ros/rosdistro's rosdep/python.yaml).
PYTHON_KEYS = {"numpy": "python3-numpy", "yaml": "python3-yaml", "cv2": "python3-opencv",
               "matplotlib": "python3-matplotlib", "msgpack": "python3-msgpack", "websockets": "python3-websockets",
               "zmq": "python3-zmq",
               "PIL": "python3-pil", "google": "python3-protobuf"}
#: Not in rosdep: installed with pip (README); torch is optional (doctor reports it).
PIP_ONLY = {"sapien": "sapien", "foxglove": "foxglove-sdk", "mcap": "mcap", "rosbags": "rosbags",
            "mcap_ros2": "mcap-ros2-support", "pyarrow": "pyarrow", "av": "av", "ray": "ray",
            "pybase64": "pybase64"}
OPTIONAL = {"torch"}


def _imports() -> set[str]:
    names: set[str] = set()
    for path in [*(ROOT / "robofollow_ros").rglob("*.py"), *(ROOT / "launch").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("robofollow_ros", "__future__")}


def _declared() -> set[str]:
    root = ET.parse(ROOT / "package.xml").getroot()
    return {e.text or "" for e in root if e.tag in ("exec_depend", "depend", "test_depend")}


def test_every_import_has_a_rosdep_key_or_is_in_the_readmes_pip_command():
    declared = _declared()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pip_lines = [line for line in readme.splitlines() if "pip install" in line]
    for module in sorted(_imports()):
        if module in PIP_ONLY:
            assert any(re.search(rf"\b{re.escape(PIP_ONLY[module])}\b", line) for line in pip_lines), module
        elif module in OPTIONAL:
            continue
        else:
            assert PYTHON_KEYS.get(module, module) in declared, f"{module}: no rosdep key in package.xml"


def test_every_declared_key_is_used():
    used = {PYTHON_KEYS.get(m, m) for m in _imports()}
    assert _declared() - used <= {"python3-pytest", "python3-pytest-timeout", "python3-hypothesis"}


def test_the_cli_and_the_nodes_install_where_ros2_run_looks():
    assert "install_scripts=$base/lib/robofollow_ros" in (ROOT / "setup.cfg").read_text()
    setup = (ROOT / "setup.py").read_text()
    assert '"robofollow = robofollow_ros.cli:main"' in setup
    assert 'python_requires=">=3.11"' in setup  # not exactly 3.11: Jazzy and Kilted run 3.12
    assert (ROOT / "resource" / "robofollow_ros").is_file()
