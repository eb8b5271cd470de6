"""Trial videos: an MP4 and a contact sheet per recorded trial, for ``robofollow video`` and ``eval --video``.

A reviewer who reads "stage 1 missed" in a report wants to see it. So each trial of a recording becomes
``<out>/<trial>.mp4`` (the cameras side by side, the instruction, each stage's state as it evolved and the
final IS/ES burned in: ``monitoring.video_frames``; encoded by ``monitoring.video_mp4``) and
``<out>/<trial>.png``, a contact sheet of ``SHEET_FRAMES`` evenly spaced frames for a look without a player.
Both are written under a temporary name and renamed when complete, so a killed run never leaves a
half-written video where the report would link it.

The verdict is scored after the last camera picture (the trial ends, then it is scored), so a video of
the pictures alone would end with a failed stage still ``PENDING``. When the recording holds the final
score, the video therefore ends on the last picture **held** for ``HOLD_S`` with the final verdict: every
stage done or ``MISSED``, the final IS/ES and completion.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robofollow_ros.monitoring.video_bag import BagPlan, Clip, VideoBagError, frames
from robofollow_ros.monitoring.video_frames import Layout, Overlay, compose, contact_sheet, sheet_indices, stage_lines
from robofollow_ros.monitoring.video_mp4 import Mp4Writer, VideoInfo, nominal_fps
from robofollow_ros.rundir.atomic import write_bytes_atomic

#: Frames on a contact sheet.
SHEET_FRAMES = 6
#: Seconds the last picture is held with the final verdict (two frames: its start and its end).
HOLD_S = 1.5
HELD_FRAMES = 2


@dataclass(frozen=True)
class TrialVideo:
    trial: str
    mp4: Path
    sheet: Path
    info: VideoInfo
    bag: Path


def video_paths(out: Path, trial: str) -> tuple[Path, Path]:
    """The MP4 and the contact sheet of ``trial`` in ``out``."""
    return out / f"{trial}.mp4", out / f"{trial}.png"


def overlay_for(clip: Clip, stamp_ns: int, log_ns: int) -> Overlay:
    """What the frame at ``stamp_ns`` (logged at ``log_ns``) says: the stage states of the latest score then."""
    live = clip.live_at(log_ns)
    return Overlay(title=clip.name, instruction=clip.instruction, t_s=(stamp_ns - clip.stamps[0]) / 1e9,
                   stages=stage_lines(live, clip.stage_names),
                   live=None if live is None else (float(live.get("intent", 0.0)), float(live.get("exec", 0.0))),
                   final=clip.final)


def final_overlay(clip: Clip, t_s: float) -> Overlay | None:
    """The held frame's overlay: the latest score of the trial taken as final (a stage not done is missed);
    None when the recording has no final verdict (a trial cut short)."""
    if clip.final is None:
        return None
    last = dict(clip.scores[-1][1]) if clip.scores else {}
    last["final"] = True
    return Overlay(title=clip.name, instruction=clip.instruction, t_s=t_s,
                   stages=stage_lines(last, clip.stage_names), live=(clip.final[0], clip.final[1]), final=clip.final)


def write_videos(plans: Sequence[BagPlan], out: Path, say: Callable[[str], None] = lambda _line: None,
                 skip_bad: bool = False) -> list[TrialVideo]:
    """Every trial of every planned bag into ``out`` (created); ``say`` gets a line per trial. A picture that
    cannot be decoded raises ``VideoBagError``; with ``skip_bad`` that bag's remaining trials are said and skipped
    instead (``eval --video``: the run's results stand without them)."""
    out.mkdir(parents=True, exist_ok=True)
    total = sum(1 for plan in plans for clip in plan.clips if clip.frames)
    written: list[TrialVideo] = []
    for plan in plans:
        for clip in plan.clips:
            if not clip.frames:
                say(f"video: {clip.name} ({plan.path}): no {plan.clock} camera picture while it ran: no video")
        try:
            for video in _write_plan(plan, out):
                written.append(video)
                info = video.info
                say(f"video {len(written)}/{total}: {video.trial}: {info.frames} frames, {info.duration_s:.2f} s "
                    f"at {info.fps:.1f} fps, {info.codec} {info.width}x{info.height} -> {video.mp4} "
                    f"(+ {video.sheet.name})")
        except VideoBagError as exc:
            if not skip_bad:
                raise
            say(f"video: no video of the rest of {plan.path} ({exc})")
    return written


class _ClipWriter:
    """One clip's MP4 under a temporary name, and the frames its contact sheet shows."""

    def __init__(self, plan: BagPlan, clip: Clip, out: Path, first: np.ndarray) -> None:
        self.plan, self.clip = plan, clip
        self.mp4, self.sheet = video_paths(out, clip.name)
        self.tmp = out / f".{self.mp4.name}.{secrets.token_hex(4)}.tmp"
        height, width = first.shape[:2]
        self.layout = Layout.for_camera(width, height)
        self.fps = nominal_fps(clip.stamps)
        self.writer = Mp4Writer(self.tmp, self.layout.width, self.layout.height, self.fps)
        self.held = HELD_FRAMES if clip.final is not None else 0
        self.keep = set(sheet_indices(clip.frames + self.held, SHEET_FRAMES))
        self.kept: list[np.ndarray] = []
        self.index = 0
        self.last: tuple[dict[str, np.ndarray | None], int] | None = None

    def add(self, images: dict[str, np.ndarray | None], stamp_ns: int, log_ns: int) -> None:
        self._put(compose(images, overlay_for(self.clip, stamp_ns, log_ns), self.layout), stamp_ns)
        self.last = (images, stamp_ns)

    def _put(self, picture: np.ndarray, stamp_ns: int) -> None:
        self.writer.add(picture, stamp_ns)
        if self.index in self.keep:
            self.kept.append(picture)
        self.index += 1

    def _hold(self) -> None:
        """The last picture again, one frame period after it and ``HOLD_S`` later, with the final verdict."""
        if not self.held or self.last is None:
            return
        images, stamp_ns = self.last
        start = stamp_ns + round(1e9 / self.fps)
        for at in (start, start + round(HOLD_S * 1e9)):
            overlay = final_overlay(self.clip, (at - self.clip.stamps[0]) / 1e9)
            assert overlay is not None  # self.held: the clip has a final verdict
            self._put(compose(images, overlay, self.layout), at)

    def finish(self) -> TrialVideo:
        import cv2

        self._hold()
        info = self.writer.close()
        os.replace(self.tmp, self.mp4)
        final = self.clip.final
        verdict = "final: not recorded" if final is None else \
            f"final IS {final[0]:.2f}  ES {final[1]:.2f}  {'complete' if final[2] else 'not complete'}"
        header = [f"{self.clip.name}   {info.frames} frames, {info.duration_s:.2f} s   from {self.plan.path.name}",
                  f'"{self.clip.instruction}"', verdict]
        ok, png = cv2.imencode(".png", cv2.cvtColor(contact_sheet(self.kept, header), cv2.COLOR_RGB2BGR))
        if not ok:
            raise ValueError(f"{self.sheet}: PNG encoding failed")
        write_bytes_atomic(self.sheet, png.tobytes())
        return TrialVideo(self.clip.name, self.mp4, self.sheet, info, self.plan.path)

    def abandon(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def _write_plan(plan: BagPlan, out: Path) -> Iterator[TrialVideo]:
    """Yield each clip's video as it is finished (frames arrive clip after clip, in time order)."""
    current: _ClipWriter | None = None
    try:
        for frame in frames(plan):
            clip = plan.clips[frame.clip]
            if current is not None and current.clip is not clip:
                done, current = current, None
                yield done.finish()
            if current is None:
                picture = frame.images[plan.clock]
                assert picture is not None  # the clock camera's picture makes the frame
                current = _ClipWriter(plan, clip, out, picture)
            current.add(frame.images, frame.stamp_ns, frame.log_ns)
        if current is not None:
            done, current = current, None
            yield done.finish()
    finally:
        if current is not None:
            current.abandon()
