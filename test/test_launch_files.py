"""The launch files, loaded with a tiny stand-in for ``launch``/``launch_ros`` (not installed here): they
start exactly the profile's nodes with the profile's parameters and remappings, apply the launch
arguments as ``robofollow bringup`` applies its flags, end the launch when the trial manager exits,
name only executables that the package installs, and every parameter they pass is one the node
declares, with the right type. (``tools/check_real_launch.py`` runs them with the real launch code.)"""

from __future__ import annotations

import runpy
import shutil
import socket
import sys
import types
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.bringup import load_profile, with_overrides
from robofollow_ros.exit_status import EXIT_TRIALS_FAILED
from robofollow_ros.nodes.catalog import NODE_ENTRY_POINTS
from robofollow_ros.paths import share_path

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

        class Shutdown:
            def __init__(self, reason: str = "") -> None:
                self.reason = reason

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
        actions.Shutdown = Shutdown  # type: ignore[attr-defined]
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


#: Every test passes foxglove_port:=0 (any free port): the launch files check the port they will serve on.
FREE_PORT = {"foxglove_port": "0"}


def _expected(profile_name: str) -> list[tuple[str, dict[str, Any]]]:
    profile = with_overrides(load_profile(profile_name), extra={"foxglove_node": {"port": 0}})
    return [(n.executable, n.parameters) for n in profile.nodes]


@pytest.mark.parametrize(("launch_file", "arguments", "profile"), [
    ("robofollow.launch.py", {}, "rig"),  # use_sim defaults to false
    ("robofollow.launch.py", {"use_sim": "true"}, "sim"),
    ("robofollow.launch.py", {"use_sim": "false"}, "rig"),
    ("robofollow.launch.py", {"use_mock_hardware": "true"}, "mock"),
    ("sim.launch.py", {}, "sim"),
    ("rig.launch.py", {}, "rig"),
    ("mock.launch.py", {}, "mock"),
])
def test_launch_file_starts_the_profile(launcher, launch_file, arguments, profile):
    nodes = launcher.launch(LAUNCH_DIR / launch_file, {**arguments, **FREE_PORT})
    assert [(n["executable"], n["parameters"][0]) for n in nodes] == _expected(profile)
    assert all(n["package"] == "robofollow_ros" and n["name"] == n["executable"] for n in nodes)
    assert all(n["remappings"] == [] for n in nodes)  # the shipped profiles remap nothing
    # only the trial manager ends the launch: its exit shuts the graph down
    assert [n["executable"] for n in nodes if n["on_exit"] is not None] == ["trial_manager_node"]


def test_the_trial_managers_exit_shuts_down_and_a_failure_fails_the_launch(launcher):
    nodes = launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {"use_mock_hardware": "true", **FREE_PORT})
    on_exit = next(n["on_exit"] for n in nodes if n["executable"] == "trial_manager_node")
    done = on_exit(types.SimpleNamespace(returncode=0), None)
    assert [type(a).__name__ for a in done] == ["Shutdown"]
    assert [type(a).__name__ for a in on_exit(types.SimpleNamespace(returncode=-2), None)] == ["Shutdown"]  # Ctrl-C
    failed = on_exit(types.SimpleNamespace(returncode=EXIT_TRIALS_FAILED), None)
    assert [type(a).__name__ for a in failed] == ["OpaqueFunction", "Shutdown"]
    with pytest.raises(RuntimeError, match=f"status {EXIT_TRIALS_FAILED}: some trials could not be executed"):
        failed[0].function(None)


def test_a_killed_trial_manager_fails_the_launch_by_name_and_its_run_is_closed(launcher, tmp_path):
    from robofollow_ros.benchmark import default_registry
    from robofollow_ros.evaluation.results import RunWriter

    out = tmp_path / "run"
    nodes = launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {"use_mock_hardware": "true", "output": str(out),
                                                                  **FREE_PORT})
    on_exit = next(n["on_exit"] for n in nodes if n["executable"] == "trial_manager_node")
    task = default_registry().eval_task("L0_pickup_red_cylinder")
    RunWriter(out, arguments={}, selected_tasks=[(task.scene, task.task_id)], expected_trials=1).close()  # as killed
    killed = on_exit(types.SimpleNamespace(returncode=-9), None)
    assert [type(a).__name__ for a in killed] == ["OpaqueFunction", "Shutdown"]
    with pytest.raises(RuntimeError, match=r"trial_manager_node was killed by SIGKILL \(signal 9\); its run in .* "
                                           "was marked failed"):
        killed[0].function(None)
    run = (out / "run.json").read_text()
    assert '"status": "failed"' in run and "killed by SIGKILL" in run
    # the launch's own stop (SIGTERM) is not a failure of the run
    assert [type(a).__name__ for a in on_exit(types.SimpleNamespace(returncode=-15), None)] == ["Shutdown"]


