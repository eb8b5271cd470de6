"""``SimWorld``: the SAPIEN simulation of the rig and one RoboFollow layout (issue 4).

One object serves the headless evaluator, the ROS sim node and the CLI:

    world = SimWorld(render=False)
    world.reset(eval_task, seed)
    obs, frame = world.observation(), world.scorer_frame()
    for row in actions:            # absolute 14-value targets
        world.execute(row)
        obs, frame = world.observation(), world.scorer_frame()

Each ``reset`` builds a fresh physics scene, so one seed and one action list always give the same
frames. ``render=False`` never creates a render system or camera (physics-only, fast). With
``render=True`` the renderer's shared state is kept warm across resets (``sim/renderer.py``), so
only the first scene of a process pays the seconds-long first picture; ``keep_renderer=False``
reproduces the old per-scene cost (benchmarks compare both). ``set_sampler`` lets an observer (a
control-rate recording) see the world every N physics steps inside ``execute``, with the set-point the
stepper drives the arms to at that step; it changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import numpy as np
import sapien

from robofollow_ros.benchmark import default_registry
from robofollow_ros.benchmark.records import EvalTask, Layout, TrainingTask
from robofollow_ros.contract import ARM_SLICE, ARMS, CAMERA_OBS_KEYS, GRIPPER_INDEX
from robofollow_ros.robot.joint_map import JointMap
from robofollow_ros.robot.kinematics import SCENE1_FINGERTIP_OFFSET
from robofollow_ros.robot.rig_config import RigConfig, load_rig_config
from robofollow_ros.robot.transforms import quat_to_matrix
from robofollow_ros.sim.articulation import Frame, load_rig_for_simulation
from robofollow_ros.sim.camera_settings import FAR, NEAR, CameraSettings
from robofollow_ros.sim.control import Segment, pad_segment, plan_segment
from robofollow_ros.sim.layout_builder import place_layout
from robofollow_ros.sim.renderer import keep_renderer_warm
from robofollow_ros.sim.scene_objects import TABLE_CENTRE_XY, build_table
from robofollow_ros.sim.scene_style import SceneStyle, apply_scene_style

PHYSICS_HZ = 250
DIRECT_STEPS = 15
#: PhysX position iterations for the rig: enough for firm friction grasps (test_sim_grasp), no more.
ROBOT_SOLVER_ITERATIONS = 8
#: Collision filter for robot shapes: same id group + a shared ignore bit = no robot self-collision.
_ROBOT_COLLISION_GROUPS = [1, 1, 1 << 1, 0x4242]
Stepper = Literal["topp", "direct"]


class SimWorld:
    """The rig plus one layout in SAPIEN; see the module docstring for the per-trial call order."""

    def __init__(self, render: bool = False, cameras: CameraSettings | None = None, rig: RigConfig | None = None,
                 stepper: Stepper = "topp", direct_steps: int = DIRECT_STEPS, keep_renderer: bool = True,
                 style: SceneStyle | None = None) -> None:
        if stepper not in ("topp", "direct"):
            raise ValueError(f"stepper: expected 'topp' or 'direct', got {stepper!r}")
        if direct_steps < 1:
            raise ValueError(f"direct_steps: must be >= 1, got {direct_steps}")
        self.render = render
        self.keep_renderer = keep_renderer
        self.cameras = cameras or CameraSettings()
        self.rig = rig or load_rig_config()
        self.stepper = stepper
        self.direct_steps = direct_steps
        #: Optional looks for perception tests (table texture, shadow light, distractors); default: none.
        self.style = style or SceneStyle()
        self.dt = 1.0 / PHYSICS_HZ
        self._registry = default_registry()
        self._scene: sapien.Scene | None = None
        self.layout: Layout | None = None
        self.seed: int | None = None
        self.physics_steps = 0
        self._sampler: tuple[int, Callable[[np.ndarray], None]] | None = None

    # ----------------------------------------------------------------------------------------- reset
    def reset(self, task: EvalTask | TrainingTask | Layout, seed: int) -> None:
        """Fresh scene with the task's layout (or a layout given directly) jittered by ``seed``."""
        layout = task if isinstance(task, Layout) else self._registry.layout_of(task)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed: expected an integer, got {seed!r}")
        self._sampler = None  # a new trial: whoever sampled the last one sets it again
        self.close()
        if self.render and self.keep_renderer:
            keep_renderer_warm()
        scene = sapien.Scene() if self.render else sapien.Scene([sapien.physx.PhysxCpuSystem()])
        scene.set_timestep(self.dt)
        self._scene = scene
        self.layout, self.seed, self.physics_steps = layout, int(seed), 0
        build_table(scene, visuals=self.render)
        self._setup_robot(scene)
        if self.render:
            self._setup_cameras(scene)
            if not self.style.is_default:
                apply_scene_style(scene, self.style, TABLE_CENTRE_XY, int(seed))
        self.objects = place_layout(scene, layout, int(seed), self.render, self._hold)
        self.physics_steps = 0  # settling is part of the reset, not of the trial

    def _setup_robot(self, scene: sapien.Scene) -> None:
        robot, frames = load_rig_for_simulation(scene, self.rig, visuals=self.render)
        self.robot = robot
        self.joint_map = JointMap.of(robot, self.rig)
        finger_material = sapien.physx.PhysxMaterial(self.rig.finger_friction, self.rig.finger_friction, 0.0)
        finger_joints = {j for arm in ARMS for j in self.rig.gripper_joints[arm]}
        for link in robot.links:
            link.disable_gravity = True
            is_finger = link.joint is not None and link.joint.name in finger_joints
            for shape in link.collision_shapes:
                shape.set_collision_groups(_ROBOT_COLLISION_GROUPS)
                if is_finger:
                    shape.set_physical_material(finger_material)
        robot.set_solver_position_iterations(ROBOT_SOLVER_ITERATIONS)
        self._joints = list(robot.active_joints)
        gripper_index = {int(i) for arm in ARMS for i in self.joint_map.gripper_qpos_index[arm]}
        for index, joint in enumerate(self._joints):
            gains = self.rig.gripper_drive if index in gripper_index else self.rig.arm_drive
            joint.set_drive_properties(gains.stiffness, gains.damping, gains.force_limit, "force")
        home = self.rig.home_vector()
        self._command = home.copy()
        robot.set_qpos(self.joint_map.to_qpos(home))
        robot.set_qvel(np.zeros(robot.dof))
        self._set_targets(self.joint_map.to_qpos(home), np.zeros(robot.dof))
        links = {link.name: link for link in robot.links}
        self._links = links
        self._frames = frames
        self._tcp_frames = {arm: self._frame(self.rig.tcp_links[arm]) for arm in ARMS}
        self._camera_frames = {name: self._frame(link) for name, link in self.rig.camera_links.items()}

    def _frame(self, name: str) -> Frame:
        """A TCP or camera frame: folded into its parent link, or a real link (offset identity)."""
        if name in self._frames:
            return self._frames[name]
        if name not in self._links:
            raise ValueError(f"rig config: no link or frame {name!r} in {self.rig.urdf_path}")
        return Frame(name, sapien.Pose())

    def _frame_pose(self, frame: Frame) -> sapien.Pose:
        return self._links[frame.parent].entity_pose * frame.offset

    def _setup_cameras(self, scene: sapien.Scene) -> None:
        scene.set_ambient_light([0.45, 0.45, 0.45])
        scene.add_directional_light([0.2, 0.6, -1.0], [0.75, 0.75, 0.75], shadow=False)
        self._render_cameras: dict[str, sapien.render.RenderCameraComponent] = {}
        for name in self.cameras.cameras:
            camera = sapien.render.RenderCameraComponent(self.cameras.width, self.cameras.height)
            camera.set_fovy(self.rig.camera_fovy[name], True)
            camera.near, camera.far = NEAR, FAR
            frame = self._camera_frames[name]
            camera.set_local_pose(frame.offset)
            self._links[frame.parent].entity.add_component(camera)
            self._render_cameras[name] = camera

    # --------------------------------------------------------------------------------------- control
    def _set_targets(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        for joint, position, velocity in zip(self._joints, qpos, qvel, strict=True):
            joint.set_drive_target(float(position))
            joint.set_drive_velocity_target(float(velocity))

    def set_sampler(self, every: int, sample: Callable[[np.ndarray], None] | None) -> None:
        """Call ``sample(setpoint)`` after each physics step that makes ``physics_steps`` a multiple of ``every``
        (until the next ``reset``, or ``sample`` None): ``setpoint`` is the 14-value target the arms were driven
        to in that step (the TOPP profile's point on the way to the row; a ``direct`` row itself). Meanwhile
        ``joint_vector`` reports that step's commanded grippers, as after a one-step ``execute``."""
        if sample is not None and every < 1:
            raise ValueError(f"sampler: every must be >= 1 physics step, got {every}")
        self._sampler = (int(every), sample) if sample is not None else None

    def _stepped(self, setpoint: Callable[[], np.ndarray]) -> None:
        """Count one physics step and hand it to the sampler when one is due."""
        self.physics_steps += 1
        if self._sampler is not None and self.physics_steps % self._sampler[0] == 0:
            self._command = setpoint()
            self._sampler[1](self._command.copy())

    def _hold(self, steps: int) -> None:
        """Step physics with the current command held (settling, idle)."""
        assert self._scene is not None
        self._set_targets(self.joint_map.to_qpos(self._command), np.zeros(self.robot.dof))
        held = self._command.copy()
        for _ in range(steps):
            self._scene.step()
            self._stepped(lambda: held)

    def idle(self, steps: int) -> None:
        """Advance physics ``steps`` steps holding the last command."""
        self._require_scene()
        self._hold(int(steps))

    def execute(self, row: Any) -> int:
        """Execute one absolute 14-value target; returns the physics steps it took.

        Arm joints are clipped to the URDF limits and grippers to [0, 1] before planning.
        """
        self._require_scene()
        target = self.joint_map.check_vector(row, "action row").copy()
        for arm in ARMS:
            lower, upper = self.joint_map.arm_limits(arm)
            target[ARM_SLICE[arm]] = np.clip(target[ARM_SLICE[arm]], lower, upper)
            target[GRIPPER_INDEX[arm]] = float(np.clip(target[GRIPPER_INDEX[arm]], 0.0, 1.0))
        if self.stepper == "direct":
            self._command = target
            self._hold(self.direct_steps)
            return self.direct_steps
        return self._execute_segment(target)

    def _execute_segment(self, target: np.ndarray) -> int:
        assert self._scene is not None
        qpos = np.asarray(self.robot.qpos, dtype=np.float64)
        segments: dict[str, Segment] = {}
        for arm in ARMS:
            start = self.joint_map.arm_from_qpos(arm, qpos[self.joint_map.arm_qpos_index[arm]])
            segments[arm] = plan_segment(start, target[ARM_SLICE[arm]], float(self._command[GRIPPER_INDEX[arm]]),
                                         float(target[GRIPPER_INDEX[arm]]), self.rig.max_velocity,
                                         self.rig.max_acceleration, self.dt, self.rig.gripper_full_stroke_steps)
        steps = max(s.steps for s in segments.values())
        segments = {arm: pad_segment(s, steps) for arm, s in segments.items()}
        joints = self._joints
        index = self.joint_map

        def setpoint_at(k: int) -> np.ndarray:
            point = target.copy()
            for arm, seg in segments.items():
                point[ARM_SLICE[arm]] = seg.positions[k]
                point[GRIPPER_INDEX[arm]] = seg.gripper[k]
            return point

        # Every step's drive targets, worked out for the whole segment at once (the same arithmetic per value
        # as one step at a time) and handed to SAPIEN as Python floats: per-step numpy calls on 6-vectors
        # cost as much as the physics step itself.
        drives = [(list(zip([joints[qi] for qi in index.arm_qpos_index[arm]],
                            index.arm_to_qpos(arm, seg.positions).T.tolist(),
                            (index.arm_sign[arm] * seg.velocities).T.tolist(), strict=True)),
                   list(zip([joints[qi] for qi in index.gripper_qpos_index[arm]],
                            index.fingers_along(arm, seg.gripper).T.tolist(), strict=True)))
                  for arm, seg in segments.items()]
        for k in range(steps):
            for arm_drives, finger_drives in drives:
                for joint, positions, velocities in arm_drives:
                    joint.set_drive_target(positions[k])
                    joint.set_drive_velocity_target(velocities[k])
                for joint, fingers in finger_drives:
                    joint.set_drive_target(fingers[k])
            self._scene.step()
            self._stepped(partial(setpoint_at, k))
        self._command = target
        for arm in ARMS:
            for qi in index.arm_qpos_index[arm]:
                joints[qi].set_drive_velocity_target(0.0)
        return steps

    # ------------------------------------------------------------------------------------- outputs
    def joint_vector(self) -> np.ndarray:
        """RoboFollow's ``joint_action.vector``: measured arm joints and the commanded grippers.

        The gripper values are the commanded openings (as RoboTwin reports them): a gripper closed
        on a cube stops half open, and the scorer's close events must still see it as closed.
        """
        self._require_scene()
        qpos = np.asarray(self.robot.qpos, dtype=np.float64)
        vector = self._command.copy()
        for arm in ARMS:
            vector[ARM_SLICE[arm]] = self.joint_map.arm_from_qpos(arm, qpos[self.joint_map.arm_qpos_index[arm]])
        return vector

    def tcp_pose(self, arm: str) -> tuple[np.ndarray, np.ndarray]:
        self._require_scene()
        pose = self._frame_pose(self._tcp_frames[arm])
        return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)

    def ee_point(self, arm: str) -> np.ndarray:
        """The scorer's EE point: the TCP, or in Scene 1 the fingertip proxy (TCP + 0.04 m along its +x)."""
        position, quat = self.tcp_pose(arm)
        if self.layout is not None and self.layout.scene == "scene1":
            return position + SCENE1_FINGERTIP_OFFSET * quat_to_matrix(quat)[:, 0]
        return position

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        self._require_scene()
        if name not in self.objects:
            raise KeyError(f"object: no {name!r} in layout {self.layout.scene if self.layout else '?'}")
        pose = self.objects[name].pose
        return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)

    def place_object(self, name: str, position: Any, quat_wxyz: Any) -> None:
        """Put one object at a pose, at rest, with no physics step (a person placing it before a trial;
        ``sim_node``'s ``displace_object`` drill). Not for use during a trial: no row would have done it."""
        self._require_scene()
        if name not in self.objects:
            raise KeyError(f"object: no {name!r} in layout {self.layout.scene if self.layout else '?'}")
        entity = self.objects[name]
        entity.set_pose(sapien.Pose([float(v) for v in position], [float(v) for v in quat_wxyz]))
        body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        if body is not None:
            body.set_linear_velocity([0.0, 0.0, 0.0])
            body.set_angular_velocity([0.0, 0.0, 0.0])

    def scorer_frame(self) -> dict[str, Any]:
        """The scorer's trajectory frame (world frame, grippers 1 = open)."""
        vector = self.joint_vector()
        objects, quats = {}, {}
        for name in self.objects:
            position, quat = self.object_pose(name)
            objects[name] = [float(v) for v in position]
            quats[name] = [float(v) for v in quat]
        return {
            "ee_left": [float(v) for v in self.ee_point("left")],
            "ee_right": [float(v) for v in self.ee_point("right")],
            "gripper_left": float(vector[GRIPPER_INDEX["left"]]),
            "gripper_right": float(vector[GRIPPER_INDEX["right"]]),
            "objects": objects,
            "object_quats": quats,
        }

    def render_images(self) -> dict[str, dict[str, np.ndarray]]:
        """Per camera: ``rgb`` uint8 (H, W, 3), plus ``depth`` (metres) / ``segmentation`` (object names' ids)."""
        self._require_scene()
        if not self.render:
            raise RuntimeError("render_images: this world was created with render=False")
        assert self._scene is not None
        self._scene.update_render()
        out: dict[str, dict[str, np.ndarray]] = {}
        for name, camera in self._render_cameras.items():
            camera.take_picture()
            colour = camera.get_picture("Color")
            images = {"rgb": np.clip(colour[..., :3] * 255.0 + 0.5, 0, 255).astype(np.uint8)}
            if self.cameras.depth:
                images["depth"] = (-camera.get_picture("Position")[..., 2]).astype(np.float32)
            if self.cameras.segmentation:
                images["segmentation"] = camera.get_picture("Segmentation")[..., 1].astype(np.int32)
            out[name] = images
        return out

    def segmentation_ids(self) -> dict[str, int]:
        """Entity id of every layout object, as found in the ``segmentation`` picture."""
        return {name: int(entity.per_scene_id) for name, entity in self.objects.items()}

    def observation(self) -> dict[str, Any]:
        """RoboFollow's observation dict; images are None in render-free mode."""
        images = self.render_images() if self.render else {}
        observation = {CAMERA_OBS_KEYS[name]: {"rgb": images[name]["rgb"] if name in images else None}
                       for name in CAMERA_OBS_KEYS}
        for name, pictures in images.items():
            observation[CAMERA_OBS_KEYS[name]].update({k: v for k, v in pictures.items() if k != "rgb"})
        return {"observation": observation, "joint_action": {"vector": self.joint_vector()}}

    def camera_pose(self, camera: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a camera's body frame (SAPIEN convention: +x forward, +y left, +z up)."""
        self._require_scene()
        pose = self._frame_pose(self._camera_frames[camera])
        return np.asarray(pose.p, dtype=np.float64), np.asarray(pose.q, dtype=np.float64)

    # ------------------------------------------------------------------------------------ lifecycle
    def _require_scene(self) -> None:
        if self._scene is None:
            raise RuntimeError("SimWorld: call reset(task, seed) first")

    def close(self) -> None:
        """Drop the current scene (a later reset builds a new one)."""
        self._scene = None
        self.objects = {}
