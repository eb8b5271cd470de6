"""Bringup profiles: the shipped ones load, malformed ones are reported with file and field, every
parameter is checked against what its node declares (name, type, range: one line naming the file,
the node and the parameter), remappings and presets are read, and the CLI's options land on the
right node parameters."""

from __future__ import annotations

import pytest
import yaml

from robofollow_ros.bringup import ProfileError, load_profile, ros_params_file, with_overrides, without_nodes


def test_shipped_profiles_list_the_graph_of_each_rig():
    sim = load_profile("sim")
    rig = load_profile("rig")
    mock = load_profile("mock")
    # one graph, only the hardware swapped: every profile drives the arms through the arm bridge
    assert [n.executable for n in sim.nodes] == ["sim_node", "arm_bridge_node", "robot_state_node", "policy_node",
                                                 "stage_monitor_node", "trial_manager_node", "foxglove_node"]
    assert [n.executable for n in rig.nodes] == ["arm_bridge_node", "robot_state_node", "perception_node",
                                                 "policy_node", "stage_monitor_node", "trial_manager_node",
                                                 "foxglove_node"]
    assert [n.executable for n in mock.nodes] == ["mock_hardware_node", "arm_bridge_node", "robot_state_node",
                                                  "policy_node", "stage_monitor_node", "trial_manager_node",
                                                  "foxglove_node"]
    # every node of the sim profile follows the simulator's /clock; the rig and the mock run on wall time
    assert all(n.parameters.get("use_sim_time") is True for n in sim.nodes)
    assert not any(n.parameters.get("use_sim_time") for n in (*rig.nodes, *mock.nodes))
    # the mock is the rig's graph: rate-mode policy, scoring from /robofollow/objects, the operator's picture
    assert mock.node("policy_node").parameters["mode"] == rig.node("policy_node").parameters["mode"] == "rate"
    assert mock.node("trial_manager_node").parameters["mode"] == "rig"
    assert mock.node("trial_manager_node").parameters["auto_confirm"] is True
    # both rigs can be watched live at once, on loopback only
    for profile in (sim, rig, mock):
        fox = profile.node("foxglove_node").parameters
        assert (fox["serve"], fox["host"], fox["port"], fox["record"]) == (True, "127.0.0.1", 8765, True)
    # the real/sim swap is exactly these choices
    assert sim.node("policy_node").parameters["mode"] == "lockstep"
    assert rig.node("policy_node").parameters["mode"] == "rate"
    assert sim.node("stage_monitor_node").parameters["object_source"] == "tf"
    assert rig.node("stage_monitor_node").parameters["object_source"] == "objects"
    assert rig.node("trial_manager_node").parameters["mode"] == "rig"
    # run.json records the stepper the sim really uses
    assert sim.node("trial_manager_node").parameters["stepper"] == sim.node("sim_node").parameters["stepper"]


def test_privileged_is_off_in_every_shipped_profile_and_recorded_with_the_policy_nodes_value():
    from robofollow_ros.bringup import Choices, apply_choices

    for name in ("sim", "rig", "mock"):
        assert load_profile(name).node("policy_node").parameters["privileged"] is False
    chosen = apply_choices(load_profile("sim"), Choices(privileged=True), lambda name: f"--{name}")
    assert chosen.node("policy_node").parameters["privileged"] is True
    assert chosen.node("trial_manager_node").parameters["privileged"] is True  # run.json says so
    # the trial manager records what policy_node does; it is never chosen apart from it
    copied = with_overrides(load_profile("mock"), extra={"policy_node": {"privileged": True},
                                                        "trial_manager_node": {"privileged": False}})
    assert copied.node("trial_manager_node").parameters["privileged"] is True
    with pytest.raises(ProfileError, match=r"^--privileged: openpi://h:8000 cannot carry privileged state"):
        apply_choices(load_profile("sim"), Choices(policy="openpi://h:8000", privileged=True), lambda n: f"--{n}")


def test_overrides_reach_the_right_nodes():
    profile = with_overrides(load_profile("sim"), trials="tasks=L0_pickup_red_cylinder", policy="hold",
                             output="/tmp/x", extra={"sim_node": {"render": False}})
    assert profile.node("trial_manager_node").parameters["trials"] == "tasks=L0_pickup_red_cylinder"
    assert profile.node("trial_manager_node").parameters["output"] == "/tmp/x"
    assert profile.node("policy_node").parameters["policy"] == "hold"
    assert profile.node("sim_node").parameters["render"] is False
    assert load_profile("sim").node("sim_node").parameters["render"] is True  # the file is untouched
    params = ros_params_file(profile)
    assert params["policy_node"]["ros__parameters"]["policy"] == "hold"
    with pytest.raises(ProfileError, match="has no sim_node"):
        with_overrides(load_profile("rig"), extra={"sim_node": {"render": False}})


