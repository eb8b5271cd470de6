"""Assemble staged episodes into one LeRobot v3.0 dataset (``lerobot_v3`` describes the layout).

Episodes are numbered in the order given (callers sort them, so the dataset does not depend on
which worker finished first). Frames go to ``data/chunk-000/file-000.parquet``, one row group per
episode (28 floats a frame: a million frames stay below ``data_files_size_in_mb``); each camera's
episodes are concatenated by stream copy into ``videos/<key>/chunk-000/file-NNN.mp4`` (a new file
past ``video_files_size_in_mb``).
``meta/info.json`` is written last: a dataset without it is visibly unfinished.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robofollow_ros.datasets import lerobot_v3 as v3
from robofollow_ros.datasets.staging import StagedEpisode
from robofollow_ros.datasets.video import VideoSettings, concatenate, probe
from robofollow_ros.rundir.layout import DATASET_META_FILE

_MB = 1024 * 1024


def _vector(values: np.ndarray) -> pa.Array:
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def _file_groups(sizes: list[float], limit_mb: float) -> list[int]:
    """File number of each item when files roll over before exceeding ``limit_mb``."""
    numbers, current, used = [], 0, 0.0
    for size in sizes:
        if used > 0 and used + size >= limit_mb:
            current, used = current + 1, 0.0
        numbers.append(current)
        used += size
    return numbers


def _chunk_file(number: int) -> dict[str, int]:
    return {"chunk_index": number // v3.DEFAULT_CHUNK_SIZE, "file_index": number % v3.DEFAULT_CHUNK_SIZE}


def write_tasks(root: Path, tasks: list[str]) -> None:
    """``meta/tasks.parquet`` as pandas writes a frame indexed by ``task`` with a ``task_index`` column."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                     "numpy_type": "int64", "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema([("task_index", pa.int64()), ("task", pa.string())],
                       metadata={b"pandas": json.dumps(pandas_meta).encode()})
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())},
                     schema=schema)
    _write_parquet(table, root / v3.TASKS_PATH)


