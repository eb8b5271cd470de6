"""Read a LeRobot v3.0 dataset of this robot back into arrays (training reads it whole, once).

Checks what training relies on and names the first mismatch: ``codebase_version`` v3.0, a
14-value ``observation.state`` and ``action`` in ``contract.JOINT_NAMES`` order, and one video per
camera. Anything else in the dataset is ignored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robofollow_ros.contract import CAMERA_NAMES, JOINT_NAMES
from robofollow_ros.datasets import lerobot_v3 as v3


class DatasetError(ValueError):
    """The directory is not a usable LeRobot v3.0 dataset of this robot; the message names why."""


@dataclass
class LoadedDataset:
    root: Path
    fps: int
    state: np.ndarray  # [N, 14] float32
    action: np.ndarray  # [N, 14] float32
    episode_index: np.ndarray  # [N]
    episode_starts: np.ndarray  # [E]
    episode_lengths: np.ndarray  # [E]
    episode_tasks: list[str]
    images: dict[str, np.ndarray]  # camera -> [N, H, W, 3] uint8 (resized when asked)
    fingerprint: str


def read_info(root: Path) -> dict:
    path = Path(root) / v3.INFO_PATH
    if not path.is_file():
        raise DatasetError(f"--dataset: {root} has no {v3.INFO_PATH}; not a LeRobot dataset (or unfinished)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"--dataset: {path} is not readable JSON ({exc})") from None
    if info.get("codebase_version") != v3.CODEBASE_VERSION:
        raise DatasetError(f"--dataset: codebase_version {info.get('codebase_version')!r} in {path}; expected "
                           f"{v3.CODEBASE_VERSION!r}")
    features = info.get("features", {})
    for key in (v3.STATE_KEY, v3.ACTION_KEY):
        ft = features.get(key)
        names = list(ft.get("names") or []) if ft else []
        if not ft or list(ft.get("shape", [])) != [len(JOINT_NAMES)] or names != list(JOINT_NAMES):
            raise DatasetError(f"--dataset: feature {key!r} is {ft!r}; expected 14 values named {list(JOINT_NAMES)}")
    missing = [v3.video_key(c) for c in CAMERA_NAMES if features.get(v3.video_key(c), {}).get("dtype") != "video"]
    if missing:
        raise DatasetError(f"--dataset: no video feature {missing[0]!r}; the policy needs all three cameras")
    return info


def fingerprint(root: Path) -> str:
    """Identity of a dataset's content: its info.json and episode table (changes when anything is added)."""
    digest = hashlib.sha256((Path(root) / v3.INFO_PATH).read_bytes())
    for path in sorted((Path(root) / "meta" / "episodes").glob("*/*.parquet")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def load_dataset(root: Path, image_size: tuple[int, int] | None = None) -> LoadedDataset:
    """Everything in ``root``; camera frames resized to ``image_size`` (width, height) with area averaging."""
    import pyarrow.parquet as pq

    from robofollow_ros.datasets.video import decode_all

    root = Path(root)
    info = read_info(root)
    fps = int(info["fps"])
    tables = [pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet"))]
    episodes = [pq.read_table(p).to_pydict() for p in sorted((root / "meta" / "episodes").glob("*/*.parquet"))]
    if not tables or not episodes:
        raise DatasetError(f"--dataset: {root} has no data or episode files")
    columns = {k: np.concatenate([t.column(k).combine_chunks().to_numpy(zero_copy_only=False) for t in tables])
               for k in ("episode_index", "index")}
    state = np.concatenate([np.asarray(t.column(v3.STATE_KEY).to_pylist(), dtype=np.float32) for t in tables])
    action = np.concatenate([np.asarray(t.column(v3.ACTION_KEY).to_pylist(), dtype=np.float32) for t in tables])
    order = np.argsort(columns["index"], kind="stable")
    state, action, episode_index = state[order], action[order], columns["episode_index"][order]
    table = {k: [v for part in episodes for v in part[k]] for k in episodes[0]}
    ep_order = np.argsort(table["episode_index"])
    starts = np.asarray(table["dataset_from_index"], dtype=np.int64)[ep_order]
    lengths = np.asarray(table["length"], dtype=np.int64)[ep_order]
    tasks = [table["tasks"][i][0] for i in ep_order]
    images: dict[str, np.ndarray] = {}
    for camera in CAMERA_NAMES:
        key = v3.video_key(camera)
        decoded: dict[Path, np.ndarray] = {}
        parts = []
        for i in ep_order:
            path = root / info["video_path"].format(video_key=key, chunk_index=table[f"videos/{key}/chunk_index"][i],
                                                    file_index=table[f"videos/{key}/file_index"][i])
            if path not in decoded:
                decoded[path] = decode_all(path, image_size)
            first = round(table[f"videos/{key}/from_timestamp"][i] * fps)
            part = decoded[path][first:first + int(table["length"][i])]
            if len(part) != table["length"][i]:
                raise DatasetError(f"--dataset: {path} has {len(part)} frames for episode {table['episode_index'][i]} "
                                   f"of {table['length'][i]}")
            parts.append(part)
        images[camera] = np.concatenate(parts)
    return LoadedDataset(root, fps, state, action, episode_index, starts, lengths, tasks, images, fingerprint(root))

