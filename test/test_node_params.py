"""Every node rejects bad parameters with a reason naming the parameter and the value, at start-up
and through a later ``set_parameters`` (``ros2 param set``)."""

from __future__ import annotations

import pytest
from rclpy.parameter import Parameter

from ros_harness import RosHarness


@pytest.fixture(scope="module")
def ros():  # type: ignore[no-untyped-def]
    with RosHarness() as harness:
        yield harness


def _node(name: str):  # type: ignore[no-untyped-def]
    from robofollow_ros.nodes.policy_node import PolicyNode
    from robofollow_ros.nodes.sim_node import SimNode
    from robofollow_ros.nodes.stage_monitor_node import StageMonitorNode
    from robofollow_ros.nodes.trial_manager_node import TrialManagerNode

    return {"sim": SimNode, "policy": PolicyNode, "monitor": StageMonitorNode, "manager": TrialManagerNode}[name]


@pytest.mark.parametrize(("node", "param", "value", "words"), [
    ("sim", "stepper", "fast", ["stepper", "fast", "topp"]),
    ("sim", "camera_hz", -1.0, ["camera_hz", "-1.0", ">= 0"]),
    ("sim", "image_width", 0, ["image_width", "> 0"]),
    ("policy", "mode", "turbo", ["mode", "turbo", "lockstep"]),
    ("policy", "policy_kwargs", "[1, 2]", ["policy_kwargs", "JSON object"]),
    ("policy", "control_hz", 0.0, ["control_hz", "> 0"]),
    ("monitor", "object_source", "lidar", ["object_source", "lidar", "tf"]),
    ("monitor", "frame_sync", "sometimes", ["frame_sync", "stamp"]),
    ("manager", "max_steps", 0, ["max_steps", "> 0"]),
    ("manager", "mode", "space", ["mode", "space", "rig"]),
    ("manager", "trial_timeout_s", -5.0, ["trial_timeout_s", ">= 0"]),
])
def test_bad_start_up_value_is_rejected_with_its_name(ros, tmp_path, node, param, value, words):
    overrides = [Parameter(param, value=value)]
    if node == "manager":
        overrides.append(Parameter("output", value=str(tmp_path / "run")))
    with pytest.raises(Exception) as info:
        _node(node)(context=ros.context, parameter_overrides=overrides)
    for word in words:
        assert word in str(info.value)


def test_bad_policy_spec_names_the_spec(ros):
    with pytest.raises(ValueError, match="no_such_policy"):
        _node("policy")(context=ros.context, parameter_overrides=[Parameter("policy", value="no_such_policy")])


def test_bad_trials_spec_names_the_word(ros, tmp_path):
    with pytest.raises(ValueError, match="'colour=red'"):
        _node("manager")(context=ros.context, parameter_overrides=[
            Parameter("trials", value="scene=scene1 colour=red"), Parameter("output", value=str(tmp_path / "r"))])
    with pytest.raises(ValueError, match="no_such_task"):
        _node("manager")(context=ros.context, parameter_overrides=[
            Parameter("trials", value="tasks=no_such_task"), Parameter("output", value=str(tmp_path / "r2"))])


def test_wrong_type_is_rejected(ros):
    with pytest.raises(Exception, match="camera_hz"):
        _node("sim")(context=ros.context, parameter_overrides=[Parameter("camera_hz", value="fast")])


def test_later_set_parameters_is_validated_too(ros):
    node = _node("monitor")(context=ros.context)
    try:
        result = node.set_parameters([Parameter("frame_sync", value="never")])[0]
        assert not result.successful and "frame_sync" in result.reason and "never" in result.reason
        assert node.get_parameter("frame_sync").value == "stamp"
        assert node.set_parameters([Parameter("frame_sync", value="latest")])[0].successful
    finally:
        node.destroy_node()


def test_parameters_are_described(ros):
    node = _node("monitor")(context=ros.context)
    try:
        for name in ("object_source", "frame_sync"):
            assert node.describe_parameter(name).description
    finally:
        node.destroy_node()