def test_the_policy_timeout_argument_bounds_the_policy_node_and_the_trial_manager(launcher):
    nodes = launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {"use_mock_hardware": "true", "policy_timeout": "7.5",
                                                                  **FREE_PORT})
    by_name = {n["executable"]: n["parameters"][0] for n in nodes}
    assert by_name["policy_node"]["policy_timeout_s"] == by_name["trial_manager_node"]["policy_timeout_s"] == 7.5
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(ValueError) as info:
            launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {"policy_timeout": bad, **FREE_PORT})
        assert "policy_timeout:=" in str(info.value) and bad in str(info.value)


def test_the_privileged_argument_reaches_the_policy_node_and_the_record(launcher):
    """privileged:=true is robofollow bringup --privileged: policy_node hands it out, run.json records it;
    by default neither (nothing privileged leaves a process over a wire)."""
    for arguments, expected in (({}, False), ({"privileged": "true"}, True), ({"privileged": "false"}, False)):
        nodes = launcher.launch(LAUNCH_DIR / "sim.launch.py", {**arguments, **FREE_PORT})
        by_name = {n["executable"]: n["parameters"][0] for n in nodes}
        assert by_name["policy_node"]["privileged"] is by_name["trial_manager_node"]["privileged"] is expected


def test_launch_arguments_mean_what_the_bringup_flags_mean(launcher):
    nodes = launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {
        "use_sim": "true", "tasks": "L0_pickup_red_cylinder", "rounds": "2", "max_steps": "3",
        "policy": "tcp://h:5555", "policy_kwargs": '{"timeout_s": 30}', "foxglove_host": "0.0.0.0",
        "foxglove_port": "0", "driver_config": "piper_ros2", "remap": "/cameras/head/image_raw:=/cam/image",
        "remap_file": "realsense2_camera"})
    by_name = {n["executable"]: n["parameters"][0] for n in nodes}
    assert by_name["trial_manager_node"]["trials"] == "rounds=2 tasks=L0_pickup_red_cylinder"
    assert by_name["trial_manager_node"]["max_steps"] == 3
    assert by_name["policy_node"]["policy"] == "tcp://h:5555"
    assert by_name["policy_node"]["policy_kwargs"] == '{"timeout_s": 30}'
    assert by_name["trial_manager_node"]["policy_label"] == "tcp://h:5555"
    assert (by_name["foxglove_node"]["host"], by_name["foxglove_node"]["port"]) == ("0.0.0.0", 0)
    piper = str(LAUNCH_DIR.parent / "config" / "rig" / "piper_ros2.yaml")
    assert by_name["arm_bridge_node"]["driver_config"] == by_name["sim_node"]["driver_config"] == piper
    remaps = nodes[0]["remappings"]
    assert all(n["remappings"] == remaps for n in nodes)  # every node hears the same names
    assert ("/cameras/head/image_raw", "/cam/image") in remaps
    assert ("/cameras/left_wrist/image_raw", "/cameras/left_wrist/color/image_raw") in remaps  # the preset


def test_the_rig_takes_the_calibration_directory(launcher, tmp_path):
    calibration = tmp_path / "calibration"  # read before any node starts: it must be a real calibration
    shutil.copytree(share_path("calibration", "sim"), calibration)
    nodes = launcher.launch(LAUNCH_DIR / "rig.launch.py", {"calibration_dir": str(calibration), **FREE_PORT})
    assert next(n for n in nodes if n["executable"] == "perception_node")["parameters"][0]["calibration_dir"] == \
        str(calibration)


