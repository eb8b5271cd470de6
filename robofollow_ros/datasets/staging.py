"""Finished episodes, each kept whole on disk until the dataset is assembled.

An episode is written into ``<staging>/<key>.partial/`` (state/action arrays, one MP4 per camera,
``episode.json`` with its task, provenance and statistics) and then renamed to ``<staging>/<key>/``:
a directory either exists complete or not at all, so a killed collection never leaves half an
episode behind, and ``--resume`` only has to skip the keys already there. A demonstration the
oracle failed leaves ``<key>.failed.json`` instead, so a resumed run does not try it again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robofollow_ros.datasets import lerobot_v3 as v3
from robofollow_ros.datasets.video import VideoSettings, encode_frames
from robofollow_ros.rundir.layout import STAGING_DIR


@dataclass(frozen=True)
class StagedEpisode:
    key: str
    path: Path
    meta: dict[str, Any]

    @property
    def length(self) -> int:
        return int(self.meta["length"])

    @property
    def task(self) -> str:
        return str(self.meta["task"])

    def intervention(self) -> np.ndarray | None:
        """Per frame, true where teleoperation drove it; None for an episode recorded without the tag."""
        if not self.meta.get("intervention"):
            return None
        with np.load(self.path / "frames.npz") as data:
            return data["intervention"].astype(bool)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        with np.load(self.path / "frames.npz") as data:
            return data["state"].astype(np.float32), data["action"].astype(np.float32)

    def video(self, camera: str) -> Path:
        return self.path / f"{camera}.mp4"

    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        return {k: {s: np.asarray(v) for s, v in per.items()} for k, per in self.meta["stats"].items()}


def staging_root(output: Path) -> Path:
    return Path(output) / STAGING_DIR


def stage_episode(staging: Path, key: str, task: str, state: np.ndarray, action: np.ndarray,
                  images: dict[str, np.ndarray], fps: int, video: VideoSettings,
                  provenance: dict[str, Any], intervention: np.ndarray | None = None) -> StagedEpisode:
    """Encode and store one finished episode atomically; returns it as staged."""
    state = np.asarray(state, dtype=np.float32)
    action = np.asarray(action, dtype=np.float32)
    if state.shape != action.shape or state.ndim != 2 or len(state) == 0:
        raise ValueError(f"episode {key}: state {state.shape} and action {action.shape} must be equal [N>0, 14]")
    for camera, frames in images.items():
        if len(frames) != len(state):
            raise ValueError(f"episode {key}: camera {camera} has {len(frames)} frames for {len(state)} states")
    if intervention is not None and len(intervention) != len(state):
        raise ValueError(f"episode {key}: intervention has {len(intervention)} frames for {len(state)} states")
    partial = staging / f"{key}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    tagged = {} if intervention is None else {"intervention": np.asarray(intervention, dtype=bool)}
    np.savez(partial / "frames.npz", state=state, action=action, **tagged)
    stats = {v3.STATE_KEY: v3.feature_stats(state), v3.ACTION_KEY: v3.feature_stats(action)}
    for camera, frames in images.items():
        encode_frames(frames, partial / f"{camera}.mp4", fps, video)
        stats[v3.video_key(camera)] = v3.image_stats(v3.sample_frames(frames))
    meta = {"key": key, "task": task, "length": len(state), "fps": int(fps), "cameras": sorted(images),
            "provenance": provenance, "stats": v3.stats_to_json(stats), "intervention": intervention is not None}
    (partial / "episode.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    final = staging / key
    shutil.rmtree(final, ignore_errors=True)
    partial.rename(final)
    return StagedEpisode(key, final, meta)


def mark_failed(staging: Path, key: str, reason: dict[str, Any]) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    v3.write_json(staging / f"{key}.failed.json", reason)


def load_staged(staging: Path) -> tuple[dict[str, StagedEpisode], dict[str, dict[str, Any]]]:
    """Complete episodes and failure records under ``staging``; leftovers of a killed write are removed."""
    done: dict[str, StagedEpisode] = {}
    failed: dict[str, dict[str, Any]] = {}
    if not staging.is_dir():
        return done, failed
    for entry in sorted(staging.iterdir()):
        if entry.name.endswith(".partial") or entry.name.endswith(".tmp"):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
        elif entry.name.endswith(".failed.json"):
            failed[entry.name.removesuffix(".failed.json")] = json.loads(entry.read_text(encoding="utf-8"))
        elif entry.is_dir() and (entry / "episode.json").is_file():
            meta = json.loads((entry / "episode.json").read_text(encoding="utf-8"))
            done[entry.name] = StagedEpisode(entry.name, entry, meta)
    return done, failed
