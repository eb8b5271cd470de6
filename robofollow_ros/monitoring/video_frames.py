"""One picture of a trial video: the three cameras side by side over a panel with the trial's state burned in.

ROS-free and bag-free: it takes images and an ``Overlay`` (what the reviewer must read off the frame: the
instruction, each stage's state as the live score had it at that moment, the live and the final IS/ES), so
the same drawing serves ``robofollow video``, ``eval --record --video`` and the contact sheet. Text is
OpenCV's Hershey font (ASCII; other characters are drawn as ``?``) so no font file is needed.

Geometry (``Layout``): the cameras keep their recorded size, scaled up by a whole factor until the row is at
least ``MIN_WIDTH`` wide (a 64×48 test camera is still readable), ``GAP`` pixels apart, and the panel below is
``PANEL_ROWS`` text rows high. Width and height are even, as yuv420p needs. Tests read the stage boxes'
colours back from a decoded frame at ``Layout.stage_box``.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from robofollow_ros.contract import CAMERA_NAMES
from robofollow_ros.monitoring.stages import STAGE_SLOTS, stage_state

#: The camera row is scaled up by a whole factor until it is at least this wide (pixels).
MIN_WIDTH = 960
#: Panel-coloured pixels between two cameras' pictures (views of the same table otherwise run together).
GAP = 4
ROW_H = 22
PANEL_ROWS = 4 + STAGE_SLOTS + 1  # camera names, title, two instruction lines, the stages, the totals
#: Panel row of the first stage (after the camera names, the title and two instruction lines).
FIRST_STAGE_ROW = 4
PANEL_PAD = 8
FONT = cv2.FONT_HERSHEY_SIMPLEX
FONT_SCALE = 0.5
BACKGROUND = (24, 24, 24)
TEXT = (235, 235, 235)
INSTRUCTION = (255, 214, 90)
CAMERA_LABEL = (150, 150, 150)
#: Each stage state's box colour (RGB), the states of ``monitoring.stages.STAGE_STATES``.
STATE_COLOURS: Mapping[str, tuple[int, int, int]] = {
    "pending": (110, 110, 110), "intent": (235, 160, 0), "done": (40, 170, 70), "missed": (205, 45, 45)}
STATE_BOX_W = 78
CAMERA_LABELS = {"head": "head", "left_wrist": "left wrist", "right_wrist": "right wrist"}


@dataclass(frozen=True)
class StageLine:
    name: str
    state: str
    intent: float
    intent_max: float
    exec: float
    exec_max: float


@dataclass(frozen=True)
class Overlay:
    """What one frame says besides the pictures."""

    title: str
    instruction: str
    t_s: float
    stages: tuple[StageLine, ...] = ()
    #: (IS, ES) of the live score at this frame; None before the first score.
    live: tuple[float, float] | None = None
    #: (IS, ES, complete) of the trial's final score; None when the recording has none (cut short).
    final: tuple[float, float, bool] | None = None


def stage_lines(live: Mapping[str, Any] | None, names: Sequence[str]) -> tuple[StageLine, ...]:
    """The stages of a live score (``StageMonitor.live()``) in their states; before the first score (None), or for
    a stage it does not hold yet, the trial's stage ``names`` as pending."""
    stages = (live or {}).get("stages") or {}
    final = bool((live or {}).get("final"))
    out = []
    for name in list(dict.fromkeys([*stages, *names]))[:STAGE_SLOTS]:
        stage = stages.get(name)
        if not isinstance(stage, Mapping):
            out.append(StageLine(name, "pending", 0.0, 0.0, 0.0, 0.0))
            continue
        out.append(StageLine(name, stage_state(stage, final), float(stage.get("intent", 0.0)),
                             float(stage.get("intent_max", 0.0)), float(stage.get("exec", 0.0)),
                             float(stage.get("exec_max", 0.0))))
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """Where everything sits in a frame of ``width`` × ``height``."""

    cam_w: int  # one camera's width in the frame (its recorded width times ``scale``)
    cam_h: int
    scale: int
    width: int
    height: int

    @classmethod
    def for_camera(cls, width: int, height: int) -> Layout:
        """The layout for cameras recorded at ``width`` × ``height``."""
        if width < 1 or height < 1:
            raise ValueError(f"camera size: {width}x{height} is not a picture")
        scale = max(1, math.ceil(MIN_WIDTH / (len(CAMERA_NAMES) * width)))
        cam_w, cam_h = width * scale, height * scale
        frame_w = len(CAMERA_NAMES) * cam_w + (len(CAMERA_NAMES) - 1) * GAP
        frame_h = cam_h + PANEL_ROWS * ROW_H + 2 * PANEL_PAD
        return cls(cam_w, cam_h, scale, frame_w + frame_w % 2, frame_h + frame_h % 2)

    def camera_box(self, camera: str) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of a camera's picture."""
        x = CAMERA_NAMES.index(camera) * (self.cam_w + GAP)
        return x, 0, x + self.cam_w, self.cam_h

    def row_y(self, row: int) -> int:
        """The text baseline of panel row ``row``."""
        return self.cam_h + PANEL_PAD + (row + 1) * ROW_H - 6

    def stage_box(self, slot: int) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of stage ``slot``'s state box (its colour is the state)."""
        y = self.cam_h + PANEL_PAD + (FIRST_STAGE_ROW + slot) * ROW_H
        return PANEL_PAD, y + 2, PANEL_PAD + STATE_BOX_W, y + ROW_H - 2


