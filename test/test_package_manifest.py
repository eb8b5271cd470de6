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
#: interbotix_xs_msgs: only a driver map of type interbotix imports it (Trossen's ALOHA), and a workspace that runs
#: an xs_sdk has it; make setup builds it into the venv (tools/build_ros_msgs.sh).
OPTIONAL = {"torch", "interbotix_xs_msgs"}


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The nodes under ``if TYPE_CHECKING:`` (for mypy only, e.g. typing_extensions' Self on Python 3.10)."""
    return {inner for node in ast.walk(tree) if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING" for stmt in node.body for inner in ast.walk(stmt)}


def _imports() -> set[str]:
    names: set[str] = set()
    for path in [*(ROOT / "robofollow_ros").rglob("*.py"), *(ROOT / "launch").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if node in skipped:
                continue
            elif isinstance(node, ast.Import):
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
    assert 'python_requires=">=3.10"' in setup  # Humble runs 3.10, Jazzy and Kilted 3.12 (make test-matrix)
    assert (ROOT / "resource" / "robofollow_ros").is_file()


#: package.xml's dependency attributes (REP 149, package_format3.xsd's DependencyType) and their value pattern.
VERSION_ATTRIBUTES = {"version_lt", "version_lte", "version_eq", "version_gte", "version_gt"}
VERSION_LIMIT = re.compile(r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){0,2}")
#: package.xml key -> the module name diagnostics.MINIMUM_VERSIONS uses.
VERSIONED_KEYS = {"python3-numpy": "numpy", "python3-matplotlib": "matplotlib", "python3-websockets": "websockets",
                  "python3-opencv": "opencv"}


def _pins(path: Path) -> dict[str, str]:
    """name -> specifier of each requirement line ('==4.11.0.86', '>=1.24,<2'), extras dropped; of a name pinned
    per Python version (environment markers), the first line: the 3.11+ pin."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        if match := re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*([<>=!].*)", line):
            pins.setdefault(match.group(1).lower(), match.group(3).replace(" ", ""))
    return pins


def _marked(path: Path) -> set[str]:
    """The requirement lines with an environment marker, as written (comments dropped)."""
    return {line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines()
            if ";" in line.split("#")[0]}


def test_constraints_pins_for_python_3_10_are_the_ones_the_matrix_proves():
    """Humble runs Python 3.10, where some pins have no wheel: constraints.txt's per-version lines are those of
    requirements-matrix.txt, which .venv-py310 installs (make test-matrix)."""
    marked = _marked(ROOT / "constraints.txt")
    assert marked and marked <= _marked(ROOT / "requirements-matrix.txt")


def test_rosdep_keys_carry_the_minimum_versions_doctor_checks():
    from robofollow_ros.diagnostics import MINIMUM_VERSIONS, NUMPY_BELOW

    root = ET.parse(ROOT / "package.xml").getroot()
    versioned = {}
    for element in root:
        if not element.tag.endswith("depend"):
            continue
        for name, value in element.attrib.items():
            assert name in VERSION_ATTRIBUTES | {"condition"}, f"{element.text}: {name} is not a REP 149 attribute"
            if name in VERSION_ATTRIBUTES:
                assert VERSION_LIMIT.fullmatch(value), f"{element.text}: {name}={value!r} is not X, X.Y or X.Y.Z"
                versioned.setdefault(element.text, {})[name] = value
    assert versioned == {key: {"version_gte": MINIMUM_VERSIONS[module][0]} | (
        {"version_lt": NUMPY_BELOW} if module == "numpy" else {}) for key, module in VERSIONED_KEYS.items()}


def test_constraints_agree_with_requirements_and_the_minimums():
    """One set of proven versions: every pin both files name is equal, and each satisfies doctor's minimum."""
    from robofollow_ros.diagnostics import MINIMUM_VERSIONS, NUMPY_BELOW, version_tuple

    constraints, requirements = _pins(ROOT / "constraints.txt"), _pins(ROOT / "requirements.txt")
    for name, spec in constraints.items():
        if spec.startswith("==") and name in requirements:
            assert requirements[name] == spec, f"{name}: constraints.txt {spec}, requirements.txt {requirements[name]}"
    assert constraints["numpy"] == f">={MINIMUM_VERSIONS['numpy'][0]},<{NUMPY_BELOW}"
    assert version_tuple(requirements["numpy"].removeprefix("==")) < version_tuple(NUMPY_BELOW)
    for dist, module in (("matplotlib", "matplotlib"), ("websockets", "websockets"),
                         ("opencv-python-headless", "opencv"), ("opencv-python", "opencv")):
        pinned = constraints[dist].removeprefix("==")
        assert version_tuple(pinned) >= version_tuple(MINIMUM_VERSIONS[module][0]), f"{dist} {pinned}"


def test_the_readmes_workspace_pip_lines_install_through_the_constraints():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Installing into a ROS 2 workspace", 1)[1].split("\n## ", 1)[0]
    pip_lines = [line for line in section.splitlines() if line.startswith("python3 -m pip install")]
    constraints = _pins(ROOT / "constraints.txt")
    assert pip_lines
    for line in pip_lines:
        assert "-c src/robofollow_ros/constraints.txt" in line, line
        command = line.split("#")[0].split("constraints.txt", 1)[1]
        for word in re.findall(r"[A-Za-z][A-Za-z0-9_.-]+", command.replace('"', " ")):
            if word != "client":  # ray[client]: the extra
                assert word.lower() in constraints, f"{word}: installed by the README but not in constraints.txt"
    for dist in ("websockets", "opencv-python-headless", "sapien", "foxglove-sdk"):
        assert any(re.search(rf"\s{re.escape(dist)}\b", line) for line in pip_lines), dist
