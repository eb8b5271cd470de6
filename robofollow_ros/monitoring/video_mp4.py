"""An MP4 that any player opens, written frame by frame with PyAV at the times the frames were recorded.

H.264 (``libx264``, in PyAV's wheels) when the installed PyAV has it, MPEG-4 part 2 otherwise; ``yuv420p``
(what browsers and players decode); ``+faststart`` (the index first, so a browser starts playing before the
file is loaded); no B-frames, so decode order is presentation order and the container's duration is exact
also when the frame times are irregular (with B-frames x264 invents decode times that cut it short).
Each frame's presentation time is its recorded time (a 90 kHz clock, the MPEG one): a recording at the
policy rate has a picture per policy call, one at ``--record-rate 10`` one every 0.1 s of robot time, and
the video plays either at the robot's speed. The nominal rate the file states is the
median of the recorded intervals; the last frame lasts that long too.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

#: The time base of the frames: 90 kHz.
CLOCK = Fraction(1, 90_000)
#: A clip of one frame (no interval to measure) plays at this rate.
DEFAULT_FPS = 10.0
PREFERRED_CODECS = ("libx264", "mpeg4")


def video_codec() -> str:
    """The first of ``PREFERRED_CODECS`` the installed PyAV can encode."""
    import av

    for name in PREFERRED_CODECS:
        try:
            av.codec.Codec(name, "w")
            return name
        except Exception:  # not built into this FFmpeg: the next one
            continue
    raise RuntimeError(f"PyAV {av.__version__} can encode none of {', '.join(PREFERRED_CODECS)}")


@dataclass(frozen=True)
class VideoInfo:
    codec: str
    frames: int
    width: int
    height: int
    fps: float
    #: First frame to the end of the last one, seconds.
    duration_s: float


def nominal_fps(times_ns: list[int]) -> float:
    """The median rate of the recorded frame times (``DEFAULT_FPS`` for fewer than two frames)."""
    steps = np.diff(np.asarray(times_ns, dtype=np.int64))
    steps = steps[steps > 0]
    return float(1e9 / np.median(steps)) if len(steps) else DEFAULT_FPS


class Mp4Writer:
    """``with Mp4Writer(path, width, height, fps) as out: out.add(rgb, t_ns)``; frames in time order."""

    def __init__(self, path: Path, width: int, height: int, fps: float) -> None:
        import av

        if width % 2 or height % 2:
            raise ValueError(f"video size: {width}x{height} must be even for yuv420p")
        self.path, self.width, self.height, self.fps = Path(path), width, height, fps
        self.codec = video_codec()
        self._container: Any = av.open(str(self.path), "w", format="mp4", options={"movflags": "+faststart"})
        options = {"crf": "23", "preset": "veryfast", "bf": "0"} if self.codec == "libx264" else {"qscale": "4"}
        stream: Any = self._container.add_stream(self.codec, rate=Fraction(fps).limit_denominator(1001),
                                                 options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.time_base = CLOCK
        self._stream = stream
        self._start: int | None = None
        self._last_pts = -1
        self.frames = 0

    def add(self, rgb: np.ndarray, t_ns: int) -> None:
        import av

        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"frame: expected uint8 {self.height}x{self.width}x3, got {rgb.dtype} {rgb.shape}")
        if self._start is None:
            self._start = t_ns
        pts = max(round((t_ns - self._start) * 90_000 / 1e9), self._last_pts + 1)  # strictly increasing
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts, frame.time_base = pts, CLOCK
        frame.duration = round(90_000 / self.fps)
        self._last_pts = pts
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames += 1

    def close(self) -> VideoInfo:
        if self._container is not None:
            try:
                for packet in self._stream.encode():
                    self._container.mux(packet)
            finally:
                self._container.close()
                self._container = None
        end = (self._last_pts + round(90_000 / self.fps)) / 90_000 if self.frames else 0.0
        return VideoInfo(self.codec, self.frames, self.width, self.height, self.fps, end)

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._container is not None:
            self.close()
