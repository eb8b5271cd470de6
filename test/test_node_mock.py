"""The mock profile over DDS: mock_hardware_node plays the arm drivers (first-order lag, the drivers' names
and units), the cameras (a still picture of the trial's layout, with camera_info and optical frame ids)
and perception (the layout's objects where the layout puts them); the rig's graph runs trials on it,
also with its topics remapped."""

from __future__ import annotations

import json

import numpy as np
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import MarkerArray

from profile_graph import start_profile_graph
from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OPTICAL_FRAMES, camera_image_topic, camera_info_topic
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes.conversions import image_array, objects_from_markers
from robofollow_ros.nodes.mock_hardware_node import MockHardwareNode
from robofollow_ros.rig.layout_poses import layout_rest_poses
from ros_harness import RosHarness

TASK = "L0_pickup_red_cylinder"
LEFT = [f"fl_joint{i}" for i in range(1, 8)]  # config/rig/arm_drivers.yaml


def test_mock_hardware_answers_commands_lays_the_table_out_and_shows_it(registry):
    with RosHarness() as ros:
        ros.add(MockHardwareNode(context=ros.context))
        probe = ros.node("probe")
        got: dict[str, list] = {"left": [], "objects": []}
        for camera in CAMERA_NAMES:
            got[camera], got[f"{camera}_info"] = [], []
            probe.create_subscription(Image, camera_image_topic(camera), ros.collector(got[camera]), 5)
            probe.create_subscription(CameraInfo, camera_info_topic(camera), ros.collector(got[f"{camera}_info"]), 5)
        probe.create_subscription(JointState, "/left_arm/joint_states", ros.collector(got["left"]), tp.STATE_STREAM)
        probe.create_subscription(MarkerArray, "/robofollow/objects", ros.collector(got["objects"]), 10)
        trial = probe.create_publisher(String, "/robofollow/trial", tp.LATCHED)
        command = probe.create_publisher(JointTrajectory, "/left_arm_controller/joint_trajectory", tp.STATE_STREAM)

        task = registry.eval_task(TASK)
        trial.publish(String(data=tp.encode({"id": "m1", "phase": "resetting", "task": TASK, "seed": task.seed(1)})))
        ros.wait_for(lambda: got["objects"] and all(got[c] and got[f"{c}_info"] for c in CAMERA_NAMES),
                     timeout=30, what="objects and pictures of the laid-out table")
        _, positions, _ = objects_from_markers(got["objects"][-1])
        expected = layout_rest_poses(registry.layout_of(task), task.seed(1))
        assert set(positions) == set(expected)
        for name, pose in expected.items():
            np.testing.assert_allclose(positions[name], pose.position, atol=1e-9)
        for camera in CAMERA_NAMES:
            image = got[camera][-1]
            assert image.header.frame_id == got[f"{camera}_info"][-1].header.frame_id == CAMERA_OPTICAL_FRAMES[camera]
            assert image_array(image).std() > 5.0  # a picture of a table with things on it

        ros.wait_for(lambda: got["left"], what="driver states")
        start = np.asarray(got["left"][-1].position)
        assert list(got["left"][-1].name) == LEFT and start[6] == 0.04  # home: gripper open (m, the URDF limit)
        target = start.copy()
        target[0] += 0.2
        target[6] = 0.0
        count = len(got["left"])
        command.publish(JointTrajectory(joint_names=LEFT, points=[JointTrajectoryPoint(positions=target.tolist())]))
        ros.wait_for(lambda: len(got["left"]) > count + 50 and abs(got["left"][-1].position[0] - target[0]) < 1e-3,
                     timeout=30, what="the arm settling at the command")
        path = np.array([m.position[0] for m in got["left"][count:]])
        assert path[0] < target[0] - 0.01  # it takes time to get there (first-order lag) ...
        assert np.all(np.diff(path) >= -1e-12)  # ... approaching without overshoot
        assert abs(got["left"][-1].position[6]) < 1e-3  # and the gripper closed