def _write_parquet(table: pa.Table, path: Path, row_groups: list[int] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with pq.ParquetWriter(str(tmp), table.schema, compression="snappy") as writer:
        start = 0
        for rows in row_groups or [table.num_rows]:
            writer.write_table(table.slice(start, rows))
            start += rows
    tmp.replace(path)


def assemble(root: Path, episodes: list[StagedEpisode], fps: int, video: VideoSettings,
             extra_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the dataset for ``episodes`` (in this order) under ``root``; returns ``info.json``'s content."""
    if not episodes:
        raise ValueError("dataset: no episodes to write")
    root = Path(root)
    cameras = list(episodes[0].meta["cameras"])
    first_video = episodes[0].video(cameras[0]) if cameras else None
    height = width = 0
    if first_video is not None:
        info0 = probe(first_video)
        height, width = info0["video.height"], info0["video.width"]
    for ep in episodes:
        if ep.meta["cameras"] != cameras or int(ep.meta["fps"]) != fps:
            raise ValueError(f"episode {ep.key}: cameras {ep.meta['cameras']} at {ep.meta['fps']} fps differ from "
                             f"{cameras} at {fps} fps")
    tasks: list[str] = list(dict.fromkeys(ep.task for ep in episodes))
    task_index = {task: i for i, task in enumerate(tasks)}
    lengths = [ep.length for ep in episodes]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows: dict[str, list[Any]] = {k: [] for k in ("episode_index", "tasks", "length", "data/chunk_index",
                                                  "data/file_index", "dataset_from_index", "dataset_to_index")}
    # -- frames --------------------------------------------------------------------------------
    states, actions, per_episode_stats = [], [], []
    for ep in episodes:
        state, action = ep.arrays()
        if len(state) != ep.length:
            raise ValueError(f"episode {ep.key}: {len(state)} frames stored, episode.json says {ep.length}")
        states.append(state)
        actions.append(action)
    frame_index = np.concatenate([np.arange(n, dtype=np.int64) for n in lengths])
    episode_index = np.concatenate([np.full(n, i, dtype=np.int64) for i, n in enumerate(lengths)])
    columns = {
        v3.STATE_KEY: np.concatenate(states), v3.ACTION_KEY: np.concatenate(actions),
        "timestamp": (frame_index / fps).astype(np.float32), "frame_index": frame_index,
        "episode_index": episode_index, "index": np.arange(int(sum(lengths)), dtype=np.int64),
        "task_index": np.concatenate([np.full(n, task_index[ep.task], dtype=np.int64)
                                      for n, ep in zip(lengths, episodes, strict=True)]),
    }
    tagged = [ep.intervention() for ep in episodes]
    if any(t is not None for t in tagged):  # a takeover tag in some bag: every frame gets the feature
        columns[v3.INTERVENTION_KEY] = np.concatenate([t if t is not None else np.zeros(n, dtype=bool)
                                                       for t, n in zip(tagged, lengths, strict=True)])
    table = pa.table({k: (_vector(v) if v.ndim == 2 else pa.array(v)) for k, v in columns.items()})
    _write_parquet(table, root / v3.DATA_PATH.format(chunk_index=0, file_index=0), row_groups=lengths)
    for i, ep in enumerate(episodes):
        sl = slice(int(starts[i]), int(starts[i] + lengths[i]))
        stats = ep.stats()
        stats.update({k: v3.feature_stats(columns[k][sl]) for k in v3.DEFAULT_FEATURES})
        if v3.INTERVENTION_KEY in columns:
            stats[v3.INTERVENTION_KEY] = v3.feature_stats(columns[v3.INTERVENTION_KEY][sl].astype(np.float32))
        per_episode_stats.append(stats)
        rows["episode_index"].append(i)
        rows["tasks"].append([ep.task])
        rows["length"].append(ep.length)
        rows["data/chunk_index"].append(0)
        rows["data/file_index"].append(0)
        rows["dataset_from_index"].append(int(starts[i]))
        rows["dataset_to_index"].append(int(starts[i] + lengths[i]))
    # -- videos --------------------------------------------------------------------------------
    features = v3.robot_features(width, height, tuple(cameras))
    if v3.INTERVENTION_KEY in columns:
        features[v3.INTERVENTION_KEY] = dict(v3.INTERVENTION_FEATURE)
    for camera in cameras:
        key = v3.video_key(camera)
        sizes = [ep.video(camera).stat().st_size / _MB for ep in episodes]
        numbers = _file_groups(sizes, v3.DEFAULT_VIDEO_FILE_SIZE_IN_MB)
        for c in ("chunk_index", "file_index", "from_timestamp", "to_timestamp"):
            rows[f"videos/{key}/{c}"] = []
        for number in sorted(set(numbers)):
            members = [i for i, n in enumerate(numbers) if n == number]
            where = _chunk_file(number)
            path = root / v3.VIDEO_PATH.format(video_key=key, **where)
            ranges = concatenate([episodes[i].video(camera) for i in members], path, fps)
            for i, (start, stop) in zip(members, ranges, strict=True):
                if round((stop - start) * fps) != lengths[i]:
                    raise ValueError(f"episode {episodes[i].key}: {camera} video has {round((stop - start) * fps)} "
                                     f"frames for {lengths[i]} states")
        # Per-episode columns, in episode order: each file's clock restarts at 0.
        offsets: dict[int, float] = {}
        for i, number in enumerate(numbers):
            start = offsets.get(number, 0.0)
            rows[f"videos/{key}/chunk_index"].append(_chunk_file(number)["chunk_index"])
            rows[f"videos/{key}/file_index"].append(_chunk_file(number)["file_index"])
            rows[f"videos/{key}/from_timestamp"].append(start)
            rows[f"videos/{key}/to_timestamp"].append(start + lengths[i] / fps)
            offsets[number] = start + lengths[i] / fps
        info = probe(root / v3.VIDEO_PATH.format(video_key=key, **_chunk_file(0)))
        features[key]["info"] = {**info, **video.info_fields(), "is_depth_map": False}
    # -- per-episode stats, episode table, tasks, stats, info ---------------------------------
    for name in per_episode_stats[0]:
        for stat in per_episode_stats[0][name]:
            rows[f"stats/{name}/{stat}"] = [np.asarray(s[name][stat]).tolist() for s in per_episode_stats]
    rows["meta/episodes/chunk_index"] = [0] * len(episodes)
    rows["meta/episodes/file_index"] = [0] * len(episodes)
    _write_parquet(pa.table(rows), root / v3.EPISODES_PATH.format(chunk_index=0, file_index=0))
    write_tasks(root, tasks)
    merged = {name: v3.merge_stats([s[name] for s in per_episode_stats]) for name in per_episode_stats[0]}
    v3.write_json(root / v3.STATS_PATH, v3.stats_to_json(merged))
    info = v3.build_info(features, fps, len(episodes), int(sum(lengths)), len(tasks))
    if extra_meta is not None:
        v3.write_json(root / DATASET_META_FILE, extra_meta)
    v3.write_json(root / v3.INFO_PATH, info)
    return info
