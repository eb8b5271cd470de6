"""sim_node: the SAPIEN world in place of the rig's hardware — arm drivers, cameras and ``/clock``.

It plays the rig's drivers the ros2_control "mock hardware" way: it consumes each arm's driver
command topic (JointTrajectory / Float64MultiArray / JointState, or an xs_sdk's JointGroupCommand and
JointSingleCommand paired into one row, per ``config/rig/arm_drivers.yaml``,
the file the arm bridge uses) and publishes each arm's joint states on the drivers' state topics,
in the drivers' joint names and gripper units. So ``/robofollow/joint_command`` goes through
``arm_bridge_node`` (safety filter and driver mapping) exactly as on the rig; ``robot_state_node``
turns the bridge's ``/joint_states`` into TF. The sim adds what only a simulator knows: the
objects' ground truth (TF ``world`` → ``object/<name>`` and ``/robofollow/objects``).

The same ``SimWorld`` the headless evaluator drives. Sim time stands still between commands: once
both arms' commands arrived, they are executed as one action row (exactly ``SimWorld.execute``) and
the state after it is published with a strictly later stamp (objects, cameras and ``/clock`` first,
the driver states last). That lets the policy node run in lock-step and the stage monitor score one
frame per row, so ROS verdicts equal headless ones. Resets come from the trial manager's
``/robofollow/trial`` (phase ``resetting``); see ``trial_protocol``. ``/clock`` ticks once per
published state: at each reset and after each executed row (sim time then jumps by the row's
physics steps), never in between.

``step_mode: timer`` is the wall-clock sim, for a policy node in rate mode (``execution:=rate`` /
``realtime``): the world does not wait for the policy. A steady-clock timer (wall time: under
``use_sim_time`` a timer on ``/clock``, which this node alone advances, would never fire) executes, every
``1/step_hz`` s while the trial is ``running``, the newest command of each arm for ``250/step_hz`` physics
steps (the ``direct`` stepper: the arm tracks each target as the rig's position controllers do), or holds
the last one when none came; one state goes out per tick. Commands that arrive between ticks replace each
other, as a driver's would. If physics and rendering take longer than the tick, sim time falls behind
wall time (the node logs the ratio per trial); the policy's latency then costs less than on the rig.

``displace_object`` (``rig.displacement``; the mock's parameter, settable while running) moves one object's
body off its settled pose on purpose, before the trial's first row, to dry-run the trial manager's reset
check (``reset_check: true``): the table then differs from the layout as a person could leave it. Setting
it (and setting it back to empty, the operator's move) publishes a new state, strictly later; the reset
check starts the trial from the state it passed on.

A reader of the state that matches only after a trial's start state went out (discovery under load
is slow; being seen on ``/robofollow/trial`` says nothing about a node's other endpoints) is sent
that start state again, as long as no row has run: the trial manager lets the rows run only once
the stage monitor has scored it (``trial_protocol``), so the start state must reach every reader.
Later states need no such help: a reader that got the start state is matched for the rest.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from typing import Any

import numpy as np
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from robofollow_ros.contract import (
    ARM_SLICE,
    ARMS,
    CAMERA_NAMES,
    CAMERA_OPTICAL_FRAMES,
    GRIPPER_INDEX,
    TOPIC_OBJECTS,
    TOPIC_TF,
    TOPIC_TRIAL,
    WORLD_FRAME,
    camera_image_topic,
    camera_info_topic,
)
from robofollow_ros.nodes import trial_protocol as tp
from robofollow_ros.nodes._main import run_node
from robofollow_ros.nodes._params import ParameterSet, non_negative, one_of, positive
from robofollow_ros.nodes.conversions import (
    NS_PER_S,
    MessageError,
    camera_info_msg,
    image_msg,
    object_frame,
    object_markers_msg,
    time_msg,
    transform_msg,
)
from robofollow_ros.nodes.driver_messages import (
    ArmPosition,
    CommandPairs,
    command_channels,
    command_part,
    group_by_topic,
    state_message,
)
from robofollow_ros.nodes.graph_peers import PeerReport
from robofollow_ros.nodes.rclpy_compat import QoSPublisherMatchedInfo, publisher_matched_callbacks
from robofollow_ros.rig.displacement import displacement_error, parse_displacement
from robofollow_ros.rig.driver_config import ArmDriver, load_driver_config, rig_driver_config

TOPIC_HEAD_DEPTH = "/cameras/head/depth"


def _physics_divisor(value: Any) -> str | None:
    from robofollow_ros.sim.world import PHYSICS_HZ

    if not isinstance(value, int | float) or value <= 0 or value > PHYSICS_HZ:
        return f"must be in (0, {PHYSICS_HZ}] Hz"
    steps = PHYSICS_HZ / value
    return None if abs(steps - round(steps)) < 1e-9 else f"must divide the physics rate {PHYSICS_HZ} Hz"


_non_negative = non_negative


class SimNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("sim_node", **kwargs)
        PeerReport(self)  # says when it sees every node the trial manager awaits
        params = ParameterSet(self)
        self.render = params.declare("render", True, "render the three cameras (False: physics only, no images)")
        width = params.declare("image_width", 320, "camera image width, px", positive)
        height = params.declare("image_height", 240, "camera image height, px", positive)
        depth = params.declare("depth", False, "also publish the head camera's depth (32FC1, m) on /cameras/head/depth")
        camera_hz = params.declare(
            "camera_hz", 30.0, "camera frames per second of sim time (0: only at resets and on "
            "/robofollow/sim/render requests)", _non_negative)
        stepper = params.declare("stepper", "topp", "how each command row is executed: topp | direct",
                                 one_of("topp", "direct"))
        self.step_mode = params.declare(
            "step_mode", "command", "command: one row per command, sim time stands still between (lock-step); "
            "timer: the newest command held for 1/step_hz of sim time, every 1/step_hz s of wall time (rate mode)",
            one_of("command", "timer"))
        step_hz = params.declare("step_hz", 25.0, "timer: control ticks per second (wall and sim time); a divisor "
                                 "of the physics rate, 250 Hz", _physics_divisor)
        rig_file = params.declare("rig_config", "", "rig name or YAML (empty: $ROBOFOLLOW_RIG, else built-in)")
        driver_file = params.declare("driver_config", "", "the arm drivers to play: command and state topics, "
                                     "joint names, gripper units (empty: the rig's driver map)") or rig_driver_config()
        self.displace = params.declare(
            "displace_object", "", "drills and dry runs of the reset check: leave one object off its place, JSON "
            '{"object": NAME, "dx": M, "dy": M, "dyaw_deg": DEG} from its settled pose (empty: every object in '
            "place); settable while running: before a trial's first row the body moves at once, later at the "
            "next reset", displacement_error, read_only=False)

        from robofollow_ros.benchmark import default_registry
        from robofollow_ros.robot.rig_config import load_rig_config
        from robofollow_ros.sim.camera_settings import CameraSettings
        from robofollow_ros.sim.world import PHYSICS_HZ, SimWorld

        rig = load_rig_config(rig_file) if rig_file else load_rig_config()
        self.drivers = load_driver_config(driver_file).arms
        timer = self.step_mode == "timer"
        self.world = SimWorld(render=self.render, cameras=CameraSettings(width, height, depth=depth),
                              rig=rig, stepper="direct" if timer else stepper,
                              **({"direct_steps": round(PHYSICS_HZ / step_hz)} if timer else {}))
        self.registry = default_registry()
        self.renderer_startup_s: float | None = None  # seconds the first picture took; None without rendering
        if self.render:
            self._warm_renderer(SimWorld(render=True, cameras=CameraSettings(width, height), rig=rig))
        self.step_ns = round(self.world.dt * NS_PER_S)
        self.camera_period_ns = round(1e9 / camera_hz) if camera_hz > 0 else None
        self.depth = depth
        self.now_ns = 0
        self.next_camera_ns = 0
        self.trial_id: str | None = None
        self.rows = 0
        self._infos = self._camera_infos(rig, width, height)
        self._world_lock = threading.Lock()
        self._pending: dict[str, deque[ArmPosition]] = {arm: deque() for arm in ARMS}
        #: Whole targets from the parts of a command that comes in two messages (an xs_sdk's group and gripper).
        self._pairs = {arm: CommandPairs() for arm in ARMS}

        late_reader = publisher_matched_callbacks(self._on_reader_matched)
        self.driver_states = {topic: (drivers, self.create_publisher(JointState, topic, tp.STATE_STREAM,
                                                                     event_callbacks=late_reader))
                              for topic, drivers in group_by_topic(self.drivers.values(), "state_topic").items()}
        for driver in self.drivers.values():
            for topic, kind in command_channels(driver):
                self.create_subscription(kind, topic, functools.partial(self._on_command, driver), tp.STATE_STREAM)
        self.tf = self.create_publisher(TFMessage, TOPIC_TF, tp.STATE_STREAM, event_callbacks=late_reader)
        self.objects = self.create_publisher(MarkerArray, TOPIC_OBJECTS, tp.STATE_STREAM, event_callbacks=late_reader)
        self.clock = self.create_publisher(Clock, tp.TOPIC_CLOCK, 10)
        self.status = self.create_publisher(String, tp.TOPIC_SIM_STATUS, tp.LATCHED_STATE)
        self.images = {c: self.create_publisher(Image, camera_image_topic(c), 5) for c in CAMERA_NAMES}
        self.infos = {c: self.create_publisher(CameraInfo, camera_info_topic(c), 5) for c in CAMERA_NAMES}
        self.depth_image = self.create_publisher(Image, TOPIC_HEAD_DEPTH, 5)
        self.create_subscription(String, TOPIC_TRIAL, self._on_trial, tp.LATCHED)
        self.create_service(Trigger, tp.SERVICE_SIM_RENDER, self._on_render_request)
        self.running = False  # timer mode: the current trial is `running`, so the world moves
        self._latest: dict[str, ArmPosition] = {}
        #: Each object's settled pose after the reset: where ``displace_object`` moves from, and back to.
        self._settled: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.add_post_set_parameters_callback(self._on_parameters_set)
        self._wall_since = 0.0
        self._sim_since = 0
        if timer:
            self.create_timer(1.0 / step_hz, self._on_step_timer, clock=RosClock(clock_type=ClockType.STEADY_TIME))

    # -- set-up ----------------------------------------------------------------------------------
    def _warm_renderer(self, scratch: Any) -> None:
        """Take the process's first picture now, of a throw-away scene, and drop the scene.

        The first picture builds SAPIEN's shared renderer state (shaders, pipelines; ``sim.renderer`` keeps it
        for the process) inside one call that holds the GIL: 3-45 s on the CPU renderer. Inside a trial's
        reset, no signal handler could run meanwhile, so a sim node stopped then outlived launch's 5 s
        grace; here it is paid once at start-up, and every reset after renders in a fraction of a second.
        ``scratch`` is a world of its own: the node's world stays without a trial until the first reset."""
        # said before, not after: the call below holds the GIL, so nothing in this process can speak meanwhile
        self.get_logger().info("building the renderer: the first picture takes up to a minute on a CPU renderer "
                               "(once per process)")
        started = time.monotonic()
        scratch.reset(self.registry.eval_tasks()[0], 0)
        scratch.render_images()
        scratch.close()
        self.renderer_startup_s = round(time.monotonic() - started, 3)
        self.get_logger().info(f"renderer warmed up in {self.renderer_startup_s:.1f} s")

    def _camera_infos(self, rig: Any, width: int, height: int) -> dict[str, dict[str, Any]]:
        from robofollow_ros.robot.cameras import camera_info_dict

        return {c: camera_info_dict(c, width, height, rig.camera_fovy[c]) for c in CAMERA_NAMES}

    # -- trial side ------------------------------------------------------------------------------
    def _on_trial(self, msg: String) -> None:
        with self._world_lock:
            self._reset_for(msg)

    def _reset_for(self, msg: String) -> None:
        trial = tp.decode_or_log(msg.data, TOPIC_TRIAL, self.get_logger())
        if trial is None:
            return
        running = trial.get("phase") == tp.PHASE_RUNNING and str(trial.get("id")) == self.trial_id
        if running and not self.running:
            self._wall_since, self._sim_since = time.monotonic(), self.now_ns
        elif self.running and not running and self.step_mode == "timer":
            wall = time.monotonic() - self._wall_since
            if wall > 0:
                self.get_logger().info(f"trial {self.trial_id}: sim time ran at "
                                       f"{(self.now_ns - self._sim_since) / NS_PER_S / wall:.2f} x wall time")
        self.running = running
        if trial.get("phase") != tp.PHASE_RESETTING or trial.get("id") == self.trial_id:
            return
        self.trial_id = str(trial.get("id"))
        started = time.monotonic()
        try:
            task = self.registry.eval_task(str(trial.get("task")))
            self.world.reset(task, int(trial.get("seed", 0)))
        except (KeyError, ValueError, TypeError) as exc:
            self.get_logger().error(f"reset for trial {self.trial_id} failed: {exc}")
            self.status.publish(String(data=tp.encode({"trial_id": self.trial_id, "state": "error",
                                                       "error": str(exc)})))
            return
        self.rows = 0
        self._settled = {name: self.world.object_pose(name) for name in self.world.objects}
        self._place_displaced()
        for queue in self._pending.values():
            queue.clear()  # commands meant for the previous scene
        self._pairs = {arm: CommandPairs() for arm in ARMS}
        self._latest.clear()
        self.now_ns += self.step_ns  # frame 0 of a trial is strictly later than anything before it
        self.next_camera_ns = self.now_ns
        self._publish_state()
        if self.render and self.camera_period_ns is None:
            self._publish_cameras(self.now_ns)  # the first picture of a trial is always there
        self.status.publish(String(data=tp.encode({"trial_id": self.trial_id, "state": "ready",
                                                   "stamp_ns": self.now_ns, "task": task.task_id,
                                                   "seed": self.world.seed,
                                                   "renderer_startup_s": self.renderer_startup_s})))
        self.get_logger().info(f"reset to {task.task_id} seed {self.world.seed} (trial {self.trial_id}, "
                               f"{time.monotonic() - started:.1f} s)")

    # -- the displace_object drill (rig.displacement) ------------------------------------------------
    def _on_parameters_set(self, parameters: list[Any]) -> None:
        for parameter in parameters:
            if parameter.name != "displace_object":
                continue
            with self._world_lock:
                self.displace = str(parameter.value)
                if self.world.layout is None:
                    return
                if self.rows > 0:
                    self.get_logger().info("displace_object: rows of this trial ran; it applies at the next reset")
                    return
                if self._place_displaced():
                    self.now_ns += self.step_ns  # a new table: a new state, strictly later (the trial starts there)
                    self.next_camera_ns = self.now_ns
                    self._publish_state()
                    if self.render and self.camera_period_ns is None:
                        self._publish_cameras(self.now_ns)

    def _place_displaced(self) -> bool:
        """Every object at its settled pose but the one ``displace_object`` names, moved by it; whether any
        body moved (an unknown name is logged and moves nothing)."""
        move = parse_displacement(self.displace)
        if move is not None and move.object not in self._settled:
            self.get_logger().error(f"displace_object: no object {move.object!r} in this layout (objects: "
                                    f"{', '.join(self._settled)})")
            move = None
        moved = False
        for name, (position, quat) in self._settled.items():
            target = move.apply(position, quat) if move is not None and name == move.object else (position, quat)
            now = self.world.object_pose(name)
            if np.allclose(now[0], target[0], atol=1e-6) and np.allclose(now[1], target[1], atol=1e-6):
                continue
            self.world.place_object(name, *target)
            moved = True
        if move is not None and moved:
            self.get_logger().warning(f"displace_object: {move.object} left {move.dx:+.3f} m x, {move.dy:+.3f} m y, "
                                      f"{move.dyaw_deg:+.0f} deg off its place")
        return moved

    def _on_command(self, driver: ArmDriver, msg: Any) -> None:
        """One arm's driver command; a row is executed once every arm has one waiting (an xs_sdk's command once
        both its messages, the joints' and the gripper's, came)."""
        try:
            part = command_part(driver, msg)
        except MessageError as exc:
            self.get_logger().error(f"driver command rejected: {exc}")
            return
        with self._world_lock:
            target = self._pairs[driver.arm].add(part)
            if target is None:
                return  # the other half of the command is still on its way
            if self.step_mode == "timer":
                self._latest[driver.arm] = target  # executed on the next tick
                return
            self._pending[driver.arm].append(target)
            if all(self._pending[arm] for arm in ARMS):
                self._execute({arm: self._pending[arm].popleft() for arm in ARMS})

    def _on_step_timer(self) -> None:
        """Timer mode: one control tick of the running trial (the newest commands, or a hold)."""
        with self._world_lock:
            if not self.running or self.world.layout is None:
                return
            if all(arm in self._latest for arm in ARMS):
                self._execute(dict(self._latest))
            else:  # no command yet: the arms hold their reset pose
                self.world.idle(self.world.direct_steps)
                self.rows += 1
                self.now_ns += self.world.direct_steps * self.step_ns
                self._publish_state()

    def _execute(self, targets: dict[str, ArmPosition]) -> None:
        if self.world.layout is None:
            self.get_logger().warning("driver command before any reset; ignored", throttle_duration_sec=5.0)
            return
        row = np.zeros(len(ARMS) * 7)
        for arm, (joints, gripper) in targets.items():
            row[ARM_SLICE[arm]] = joints
            row[GRIPPER_INDEX[arm]] = gripper
        try:
            steps = self.world.execute(row)
        except ValueError as exc:
            self.get_logger().error(f"driver command rejected: {exc}")
            return
        self.rows += 1
        self.now_ns += steps * self.step_ns
        self._publish_state()

    # -- state out -------------------------------------------------------------------------------
    def _on_reader_matched(self, info: QoSPublisherMatchedInfo) -> None:
        """A new reader of the state: before the trial's first row, send it the start state again
        (the others get a copy with the same stamp, which every reader takes as the same state)."""
        if info.current_count_change <= 0:
            return
        with self._world_lock:
            if self.world.layout is not None and self.rows == 0:
                self._publish_state()

    def _publish_state(self) -> None:
        """Everything observable at ``now_ns``; the driver states go last (through the arm bridge they
        become ``/joint_states``, the lock-step ack)."""
        ns, world = self.now_ns, self.world
        poses = {name: world.object_pose(name) for name in world.objects}
        transforms = [transform_msg(WORLD_FRAME, object_frame(n), p, q, ns) for n, (p, q) in poses.items()]
        self.tf.publish(TFMessage(transforms=transforms))
        self.objects.publish(object_markers_msg(poses, ns))
        if self.render and self.camera_period_ns is not None and ns >= self.next_camera_ns:
            self._publish_cameras(ns)
            self.next_camera_ns = ns + self.camera_period_ns
        self.clock.publish(Clock(clock=time_msg(ns)))
        vector = world.joint_vector()
        positions = {arm: (vector[ARM_SLICE[arm]], float(vector[GRIPPER_INDEX[arm]])) for arm in ARMS}
        for drivers, publisher in self.driver_states.values():
            publisher.publish(state_message(drivers, positions, time_msg(ns)))

    def _on_render_request(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        """Pictures of the current state, stamped with it: the policy's observation at ``predict`` time
        is then rendered from exactly the state the headless evaluator would render."""
        with self._world_lock:
            if not self.render or self.world.layout is None:
                res.success, res.message = False, "rendering is off" if not self.render else "no scene yet"
                return res
            self._publish_cameras(self.now_ns)
            res.success, res.message = True, str(self.now_ns)
        return res

    def _publish_cameras(self, ns: int) -> None:
        pictures = self.world.render_images()
        for camera, images in pictures.items():
            frame = CAMERA_OPTICAL_FRAMES[camera]
            self.images[camera].publish(image_msg(images["rgb"], ns, frame))
            self.infos[camera].publish(camera_info_msg(self._infos[camera], ns))
            if camera == "head" and self.depth and "depth" in images:
                self.depth_image.publish(image_msg(np.asarray(images["depth"], dtype=np.float32), ns, frame))

    def destroy_node(self) -> None:
        if hasattr(self, "_world_lock"):  # not when __init__ failed half-way (a rejected parameter)
            with self._world_lock:  # not while a callback is resetting or stepping the world
                self.world.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(SimNode, args)


if __name__ == "__main__":
    main()
