"""Calibration targets: a ChArUco board (default) or a plain checkerboard, and finding them in pictures.

ChArUco is the default because its corners carry ids: a wrist camera close to the table sees only
part of the board and still gets usable correspondences. Board figures travel in the recording's
YAML (``board:``), so the rig and the simulator describe the same target the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import cv2
import numpy as np

BOARD_TYPES = ("charuco", "checkerboard")
DICTIONARIES = {"4x4_50": cv2.aruco.DICT_4X4_50, "5x5_100": cv2.aruco.DICT_5X5_100, "6x6_250": cv2.aruco.DICT_6X6_250}
#: At least this many corners in a view, or the view is not used (a PnP on fewer is not trustworthy).
MIN_CORNERS = 6


class BoardError(ValueError):
    """A board description is malformed (the message names the field and value)."""


@dataclass(frozen=True)
class BoardSpec:
    """Squares across (x) and down (y), square side and ArUco marker side in metres."""

    type: str = "charuco"
    squares_x: int = 5
    squares_y: int = 7
    square_m: float = 0.03
    marker_m: float = 0.022
    dictionary: str = "4x4_50"

    def __post_init__(self) -> None:
        if self.type not in BOARD_TYPES:
            raise BoardError(f"board.type: expected one of {BOARD_TYPES}, got {self.type!r}")
        if self.squares_x < 3 or self.squares_y < 3:
            raise BoardError(f"board.squares_x/squares_y: need at least 3 each, got {self.squares_x}x{self.squares_y}")
        if not self.square_m > 0:
            raise BoardError(f"board.square_m: must be positive, got {self.square_m}")
        if self.type == "charuco" and not 0 < self.marker_m < self.square_m:
            raise BoardError(f"board.marker_m: must be in (0, square_m={self.square_m}), got {self.marker_m}")
        if self.dictionary not in DICTIONARIES:
            raise BoardError(f"board.dictionary: expected one of {sorted(DICTIONARIES)}, got {self.dictionary!r}")

    @classmethod
    def from_dict(cls, data: Any) -> BoardSpec:
        if not isinstance(data, dict):
            raise BoardError(f"board: expected a mapping, got {data!r}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise BoardError(f"board: unknown field {sorted(unknown)[0]!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise BoardError(f"board: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def size_m(self) -> tuple[float, float]:
        return self.squares_x * self.square_m, self.squares_y * self.square_m

    def charuco(self) -> cv2.aruco.CharucoBoard:
        dictionary = cv2.aruco.getPredefinedDictionary(DICTIONARIES[self.dictionary])
        return cv2.aruco.CharucoBoard((self.squares_x, self.squares_y), self.square_m, self.marker_m, dictionary)

    def image(self, pixels_per_square: int = 120, margin_squares: float = 0.0) -> np.ndarray:
        """The printable board as a grey uint8 picture (the board's +x to the right, +y down)."""
        margin = round(margin_squares * pixels_per_square)
        size = (self.squares_x * pixels_per_square + 2 * margin, self.squares_y * pixels_per_square + 2 * margin)
        if self.type == "charuco":
            return np.asarray(self.charuco().generateImage(size, marginSize=margin))
        picture = np.full((size[1], size[0]), 255, dtype=np.uint8)
        for row in range(self.squares_y):
            for col in range(self.squares_x):
                if (row + col) % 2 == 0:
                    y0, x0 = margin + row * pixels_per_square, margin + col * pixels_per_square
                    picture[y0:y0 + pixels_per_square, x0:x0 + pixels_per_square] = 0
        return picture


def find_board(image: np.ndarray, board: BoardSpec) -> tuple[np.ndarray, np.ndarray] | None:
    """(object points N×3 in the board frame, image points N×2) of the board's inner corners, or None."""
    grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    if board.type == "checkerboard":
        pattern = (board.squares_x - 1, board.squares_y - 1)
        found, corners = cv2.findChessboardCorners(grey, pattern, flags=cv2.CALIB_CB_ADAPTIVE_THRESH)
        if not found:
            return None
        corners = cv2.cornerSubPix(grey, corners, (3, 3), (-1, -1),
                                   (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 40, 1e-3))
        xs, ys = np.meshgrid(np.arange(1, board.squares_x), np.arange(1, board.squares_y))
        objects = np.column_stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)]) * board.square_m
        return objects.astype(np.float64), corners.reshape(-1, 2).astype(np.float64)
    detector = cv2.aruco.CharucoDetector(board.charuco())
    corners, ids, _, _ = detector.detectBoard(grey)
    if ids is None or len(ids) < MIN_CORNERS:
        return None
    objects = np.asarray(board.charuco().getChessboardCorners())[ids.ravel()]
    return objects.astype(np.float64), corners.reshape(-1, 2).astype(np.float64)