@pytest.mark.parametrize(("arguments", "words"), [
    ({"use_sim": "maybe"}, ["use_sim: 'maybe'"]),
    ({"use_sim": "true", "use_mock_hardware": "true"}, ["pick one"]),
    ({"limit": "two"}, ["limit:=two", "not an integer"]),
    ({"rounds": "0"}, ["rounds:=", ">= 1"]),
    ({"tasks": "no_such_task"}, ["no_such_task"]),
    ({"policy_kwargs": "[1]"}, ["policy_kwargs:=", "JSON object"]),
    ({"driver_config": "no_such_driver"}, ["driver_config:=", "no_such_driver"]),
    ({"remap": "/a:/b"}, ["remap:=", "FROM:=TO"]),
    ({"use_sim": "true", "calibration_dir": "/x"}, ["calibration_dir:=", "no perception_node"]),
    ({"calibration_dir": "/no/such/calibration"}, ["calibration_dir:=", "/no/such/calibration", "not a directory"]),
    ({"privileged": "maybe"}, ["privileged: 'maybe'", "not true or false"]),
    ({"privileged": "true", "policy": "openpi://h:8000"}, ["privileged:=", "openpi://h:8000", "cannot carry"]),
    ({"rig": "nope"}, ["rig:=: rig: 'nope' is neither"]),
])
def test_bad_launch_arguments_are_named(launcher, arguments, words):
    with pytest.raises(ValueError) as info:
        launcher.launch(LAUNCH_DIR / "robofollow.launch.py", {**FREE_PORT, **arguments})
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("launch_file", ["robofollow.launch.py", "sim.launch.py", "rig.launch.py", "mock.launch.py"])
def test_the_rig_argument_is_every_nodes_robofollow_rig(launcher, launch_file, tmp_path):
    """``rig:=`` (a name, or a folder holding rig.yaml) is loaded before any node starts and reaches every node as
    ``ROBOFOLLOW_RIG`` (the resolved rig YAML, which each node loads); the thin launch files pass it through.
    Without it the nodes get nothing added: the launch's own environment, else the built-in rig."""
    from robofollow_ros.robot.rig_config import DEFAULT_RIG_CONFIG
    from robofollow_ros.robot.rig_description import ENV_RIG

    nodes = launcher.launch(LAUNCH_DIR / launch_file, {"rig": "robofollow", **FREE_PORT})
    assert nodes and all(n["additional_env"] == {ENV_RIG: str(DEFAULT_RIG_CONFIG)} for n in nodes)
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "rig.yaml").write_text(_other_rig_yaml("lab"))
    count = len(nodes)
    launcher.nodes.clear()
    nodes = launcher.launch(LAUNCH_DIR / launch_file, {"rig": str(folder), **FREE_PORT})
    assert len(nodes) == count and all(n["additional_env"] == {ENV_RIG: str(folder / "rig.yaml")} for n in nodes)
    launcher.nodes.clear()
    nodes = launcher.launch(LAUNCH_DIR / launch_file, FREE_PORT)
    assert len(nodes) == count and all(n["additional_env"] is None for n in nodes)


def _other_rig_yaml(name: str) -> str:
    """The built-in rig's YAML under another name, its URDF named by absolute path (the file may live anywhere)."""
    text = share_path("config", "robot", "rig.yaml").read_text(encoding="utf-8")
    lines = [f"name: {name}" if line.startswith("name:") else
             f"urdf: {share_path('urdf', 'robofollow_rig.urdf')}" if line.startswith("urdf:") else line
             for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def test_a_foxglove_port_in_use_is_named_with_its_argument(launcher):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"port {port} on 127\.0\.0\.1 .* in use.*foxglove_port:="):
            launcher.launch(LAUNCH_DIR / "mock.launch.py", {"foxglove_port": str(port)})


def test_every_launched_executable_is_installed():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    for profile in ("sim", "rig", "mock"):
        for spec in load_profile(profile).nodes:
            assert spec.executable in NODE_ENTRY_POINTS
            assert scripts.get(spec.executable) == NODE_ENTRY_POINTS[spec.executable]


@pytest.mark.parametrize("profile", ["sim", "rig", "mock"])
def test_every_profile_parameter_is_declared_by_its_node_with_that_type(profile, tmp_path):
    from robofollow_ros.bringup import build_nodes
    from ros_harness import RosHarness

    chosen = with_overrides(load_profile(profile), output=str(tmp_path / "run"), extra={"foxglove_node": {"port": 0}})
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
