"""Calibration checked in SAPIEN: render a ChArUco board, move the arms, recover the known cameras.

The board is a textured quad (a PNG drawn by OpenCV, loaded through an OBJ/MTL pair in a temporary
directory). Each camera is placed where the rig URDF mounts it for the arm pose (forward kinematics
of the same joints the recording stores), so the truth is the URDF, and what is checked is the whole
rig path: pictures + joints → ``solve_recording`` → intrinsics and static transform.

- head (eye-to-hand): the board hangs under the left TCP, face up; the left arm moves it around.
- wrists (eye-in-hand): the board lies on the table; each arm looks at it from several poses.
The arm links themselves are not drawn (they would only hide parts of the board).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z
from robofollow_ros.perception.calib_board import BoardSpec
from robofollow_ros.perception.calib_record import write_recording
from robofollow_ros.robot.cameras import BODY_FROM_OPTICAL
from robofollow_ros.robot.transforms import matrix_to_quat, quat_to_matrix

HEAD_BOARD = BoardSpec(squares_x=5, squares_y=4, square_m=0.05, marker_m=0.038)
TABLE_BOARD = BoardSpec(squares_x=6, squares_y=8, square_m=0.03, marker_m=0.022)
#: The head board's centre sits this far along the TCP's approach axis (below the gripper).
HEAD_BOARD_DROP = 0.06
TABLE_BOARD_CENTRE = (-0.03, -0.10)


def _rot(axis: str, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


class BoardScene:
    """A bare SAPIEN scene with one board and one movable camera (no robot, no table)."""

    def __init__(self, board: BoardSpec, width: int, height: int, fovy: float) -> None:
        import sapien

        self.board = board
        self._tmp = tempfile.TemporaryDirectory(prefix="robofollow_board_")
        obj = self._write_board_mesh(Path(self._tmp.name))
        self.scene = sapien.Scene()
        self.scene.set_ambient_light([0.9, 0.9, 0.9])
        builder = self.scene.create_actor_builder()
        builder.add_visual_from_file(str(obj))
        self.board_actor = builder.build_kinematic(name="calibration_board")
        self.camera = sapien.render.RenderCameraComponent(width, height)
        self.camera.set_fovy(fovy, True)
        self.camera.near, self.camera.far = 0.01, 10.0
        self.camera_entity = sapien.Entity()
        self.camera_entity.add_component(self.camera)
        self.scene.add_entity(self.camera_entity)

    def _write_board_mesh(self, directory: Path) -> Path:
        margin = 0.5
        picture = self.board.image(pixels_per_square=100, margin_squares=margin)
        cv2.imwrite(str(directory / "board.png"), picture)
        w, h = self.board.size_m
        m = margin * self.board.square_m
        corners = [(-m, -m), (w + m, -m), (w + m, h + m), (-m, h + m)]
        uvs = [(0, 1), (1, 1), (1, 0), (0, 0)]
        lines = ["mtllib board.mtl", "usemtl board"]
        lines += [f"v {x:.6f} {y:.6f} 0" for x, y in corners]
        lines += [f"vt {u} {v}" for u, v in uvs]
        lines += ["vn 0 0 -1", "vn 0 0 1", "f 1/1/1 3/3/1 2/2/1", "f 1/1/1 4/4/1 3/3/1",
                  "f 1/1/2 2/2/2 3/3/2", "f 1/1/2 3/3/2 4/4/2"]
        (directory / "board.obj").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (directory / "board.mtl").write_text(
            "newmtl board\nKa 1 1 1\nKd 1 1 1\nKs 0 0 0\nmap_Kd board.png\n", encoding="utf-8")
        return directory / "board.obj"

    def render(self, board_pose: tuple[np.ndarray, np.ndarray], camera_body: tuple[np.ndarray, np.ndarray]
               ) -> np.ndarray:
        """RGB picture with the board frame at ``board_pose`` and the camera body (SAPIEN axes) at ``camera_body``."""
        import sapien

        rotation, position = board_pose
        self.board_actor.set_pose(sapien.Pose(position, matrix_to_quat(rotation)))
        body_rotation, body_position = camera_body
        self.camera_entity.set_pose(sapien.Pose(body_position, matrix_to_quat(body_rotation)))
        self.scene.update_render()
        self.camera.take_picture()
        colour = self.camera.get_picture("Color")
        return np.clip(colour[..., :3] * 255.0 + 0.5, 0, 255).astype(np.uint8)

    def close(self) -> None:
        self._tmp.cleanup()


@dataclass
class SimRecording:
    directory: Path
    camera: str
    truth_parent: str
    truth_pose: tuple[np.ndarray, np.ndarray]  # optical frame in its parent (URDF)
    truth_k: np.ndarray


def _arm_targets(rng: np.random.Generator, count: int, centre: np.ndarray, spread: np.ndarray,
                 tilt_deg: float, yaw_deg: float) -> list[tuple[np.ndarray, np.ndarray]]:
    from robofollow_ros.robot.kinematics import TOP_DOWN_QUAT_WXYZ

    top_down = quat_to_matrix(np.asarray(TOP_DOWN_QUAT_WXYZ))
    targets = []
    for _ in range(count):
        tilt = np.radians(rng.uniform(-tilt_deg, tilt_deg, 2))
        yaw = math.radians(rng.uniform(-yaw_deg, yaw_deg))
        rotation = _rot("z", yaw) @ _rot("x", tilt[0]) @ _rot("y", tilt[1]) @ top_down
        targets.append((centre + rng.uniform(-1, 1, 3) * spread, rotation))
    return targets


def record_in_sim(camera: str, out_dir: Path, views: int = 12, seed: int = 0, kinematics: Any = None,
                  rig: Any = None, scene: BoardScene | None = None) -> SimRecording:
    """Render a calibration recording for one simulated camera; returns where it is and the truth."""
    from robofollow_ros.robot.kinematics import RigKinematics
    from robofollow_ros.robot.rig_config import load_rig_config

    rig = rig or load_rig_config()
    kin = kinematics or RigKinematics(rig)
    rng = np.random.default_rng(seed)
    arm = "left" if camera in ("head", "left_wrist") else "right"
    camera_link = rig.camera_links[camera]
    width, height = 320, 240
    from robofollow_ros.robot.cameras import intrinsic_matrix

    truth_k = intrinsic_matrix(width, height, rig.camera_fovy[camera])
    if camera == "head":
        board, mode, hand_link = board_for(camera), "eye-to-hand", rig.tcp_links[arm]
        targets = _arm_targets(rng, views * 3, np.array([-0.05, -0.12, 0.92]), np.array([0.1, 0.07, 0.05]),
                               25.0, 35.0)
    else:
        board, mode, hand_link = board_for(camera), "eye-in-hand", kin.parent_link(camera_link)
        side = -0.06 if arm == "left" else 0.0
        targets = _arm_targets(rng, views * 3, np.array([side, -0.16, 1.0]), np.array([0.06, 0.04, 0.04]),
                               20.0, 30.0)
    w, h = board.size_m
    own_scene = scene is None
    scene = scene or BoardScene(board, width, height, rig.camera_fovy[camera])
    pictures: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    home = kin.home_vector()
    try:
        for position, rotation in targets:
            if len(pictures) == views:
                break
            result = kin.ik(arm, position, matrix_to_quat(rotation), seed=home[0:6] if arm == "left" else home[7:13])
            if not result.success:
                continue
            vector = kin.arm_vector(home, arm, result.joints)
            body = kin.link_pose(vector, camera_link)
            if camera == "head":
                tcp = kin.link_pose(vector, hand_link)
                # Board z along the approach (tcp x): face up; board x, y along tcp y, z.
                board_rot = tcp.rotation @ np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
                centre = tcp.position + HEAD_BOARD_DROP * tcp.rotation[:, 0]
                board_pose = (board_rot, centre - board_rot @ np.array([w / 2, h / 2, 0.0]))
            else:
                board_rot = np.diag([1.0, -1.0, -1.0])  # face up, board x = world x, board y = world -y
                cx, cy = TABLE_BOARD_CENTRE
                board_pose = (board_rot, np.array([cx - w / 2, cy + h / 2, TABLE_TOP_Z + 0.0005]))
            pictures.append(scene.render(board_pose, (body.rotation, body.position)))
            vectors.append(vector)
    finally:
        if own_scene:
            scene.close()
    write_recording(out_dir, camera, mode, hand_link, board, pictures, vectors)
    optical = _optical_in_parent(kin, home, camera_link, None if camera == "head" else hand_link)
    return SimRecording(out_dir, camera, "world" if camera == "head" else hand_link, optical, truth_k)


def board_for(camera: str) -> BoardSpec:
    """The board used for a camera: a large one for the distant head camera, a finer one for the wrists."""
    return HEAD_BOARD if camera == "head" else TABLE_BOARD


def intrinsics_views_in_sim(camera: str, out_dir: Path, views: int = 15, seed: int = 0, rig: Any = None,
                            scene: BoardScene | None = None) -> tuple[list[Path], np.ndarray, BoardSpec]:
    """Pictures of a board held in front of a simulated camera at varied distances and tilts.

    The intrinsics session of a real calibration (a board filling much of the view); returns the
    picture paths, the true K and the board.
    """
    from robofollow_ros.robot.cameras import intrinsic_matrix
    from robofollow_ros.robot.rig_config import load_rig_config

    rig = rig or load_rig_config()
    width, height, fovy = 320, 240, rig.camera_fovy[camera]
    k = intrinsic_matrix(width, height, fovy)
    board = board_for(camera)
    w, h = board.size_m
    rng = np.random.default_rng(seed)
    own_scene = scene is None
    scene = scene or BoardScene(board, width, height, fovy)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    # Distance at which the board's larger side spans about 80 % of the picture's height.
    fit = k[1, 1] * max(w, h) / (0.8 * height)
    try:
        for index in range(views):
            tilt = np.radians(rng.uniform(-50, 50, 2))
            rotation = _rot("x", tilt[0]) @ _rot("y", tilt[1]) @ _rot("z", math.radians(rng.uniform(-20, 20)))
            distance = fit * rng.uniform(0.9, 1.3)
            offset = rng.uniform(-0.15, 0.15, 2) * distance
            translation = np.array([offset[0], offset[1], distance]) - rotation @ np.array([w / 2, h / 2, 0.0])
            picture = scene.render((rotation, translation), (BODY_FROM_OPTICAL.T, np.zeros(3)))
            path = out_dir / f"intrinsics_{index:03d}.png"
            cv2.imwrite(str(path), cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
            paths.append(path)
    finally:
        if own_scene:
            scene.close()
    return paths, k, board


def _optical_in_parent(kin: Any, vector: np.ndarray, camera_link: str, parent: str | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    body = kin.link_pose(vector, camera_link)
    rotation, position = body.rotation @ BODY_FROM_OPTICAL, body.position
    if parent is None:
        return rotation, position
    base = kin.link_pose(vector, parent)
    return base.rotation.T @ rotation, base.rotation.T @ (position - base.position)