@pytest.mark.parametrize(("text", "words"), [
    ("nodes: []", ["non-empty 'nodes'"]),
    ("nodes: [{executable: warp_drive_node}]", ["nodes[0].executable", "warp_drive_node"]),
    ("nodes: [{executable: sim_node}, {executable: sim_node}]", ["nodes[1]", "listed twice"]),
    ("nodes: [{executable: sim_node, parameters: {render: {a: 1}}}]", ["nodes[0].parameters.render"]),
    ("nodes: [{executable: sim_node, parameters: [1]}]", ["nodes[0].parameters", "mapping"]),
    ("nodes: [{name: x}]", ["nodes[0]", "executable"]),
    ("nodes: [\n  - : :", ["not valid YAML"]),
    ("nodes: [{executable: sim_node}]\nspeed: 3", ["unknown key 'speed'"]),
    ("nodes: [{executable: sim_node}]\nremappings: {/a: b}", ["remappings", "'b' is not an absolute topic name"]),
    ("nodes: [{executable: sim_node}]\nremap_files: [no_such_preset]", ["no_such_preset.yaml does not exist"]),
    ("nodes: [{executable: sim_node}]\nuse_sim_time: yes please", ["use_sim_time", "not true or false"]),
])
def test_malformed_profile_is_reported_with_the_field(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(path) in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_missing_profile_file_is_named(tmp_path):
    with pytest.raises(ProfileError, match=r"nope\.yaml does not exist"):
        load_profile(tmp_path / "nope.yaml")


def test_optional_nodes_can_be_left_out():
    sim = without_nodes(load_profile("sim"), {"foxglove_node"})
    assert "foxglove_node" not in [n.executable for n in sim.nodes]
    assert "foxglove_node" in load_profile("sim").node("trial_manager_node").parameters["wait_for_nodes"]
    assert "foxglove_node" not in sim.node("trial_manager_node").parameters["wait_for_nodes"]
    with pytest.raises(ProfileError, match="has no perception_node"):
        without_nodes(load_profile("sim"), {"perception_node"})


@pytest.mark.parametrize(("parameters", "words"), [
    ({"warp_factor": 9}, ["node sim_node", "parameter 'warp_factor' is unknown", "render"]),
    ({"camera_hz": 10}, ["node sim_node", "parameter 'camera_hz'", "is an int, expected a float", "10.0"]),
    ({"render": "yes"}, ["parameter 'render'", "is a string, expected a bool"]),
    ({"camera_hz": -1.0}, ["parameter 'camera_hz'", "-1.0 must be >= 0"]),
    ({"stepper": "rk4"}, ["parameter 'stepper'", "'rk4' must be one of topp, direct"]),
    ({"image_width": 0}, ["parameter 'image_width'", "0 must be > 0"]),
])
def test_profile_parameters_are_checked_against_the_nodes_declarations(tmp_path, parameters, words):
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"executable": "sim_node", "parameters": parameters}]}))
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert message.startswith(f"profile {path}: ") and "\n" not in message
    for word in words:
        assert word in message


def test_remappings_and_presets_are_read_in_order(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text("nodes: [{executable: policy_node}]\nremappings: {/joint_states: /arms/joint_states}\n"
                    "remap_files: [realsense2_camera.yaml]\n")
    profile = load_profile(path)
    assert profile.remappings[0] == ("/joint_states", "/arms/joint_states")
    assert ("/cameras/head/depth", "/cameras/head/aligned_depth_to_color/image_raw") in profile.remappings
    args = profile.remap_arguments()
    assert args[:3] == ["--ros-args", "-r", "/joint_states:=/arms/joint_states"]


def test_the_nodes_declarations_are_read_as_the_running_nodes_declare_them(tmp_path):
    """The schema the profiles are checked against is the one each node really declares (names and types)."""
    from rclpy.parameter import Parameter

    from robofollow_ros.bringup import build_nodes
    from robofollow_ros.nodes.parameter_schema import node_parameters
    from ros_harness import RosHarness

    profile = with_overrides(load_profile("rig"), output=str(tmp_path / "run"), extra={"foxglove_node": {"port": 0}})
    with RosHarness() as ros:
        nodes = build_nodes(profile, ros.context)
        try:
            for node in nodes:
                schema = node_parameters(node.get_name())
                declared = set(node.list_parameters([], 10).names)
                assert declared == set(schema), node.get_name()
                for name, spec in schema.items():
                    kind = node.get_parameter(name).type_
                    expected = {"bool": Parameter.Type.BOOL, "int": Parameter.Type.INTEGER,
                                "float": Parameter.Type.DOUBLE, "string": Parameter.Type.STRING,
                                "float list": Parameter.Type.DOUBLE_ARRAY,
                                "string list": Parameter.Type.STRING_ARRAY}[spec.type_name]
                    assert kind == expected, (node.get_name(), name)
        finally:
            for node in nodes:
                node.destroy_node()


def test_execution_realtime_runs_the_sim_on_a_wall_clock_timer_and_is_recorded_for_run_json():
    import json

    from robofollow_ros.bringup import Choices, apply_choices

    """bringup sim --execution realtime (execution:=realtime): policy_node in rate mode with the real-time
    executor, sim_node stepping on its timer at the same rate; the trial manager records both."""
    flag = lambda name: f"--{name}"  # noqa: E731
    default = apply_choices(load_profile("sim"), Choices(), flag)
    assert json.loads(default.node("trial_manager_node").parameters["execution"]) == {
        "mode": "lockstep", "sim_step_mode": "command"}
    chosen = apply_choices(load_profile("sim"), Choices(execution="realtime", merge="ensemble", control_hz=50.0), flag)
    policy, sim = chosen.node("policy_node").parameters, chosen.node("sim_node").parameters
    assert (policy["mode"], policy["execution"], policy["merge"], policy["control_hz"]) == (
        "rate", "realtime", "ensemble", 50.0)
    assert policy["request_images"] is False and (sim["step_mode"], sim["step_hz"]) == ("timer", 50.0)
    assert json.loads(chosen.node("trial_manager_node").parameters["execution"]) == {
        "mode": "rate", "execution": "realtime", "control_hz": 50.0, "merge": "ensemble", "sim_step_mode": "timer",
        "sim_step_hz": 50.0}
    with pytest.raises(ProfileError, match=r"^--merge: needs --execution realtime"):
        apply_choices(load_profile("sim"), Choices(merge="weighted"), flag)
    with pytest.raises(ProfileError, match=r"^--execution: 'fast' is not one of lockstep, rate, realtime"):
        apply_choices(load_profile("sim"), Choices(execution="fast"), flag)
