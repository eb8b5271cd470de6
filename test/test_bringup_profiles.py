"""Bringup profiles: the two shipped ones load, malformed ones are reported with file and field, and the
CLI's options land on the right node parameters."""

from __future__ import annotations

import pytest

from robofollow_ros.bringup import ProfileError, load_profile, ros_params_file, with_overrides, without_nodes


def test_shipped_profiles_list_the_graph_of_each_rig():
    sim = load_profile("sim")
    rig = load_profile("rig")
    assert [n.executable for n in sim.nodes] == ["sim_node", "policy_node", "stage_monitor_node",
                                                 "trial_manager_node", "foxglove_node"]
    assert [n.executable for n in rig.nodes] == ["arm_bridge_node", "perception_node", "policy_node",
                                                 "stage_monitor_node", "trial_manager_node", "foxglove_node"]
    # both rigs can be watched live at once, on loopback only
    for profile in (sim, rig):
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
