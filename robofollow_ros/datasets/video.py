"""Camera streams as MP4 with PyAV: encode one episode, concatenate episodes, probe a file.

Defaults follow LeRobot's recorder (``VideoEncoderConfig``): AV1 by ``libsvtav1``, ``yuv420p``,
a keyframe every 2 frames (``g=2``, so any frame decodes quickly), ``crf=30``, preset 12.
Episodes are concatenated by stream copy (no re-encoding), with every packet's time shifted by
the frames already in the file, so frame i of an episode sits at ``from_timestamp + i / fps``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.datasets.thread_priority import OrdinaryPriority

CODECS = ("libsvtav1", "h264")
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


@dataclass(frozen=True)
class VideoSettings:
    vcodec: str = "libsvtav1"
    pix_fmt: str = "yuv420p"
    g: int = 2
    crf: int = 30
    preset: int = 12

    def __post_init__(self) -> None:
        if self.vcodec not in CODECS:
            raise ValueError(f"--vcodec: {self.vcodec!r} is not one of {', '.join(CODECS)}")

    def options(self) -> dict[str, str]:
        if self.vcodec == "libsvtav1":
            return {"g": str(self.g), "crf": str(self.crf), "preset": str(self.preset)}
        return {"g": str(self.g), "crf": str(self.crf), "preset": "veryfast", "bf": "0"}

    def info_fields(self) -> dict[str, Any]:
        """The encoder settings LeRobot records beside the probed stream fields in ``info``."""
        return {"video.g": self.g, "video.crf": self.crf,
                "video.preset": self.preset if self.vcodec == "libsvtav1" else "veryfast",
                "video.fast_decode": 0, "video.video_backend": "pyav"}


def encode_frames(frames: np.ndarray, path: Path, fps: int, settings: VideoSettings) -> None:
    """Encode uint8 RGB frames [N, H, W, 3] (even H and W) into ``path``."""
    import av

    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(f"frames: expected uint8 [N>0, H, W, 3], got {frames.dtype} {frames.shape}")
    height, width = frames.shape[1:3]
    if height % 2 or width % 2:
        raise ValueError(f"frames: {width}x{height} must have an even width and height for yuv420p")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its banner per stream unless told errors only
    # SVT-AV1 run as root makes its threads real-time (thread_priority.py): put them back after each call.
    with OrdinaryPriority() as priority, av.open(str(path), "w") as container:
        stream: Any = container.add_stream(settings.vcodec, rate=fps, options=settings.options())
        stream.width, stream.height, stream.pix_fmt = width, height, settings.pix_fmt
        for index, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            packets = stream.encode(frame)
            priority.restore()
            for packet in packets:
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def concatenate(inputs: list[Path], output: Path, fps: int) -> list[tuple[float, float]]:
    """Stream-copy ``inputs`` one after another into ``output``; returns each input's (from, to) seconds."""
    import av

    ranges: list[tuple[float, float]] = []
    tmp = output.with_name(output.name + ".tmp.mp4")
    output.parent.mkdir(parents=True, exist_ok=True)
    start_frames = 0
    with av.open(str(tmp), "w", options={"movflags": "faststart"}) as out:
        out_stream = None
        for path in inputs:
            with av.open(str(path)) as src:
                stream: Any = src.streams.video[0]
                if out_stream is None:
                    out_stream = out.add_stream_from_template(stream, opaque=True)
                    out_stream.time_base = stream.time_base
                frames = stream.frames or probe_frame_count(path)
                offset = round(Fraction(start_frames, fps) / stream.time_base)
                for packet in src.demux(stream):
                    if packet.dts is None and packet.pts is None:
                        continue  # flush packet
                    packet.pts = None if packet.pts is None else packet.pts + offset
                    packet.dts = None if packet.dts is None else packet.dts + offset
                    packet.stream = out_stream
                    out.mux(packet)
            ranges.append((start_frames / fps, (start_frames + frames) / fps))
            start_frames += frames
    tmp.replace(output)
    return ranges


def probe(path: Path) -> dict[str, Any]:
    """The stream fields LeRobot reads from a video (``get_video_info``)."""
    import av

    with av.open(str(path)) as container:
        stream: Any = container.streams.video[0]
        has_audio = bool(container.streams.audio)
        return {"video.height": stream.height, "video.width": stream.width,
                "video.codec": stream.codec_context.codec.canonical_name, "video.pix_fmt": stream.pix_fmt,
                "video.is_depth_map": False, "video.fps": int(stream.base_rate or stream.average_rate),
                "video.channels": 3, "has_audio": has_audio}


def probe_frame_count(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def decode_all(path: Path, size: tuple[int, int] | None = None) -> np.ndarray:
    """Every frame of ``path`` as uint8 RGB [N, H, W, 3], resized to ``size`` (width, height) with area averaging
    as each frame is decoded (training reads whole files once). Resizing frame by frame keeps only the small
    frames: a dataset file of up to 200 MB of 320×240 AV1 holds over 100,000 frames, 25 GB and more at full size."""
    import av
    import cv2

    frames = []
    with av.open(str(path)) as container, _freed_full_frames():
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            rgb = frame.to_ndarray(format="rgb24")
            if size is not None and (rgb.shape[1], rgb.shape[0]) != tuple(size):
                rgb = cv2.resize(rgb, tuple(size), interpolation=cv2.INTER_AREA)
            frames.append(rgb)
    return np.stack(frames)


@contextlib.contextmanager
def _freed_full_frames() -> Iterator[None]:
    """glibc: while decoding, buffers from 32 KiB up get their own mappings, returned to the system when freed.

    Each full-size frame is freed at once, but glibc's heap leaves its hole behind the small kept frame that
    follows: 121,500 frames (one 220 MB file) held 7.4 GB resident for 1.1 GB of kept frames, 2.4 GB with
    this. Afterwards the threshold is glibc's own ceiling for large buffers (where its adjustment would go).
    Elsewhere (not glibc) nothing changes.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        yield
        return
    mallopt(M_MMAP_THRESHOLD, 32 * 1024)
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)
