"""The launch files, loaded with a tiny stand-in for ``launch``/``launch_ros`` (not installed here): they
start exactly the profile's nodes with the profile's parameters, name only executables that the
package installs, and every parameter they pass is one the node declares, with the right type."""

from __future__ import annotations

import runpy
import sys
import types
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.bringup import load_profile
from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS

LAUNCH_DIR = Path(__file__).resolve().parents[1] / "launch"


class _Context:
    def __init__(self, arguments: dict[str, str]) -> None:
        self.launch_configurations = dict(arguments)


class _Recorder:
    """Builds the stand-in modules and evaluates a launch description the way ``ros2 launch`` would."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        recorder = self

        class LaunchDescription:
            def __init__(self, entities: list[Any]) -> None:
                self.entities = list(entities)

        class DeclareLaunchArgument:
            def __init__(self, name: str, default_value: str = "", description: str = "") -> None:
                self.name, self.default_value, self.description = name, default_value, description

        class OpaqueFunction:
            def __init__(self, function: Any) -> None:
                self.function = function

        class IncludeLaunchDescription:
            def __init__(self, source: Any, launch_arguments: Any = ()) -> None:
                self.source, self.launch_arguments = source, dict(launch_arguments)

        class PythonLaunchDescriptionSource:
            def __init__(self, path: str) -> None:
                self.path = path

        class LaunchConfiguration:
            def __init__(self, name: str) -> None:
                self.name = name

            def perform(self, context: _Context) -> str:
                return context.launch_configurations[self.name]

        class Node:
            def __init__(self, **kwargs: Any) -> None:
                recorder.nodes.append(kwargs)

        self.classes = locals()
        self.modules = {
            "launch": types.ModuleType("launch"),
            "launch.actions": types.ModuleType("launch.actions"),
            "launch.substitutions": types.ModuleType("launch.substitutions"),
            "launch.launch_description_sources": types.ModuleType("launch.launch_description_sources"),
            "launch_ros": types.ModuleType("launch_ros"),
            "launch_ros.actions": types.ModuleType("launch_ros.actions"),
        }
        self.modules["launch"].LaunchDescription = LaunchDescription  # type: ignore[attr-defined]
        actions = self.modules["launch.actions"]
        actions.DeclareLaunchArgument = DeclareLaunchArgument  # type: ignore[attr-defined]
        actions.OpaqueFunction = OpaqueFunction  # type: ignore[attr-defined]
        actions.IncludeLaunchDescription = IncludeLaunchDescription  # type: ignore[attr-defined]
        self.modules["launch.substitutions"].LaunchConfiguration = LaunchConfiguration  # type: ignore[attr-defined]
        self.modules["launch.launch_description_sources"].PythonLaunchDescriptionSource = (  # type: ignore[attr-defined]
            PythonLaunchDescriptionSource)
        self.modules["launch_ros.actions"].Node = Node  # type: ignore[attr-defined]

    def launch(self, path: Path, arguments: dict[str, str]) -> list[dict[str, Any]]:
        description = runpy.run_path(str(path))["generate_launch_description"]()
        self._evaluate(description.entities, _Context({}), arguments)
        return self.nodes

    def _evaluate(self, entities: list[Any], context: _Context, given: dict[str, str]) -> None:
        for entity in entities:
            kind = type(entity).__name__
            if kind == "DeclareLaunchArgument":
                context.launch_configurations[entity.name] = given.get(entity.name, entity.default_value)
            elif kind == "OpaqueFunction":
                self._evaluate(entity.function(context) or [], context, given)
            elif kind == "IncludeLaunchDescription":
                inner = runpy.run_path(entity.source.path)["generate_launch_description"]()
                self._evaluate(inner.entities, _Context({}), {**given, **entity.launch_arguments})


@pytest.fixture
def launcher(monkeypatch):  # type: ignore[no-untyped-def]
    recorder = _Recorder()
    for name, module in recorder.modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return recorder


def _expected(profile_name: str) -> list[tuple[str, dict[str, Any]]]:
    return [(n.executable, n.parameters) for n in load_profile(profile_name).nodes]


@pytest.mark.parametrize(("launch_file", "arguments", "profile"), [
    ("robofollow.launch.py", {}, "rig"),  # use_sim defaults to false
    ("robofollow.launch.py", {"use_sim": "true"}, "sim"),
    ("robofollow.launch.py", {"use_sim": "false"}, "rig"),
    ("sim.launch.py", {}, "sim"),
    ("rig.launch.py", {}, "rig"),
])
def test_launch_file_starts_the_profile(launcher, launch_file, arguments, profile):
    nodes = launcher.launch(LAUNCH_DIR / launch_file, arguments)
    assert [(n["executable"], n["parameters"][0]) for n in nodes] == _expected(profile)
    assert all(n["package"] == "robofollow_ros" and n["name"] == n["executable"] for n in nodes)


def test_launch_arguments_override_the_profile(launcher):
    nodes = launcher.launch(LAUNCH_DIR / "robofollow.launch.py",
                            {"use_sim": "true", "trials": "tasks=L0_pickup_red_cylinder", "policy": "tcp://h:5555"})
    by_name = {n["executable"]: n["parameters"][0] for n in nodes}
    assert by_name["trial_manager_node"]["trials"] == "tasks=L0_pickup_red_cylinder"
    assert by_name["policy_node"]["policy"] == "tcp://h:5555"
    assert by_name["trial_manager_node"]["policy_label"] == "tcp://h:5555"


def test_bad_use_sim_is_named(launcher):
    with pytest.raises(ValueError, match="use_sim: 'maybe'"):
        launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {"use_sim": "maybe"})


def test_every_launched_executable_is_installed():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    for profile in ("sim", "rig"):
        for spec in load_profile(profile).nodes:
            assert spec.executable in NODE_ENTRY_POINTS
            assert scripts.get(spec.executable) == NODE_ENTRY_POINTS[spec.executable]


@pytest.mark.parametrize("profile", ["sim", "rig"])
def test_every_profile_parameter_is_declared_by_its_node_with_that_type(profile, tmp_path):
    from robofollow_ros.bringup import build_nodes, with_overrides
    from ros_harness import RosHarness

    chosen = with_overrides(load_profile(profile), output=str(tmp_path / "run"))
    with RosHarness() as ros:
        nodes = build_nodes(chosen, ros.context)  # a wrongly typed or rejected value raises here
        try:
            for spec, node in zip(chosen.nodes, nodes, strict=True):
                assert node.get_name() == spec.executable
                for name, value in spec.parameters.items():
                    assert node.has_parameter(name), f"{spec.executable} declares no {name!r}"
                    assert node.get_parameter(name).value == value
        finally:
            for node in nodes:
                node.destroy_node()