def _ascii(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii")


def _put(img: np.ndarray, text: str, x: int, y: int, colour: tuple[int, int, int] = TEXT) -> None:
    cv2.putText(img, _ascii(text), (x, y), FONT, FONT_SCALE, colour, 1, cv2.LINE_AA)


def _text_width(text: str) -> int:
    return int(cv2.getTextSize(_ascii(text), FONT, FONT_SCALE, 1)[0][0])


def compose(images: Mapping[str, np.ndarray | None], overlay: Overlay, layout: Layout) -> np.ndarray:
    """The frame: each camera's picture (a black box saying so where a camera has none yet) over the panel."""
    frame = np.empty((layout.height, layout.width, 3), np.uint8)
    frame[:] = BACKGROUND
    for camera in CAMERA_NAMES:
        x0, y0, x1, y1 = layout.camera_box(camera)
        rgb = images.get(camera)
        if rgb is None:
            frame[y0:y1, x0:x1] = 0
            _put(frame, f"{CAMERA_LABELS[camera]}: no image", x0 + 8, y0 + 20)
            continue
        if rgb.shape[:2] != (y1 - y0, x1 - x0):
            rgb = cv2.resize(rgb, (x1 - x0, y1 - y0), interpolation=cv2.INTER_NEAREST if layout.scale > 1
                             else cv2.INTER_AREA)
        frame[y0:y1, x0:x1] = rgb
    _panel(frame, overlay, layout)
    return frame


def _panel(frame: np.ndarray, overlay: Overlay, layout: Layout) -> None:
    x = PANEL_PAD
    for camera in CAMERA_NAMES:
        x0, _, x1, _ = layout.camera_box(camera)
        label = f"{CAMERA_LABELS[camera]} camera"
        _put(frame, label, (x0 + x1 - _text_width(label)) // 2, layout.row_y(0), CAMERA_LABEL)
    clock = f"t = {overlay.t_s:6.2f} s"
    _put(frame, overlay.title, x, layout.row_y(1))
    _put(frame, clock, layout.width - PANEL_PAD - _text_width(clock), layout.row_y(1))
    chars = max(20, (layout.width - 2 * PANEL_PAD) // 9)
    lines = textwrap.wrap(f'"{overlay.instruction}"', chars) or ['""']
    if len(lines) > 2:
        lines = [lines[0], lines[1][: chars - 3] + "..."]
    for k, line in enumerate(lines):
        _put(frame, line, x, layout.row_y(2 + k), INSTRUCTION)
    for slot, stage in enumerate(overlay.stages[:STAGE_SLOTS]):
        x0, y0, x1, y1 = layout.stage_box(slot)
        frame[y0:y1, x0:x1] = STATE_COLOURS[stage.state]
        _put(frame, stage.state.upper(), x0 + 6, layout.row_y(FIRST_STAGE_ROW + slot), (255, 255, 255))
        _put(frame, f"{stage.name}   intent {stage.intent:.2f}/{stage.intent_max:.2f}   "
                    f"exec {stage.exec:.2f}/{stage.exec_max:.2f}", x1 + 10, layout.row_y(FIRST_STAGE_ROW + slot))
    if not overlay.stages:
        _put(frame, "stages: no score recorded", x, layout.row_y(FIRST_STAGE_ROW))
    live = "now: no score yet" if overlay.live is None else f"now IS {overlay.live[0]:.2f}  ES {overlay.live[1]:.2f}"
    if overlay.final is None:
        final = "final: not recorded"
    else:
        final = (f"final IS {overlay.final[0]:.2f}  ES {overlay.final[1]:.2f}  "
                 f"{'complete' if overlay.final[2] else 'not complete'}")
    _put(frame, live, x, layout.row_y(PANEL_ROWS - 1))
    _put(frame, final, layout.width - PANEL_PAD - _text_width(final), layout.row_y(PANEL_ROWS - 1))


def contact_sheet(frames: Sequence[np.ndarray], header: Sequence[str], columns: int = 2) -> np.ndarray:
    """A few composed frames (each already saying its time and stage states) at half size in a grid, under
    ``header`` lines."""
    if not frames:
        raise ValueError("contact sheet: no frames")
    small = [cv2.resize(f, (f.shape[1] // 2, f.shape[0] // 2), interpolation=cv2.INTER_AREA) for f in frames]
    h, w = small[0].shape[:2]
    rows = math.ceil(len(small) / columns)
    gap = 6
    top = PANEL_PAD + len(header) * ROW_H + gap
    sheet = np.empty((top + rows * (h + gap), columns * w + (columns + 1) * gap, 3), np.uint8)
    sheet[:] = BACKGROUND
    for k, line in enumerate(header):
        _put(sheet, line, gap, PANEL_PAD + (k + 1) * ROW_H - 6, INSTRUCTION if k == 1 else TEXT)
    for k, img in enumerate(small):
        r, c = divmod(k, columns)
        y, x = top + r * (h + gap), gap + c * (w + gap)
        sheet[y:y + h, x:x + w] = img
    return sheet


def sheet_indices(frames: int, count: int = 6) -> list[int]:
    """``count`` evenly spaced frame indices from the first to the last (fewer when there are fewer frames)."""
    if frames <= 0:
        return []
    count = min(count, frames)
    return sorted({round(i * (frames - 1) / max(1, count - 1)) for i in range(count)})