def test_the_rig_graph_runs_trials_on_mock_hardware_with_its_topics_remapped(tmp_path):
    """A rig whose drivers and cameras use other names: every node is remapped, the trial still runs."""
    remaps = (("/joint_states", "/arms/joint_states"), ("/cameras/head/image_raw", "/head_cam/color/image_raw"),
              ("/left_arm_controller/joint_trajectory", "/la/trajectory"), ("/left_arm/joint_states", "/la/states"))
    with RosHarness() as ros:
        watcher = ros.node("watcher")
        got: dict[str, list] = {"remapped": [], "contract": [], "camera": [], "driver": [], "trial": []}
        watcher.create_subscription(JointState, "/arms/joint_states", ros.collector(got["remapped"]), tp.STATE_STREAM)
        watcher.create_subscription(JointState, "/joint_states", ros.collector(got["contract"]), tp.STATE_STREAM)
        watcher.create_subscription(Image, "/head_cam/color/image_raw", ros.collector(got["camera"]), 5)
        watcher.create_subscription(JointTrajectory, "/la/trajectory", ros.collector(got["driver"]), tp.STATE_STREAM)
        watcher.create_subscription(String, "/robofollow/trial", ros.collector(got["trial"]), tp.LATCHED)
        # Every node runs in this one test process, on one interpreter lock with the watcher: joint
        # states can come late here as they do not in bringup's process per node, and holding on them
        # is not what this test is about.
        manager = start_profile_graph(ros, "mock", {
            "trial_manager_node": {"trials": f"tasks={TASK} rounds=1", "max_steps": 2, "actions_per_step": 10,
                                   "output": str(tmp_path / "run")},
            "policy_node": {"stale_s": 2.0}}, remappings=remaps)["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=120, what="the trial on mock hardware")
        # the manager's last word, as the watcher hears it (delivered after the manager set its flag)
        ros.wait_for(lambda: got["trial"] and json.loads(got["trial"][-1].data)["phase"] == tp.PHASE_FINISHED,
                     timeout=30, what="the finished phase on the remapped graph")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(results) == 1 and results[0]["task"] == TASK and "policy_error" not in results[0]
    assert results[0]["policy_steps"] == 2 and results[0]["frames"] >= 2
    assert got["remapped"] and got["camera"] and got["driver"] and not got["contract"]
    picture = (tmp_path / "run" / "layouts").glob("*_layout.png")
    assert len(list(picture)) == 1  # the operator's picture was drawn (and confirmed at once by the mock)


def test_an_unreachable_policy_ends_the_run_before_the_first_trial(tmp_path):
    """The trial manager has policy_node reach the policy first: no table is laid out for a policy that
    cannot answer, and the run ends at once with the address named and its own exit status."""
    import socket

    from robofollow_ros.exit_status import EXIT_POLICY_UNREACHABLE

    with socket.socket() as unused, RosHarness() as ros:
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
        watcher = ros.node("watcher")
        trials: list = []
        watcher.create_subscription(String, "/robofollow/trial", ros.collector(trials), tp.LATCHED)
        manager = start_profile_graph(ros, "mock", {
            "policy_node": {"policy": address},
            "trial_manager_node": {"trials": f"tasks={TASK}", "output": str(tmp_path / "run")}})["trial_manager_node"]
        ros.wait_for(manager.finished.is_set, timeout=60, what="the run to end")
        assert manager.exit_code == EXIT_POLICY_UNREACHABLE
        ros.wait_for(lambda: trials and json.loads(trials[-1].data)["phase"] == tp.PHASE_FINISHED, what="finished")
    assert all(json.loads(m.data)["phase"] in (tp.PHASE_IDLE, tp.PHASE_FINISHED) for m in trials)  # no trial ran
    assert address in json.loads(trials[-1].data)["error"]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "failed" and address in run["error"]
