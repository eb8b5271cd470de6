"""robofollow_ros.nodes.rclpy_compat: the rclpy names that differ between releases, and the rule that the nodes
reach them only through it (so a Humble workspace breaks in one module, not in many)."""

from __future__ import annotations

import ast
from importlib.metadata import version
from pathlib import Path

import rclpy
from rclpy.context import Context

from robofollow_ros.nodes import rclpy_compat
from robofollow_ros.nodes.arm_bridge_node import _received

ROOT = Path(__file__).resolve().parents[1]
#: Modules whose names moved or appeared after Humble: imported by rclpy_compat alone.
VERSIONED_MODULES = {"rclpy.event_handler", "rclpy.qos_event", "rclpy.subscription", "rclpy._rclpy_pybind11"}


def test_the_tested_releases_take_the_native_paths():
    major = int(version("ros-rclpy").split(".")[0])
    assert major >= 7, f"ros-rclpy {version('ros-rclpy')}: the venvs here are Jazzy (7.x) or Kilted (9.x)"
    assert rclpy_compat.HAS_MATCHED_EVENTS and rclpy_compat.HAS_MESSAGE_INFO
    callbacks = rclpy_compat.publisher_matched_callbacks(print)
    assert callbacks is not None and callbacks.matched is print

    def both(msg: object, info: rclpy_compat.MessageInfo) -> None:
        pass

    assert rclpy_compat.with_message_info(both) is both


def test_without_message_info_the_callback_gets_an_empty_one_and_no_reception_time():
    seen = []
    one_argument = rclpy_compat.with_message_info(lambda msg, info: seen.append((msg, info)), supported=False)
    one_argument("m")
    assert seen == [("m", {})]
    assert _received(seen[0][1]) is None  # the arm bridge then takes its own clock's time
    assert _received({"received_timestamp": 5}) == 5


def test_ros_init_shuts_the_context_down_at_the_end_of_the_block():
    context = Context()
    with rclpy_compat.ros_init(args=[], context=context):
        assert context.ok()
    assert not context.ok()
    other = Context()
    with rclpy_compat.ros_init(args=[], context=other):
        rclpy.shutdown(context=other)  # shut down inside the block: the end of the block does not raise
    assert not other.ok()


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in VERSIONED_MODULES:
            found.append(f"{path.name}:{node.lineno} imports {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name in VERSIONED_MODULES]
        elif isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "init"
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == "rclpy"):
                    found.append(f"{path.name}:{node.lineno} uses `with rclpy.init(...)` (rclpy 8+)")
    return found


def test_release_specific_rclpy_names_are_reached_only_through_the_compat_module():
    sources = [*(ROOT / "robofollow_ros").rglob("*.py"), *(ROOT / "launch").glob("*.py")]
    offences = [o for p in sources if p.name != "rclpy_compat.py" for o in _offences(p)]
    assert offences == []
    # and the scan sees what it looks for
    assert _offences(ROOT / "robofollow_ros" / "nodes" / "rclpy_compat.py")
