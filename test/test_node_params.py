"""Every node rejects bad parameters with a reason naming the parameter and the value, at start-up
and through a later ``set_parameters`` (``ros2 param set``)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rclpy.parameter import Parameter

from ros_harness import RosHarness

REPO = Path(__file__).resolve().parents[1]


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
    from robofollow_ros.nodes.mock_hardware_node import MockHardwareNode

    node = MockHardwareNode(context=ros.context)  # displace_object: the one a running node reads again
    try:
        result = node.set_parameters([Parameter("displace_object", value="[1]")])[0]
        assert not result.successful and "displace_object" in result.reason and "[1]" in result.reason
        assert node.get_parameter("displace_object").value == ""
        assert node.set_parameters([Parameter("displace_object", value='{"object": "a", "dx": 0.1}')])[0].successful
    finally:
        node.destroy_node()


def test_a_parameter_read_at_start_up_only_refuses_a_later_set(ros):
    """Accepting it would change nothing the node does: ``ros2 param set`` says read-only instead."""
    node = _node("monitor")(context=ros.context)
    try:
        assert node.describe_parameter("frame_sync").read_only
        result = node.set_parameters([Parameter("frame_sync", value="latest")])[0]
        assert not result.successful and "read-only" in result.reason
        assert node.get_parameter("frame_sync").value == "stamp"
    finally:
        node.destroy_node()


def test_parameters_are_described(ros):
    node = _node("monitor")(context=ros.context)
    try:
        for name in ("object_source", "frame_sync"):
            assert node.describe_parameter(name).description
    finally:
        node.destroy_node()


def test_ranges_enforced_in_code_are_in_the_descriptors(ros):
    """What ``ros2 param describe`` shows: the range the validator enforces, and its rule in words."""
    from robofollow_ros.nodes.foxglove_node import FoxgloveNode

    sim = _node("sim")(context=ros.context, parameter_overrides=[Parameter("render", value=False)])
    foxglove = FoxgloveNode(context=ros.context, parameter_overrides=[Parameter("serve", value=False),
                                                                      Parameter("record", value=False)])
    try:
        width = sim.describe_parameter("image_width")
        assert [(r.from_value, r.to_value) for r in width.integer_range] == [(1, 2**63 - 1)]
        assert not width.floating_point_range and width.additional_constraints == "must be > 0"
        camera_hz = sim.describe_parameter("camera_hz").floating_point_range
        assert len(camera_hz) == 1 and camera_hz[0].from_value == 0.0 and camera_hz[0].to_value > 1e300
        port = foxglove.describe_parameter("port").integer_range
        assert [(r.from_value, r.to_value) for r in port] == [(0, 65535)]
        quality = foxglove.describe_parameter("jpeg_quality").integer_range
        assert [(r.from_value, r.to_value) for r in quality] == [(1, 100)]
        assert not sim.describe_parameter("stepper").integer_range  # a string: no range, its rule elsewhere
        assert sim.describe_parameter("stepper").read_only
        # rclpy enforces the descriptor's range on a later set too (before the node's own rule)
        result = foxglove.set_parameters([Parameter("jpeg_quality", value=101)])[0]
        assert not result.successful
    finally:
        sim.destroy_node()
        foxglove.destroy_node()


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_positive_and_ranges_refuse_inf_and_nan(ros, value):
    from robofollow_ros.nodes._params import non_negative, positive

    assert positive(value) == "must be > 0" and non_negative(value) == "must be >= 0"
    assert positive(True) is not None  # a bool is no number here (ROS keeps the types apart)
    with pytest.raises(Exception) as info:
        _node("policy")(context=ros.context, parameter_overrides=[Parameter("control_hz", value=value)])
    assert "control_hz" in str(info.value) and "> 0" in str(info.value)


@pytest.mark.parametrize(("module", "param", "value", "words"), [
    ("sim_node", "camera_hz", "-2.0", ["camera_hz", "-2.0", ">= 0"]),
    ("stage_monitor_node", "frame_sync", "sometimes", ["frame_sync", "sometimes", "stamp"]),
    ("foxglove_node", "jpeg_quality", "fine", ["jpeg_quality", "fine"]),
])
def test_ros2_run_with_a_bad_parameter_prints_one_line(module, param, value, words, tmp_path):
    """``ros2 run robofollow_ros <node> --ros-args -p x:=bad``: the executable's ``main`` (run here as a
    module, as the console script calls it) prints one line naming the parameter and the value, no traceback,
    and exits with the bad-input status."""
    from robofollow_ros.exit_status import EXIT_BAD_INPUT

    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "ROS_LOG_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", f"robofollow_ros.nodes.{module}", "--ros-args", "-p",
                           f"{param}:={value}"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"{module}: ")
    for word in words:
        assert word in lines[0]
