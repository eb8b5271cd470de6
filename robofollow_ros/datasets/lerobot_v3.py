"""The LeRobot v3.0 dataset format, as LeRobot's own code writes it (``lerobot.datasets``).

Layout under the dataset root::

    meta/info.json                                   schema, fps, counts, path templates
    meta/stats.json                                  per-feature min/max/mean/std/count/q01..q99
    meta/tasks.parquet                               task string (pandas index "task") -> task_index
    meta/episodes/chunk-000/file-000.parquet         one row per episode: length, tasks, index range,
                                                     data file, per-camera video file and time range
    data/chunk-000/file-000.parquet                  one row per frame, many episodes per file
    videos/<video_key>/chunk-000/file-000.mp4        one stream per camera, many episodes per file

Each frame row carries ``timestamp`` (frame_index / fps), ``frame_index`` (within the episode),
``episode_index``, ``index`` (global) and ``task_index``; a camera frame of episode e is found at
``from_timestamp(e) + timestamp`` in its video file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, JOINT_NAMES
from robofollow_ros.rundir.atomic import write_json_atomic

CODEBASE_VERSION = "v3.0"
ROBOT_TYPE = "robofollow_dual_arm"
DEFAULT_CHUNK_SIZE = 1000
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE_PATTERN + ".parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
#: LeRobot writes its ``meta/*.json`` with indent 4 (``lerobot.datasets.utils.write_json``).
JSON_INDENT = 4
STATE_KEY = "observation.state"
ACTION_KEY = "action"
#: Per frame, true where a person's teleoperation drove the arms (a takeover); only when a bag carries the tag.
INTERVENTION_KEY = "intervention"
INTERVENTION_FEATURE: dict[str, Any] = {"dtype": "bool", "shape": [1], "names": None}

#: Columns LeRobot adds to every frame (``lerobot.utils.constants.DEFAULT_FEATURES``).
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}


def video_key(camera: str) -> str:
    """``observation.images.<camera>``: LeRobot's key for a camera stream."""
    return f"observation.images.{camera}"


def camera_of(key: str) -> str:
    return key.removeprefix("observation.images.")


def robot_features(width: int, height: int, cameras: tuple[str, ...] = CAMERA_NAMES) -> dict[str, dict[str, Any]]:
    """The user features: 14-joint state and action, and one video per camera (HWC uint8 RGB)."""
    features: dict[str, dict[str, Any]] = {
        STATE_KEY: {"dtype": "float32", "shape": [len(JOINT_NAMES)], "names": list(JOINT_NAMES)},
        ACTION_KEY: {"dtype": "float32", "shape": [len(JOINT_NAMES)], "names": list(JOINT_NAMES)},
    }
    for camera in cameras:
        features[video_key(camera)] = {"dtype": "video", "shape": [height, width, 3],
                                       "names": ["height", "width", "channels"], "info": None}
    return features


def video_keys(features: dict[str, dict[str, Any]]) -> list[str]:
    return [key for key, ft in features.items() if ft["dtype"] == "video"]


def build_info(features: dict[str, dict[str, Any]], fps: int, total_episodes: int, total_frames: int,
               total_tasks: int) -> dict[str, Any]:
    """``meta/info.json`` (field order as LeRobot writes it)."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": ROBOT_TYPE,
        "total_episodes": total_episodes,
        "total_frames": total_frames,
        "total_tasks": total_tasks,
        "chunks_size": DEFAULT_CHUNK_SIZE,
        "data_files_size_in_mb": DEFAULT_DATA_FILE_SIZE_IN_MB,
        "video_files_size_in_mb": DEFAULT_VIDEO_FILE_SIZE_IN_MB,
        "fps": int(fps),
        "splits": {"train": f"0:{total_episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if video_keys(features) else None,
        "features": {**features, **DEFAULT_FEATURES},
    }


def write_json(path: Path, payload: Any) -> None:
    """Write JSON as LeRobot formats it (indent 4, non-ASCII kept, trailing newline), folders created.

    Atomic (``rundir.atomic``: temporary, fsync, rename), so a crash never leaves half a file, and a
    killed write's temporary is one the next holder of the dataset's lock sweeps.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload, indent=JSON_INDENT)


# ------------------------------------------------------------------------------------------- stats
def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """LeRobot's per-feature statistics of ``values`` [N, D] (or [N]) along the frame axis.

    A 1-D column keeps a length-1 axis (LeRobot's ``keepdims`` for scalars); ``count`` is ``[N]``.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    stats = {"min": array.min(axis=0), "max": array.max(axis=0), "mean": array.mean(axis=0),
             "std": array.std(axis=0), "count": np.array([array.shape[0]])}
    for q in QUANTILES:
        stats[f"q{round(q * 100):02d}"] = np.quantile(array, q, axis=0)
    return stats


def image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel statistics of uint8 frames [N, H, W, 3], scaled to [0, 1], shaped (3, 1, 1)."""
    pixels = np.asarray(frames, dtype=np.float64).reshape(-1, frames.shape[-1]) / 255.0
    stats = feature_stats(pixels)
    count = np.array([frames.shape[0]])
    return {k: (count if k == "count" else v.reshape(-1, 1, 1)) for k, v in stats.items()}


def sample_frames(frames: np.ndarray, max_frames: int = 100, max_side: int = 150) -> np.ndarray:
    """Evenly spaced frames, downsampled by striding, as LeRobot samples images for its stats."""
    index = np.unique(np.linspace(0, len(frames) - 1, min(len(frames), max_frames)).round().astype(int))
    picked = np.asarray(frames)[index]
    step = max(1, int(np.ceil(max(picked.shape[1], picked.shape[2]) / max_side)))
    return picked[:, ::step, ::step]


def merge_stats(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine per-episode statistics: exact min/max/mean/std, count-weighted quantiles (as LeRobot does)."""
    counts = np.array([float(p["count"][0]) for p in parts])
    weights = counts / counts.sum()
    mean = sum(w * p["mean"] for w, p in zip(weights, parts, strict=True))
    second = sum(w * (p["std"] ** 2 + p["mean"] ** 2) for w, p in zip(weights, parts, strict=True))
    merged = {"min": np.min([p["min"] for p in parts], axis=0), "max": np.max([p["max"] for p in parts], axis=0),
              "mean": mean, "std": np.sqrt(np.maximum(second - mean ** 2, 0.0)),
              "count": np.array([int(counts.sum())])}
    for key in parts[0]:
        if key.startswith("q"):
            merged[key] = sum(w * p[key] for w, p in zip(weights, parts, strict=True))
    return merged


def stats_to_json(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    return {key: {name: np.asarray(value).tolist() for name, value in per.items()} for key, per in stats.items()}
