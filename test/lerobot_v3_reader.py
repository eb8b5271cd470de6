"""An independent reader of LeRobot v3.0 datasets, run in .venv-reader (pyarrow, pandas, PyAV only).

It imports nothing from robofollow_ros: it follows LeRobot's documented layout and LeRobot's own
loading logic (lerobot.datasets: meta/info.json, tasks read with pandas as an index called "task",
episode rows giving index ranges and per-camera video time ranges, a frame of episode e at
``from_timestamp + timestamp`` within 1e-4 s) and prints a JSON report of what it found and every
inconsistency. Usage: ``python lerobot_v3_reader.py DATASET_ROOT [ARRAYS.npz]``; with ARRAYS.npz it also saves
what it read frame by frame: the state, action and episode_index columns and, per video key, every episode's
decoded frames in row order (every 4th pixel), for tests that check the content.
"""

import json
import sys
from pathlib import Path

import av
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

TOLERANCE_S = 1e-4
INFO_KEYS = ("codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks", "chunks_size",
             "data_files_size_in_mb", "video_files_size_in_mb", "fps", "splits", "data_path", "video_path",
             "features")
DEFAULTS = {"timestamp": "float32", "frame_index": "int64", "episode_index": "int64", "index": "int64",
            "task_index": "int64"}
STAT_NAMES = {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}


def main(root: Path, arrays: Path | None = None) -> dict:
    errors = []
    pictures: dict[str, list[np.ndarray]] = {}
    info = json.loads((root / "meta/info.json").read_text())
    errors += [f"info.json: missing {k}" for k in INFO_KEYS if k not in info]
    if info.get("codebase_version") != "v3.0":
        errors.append(f"info.json: codebase_version {info.get('codebase_version')!r}")
    fps = info["fps"]
    features = info["features"]
    for name, dtype in DEFAULTS.items():
        if features.get(name, {}).get("dtype") != dtype:
            errors.append(f"feature {name}: {features.get(name)}")
    video_keys = [k for k, ft in features.items() if ft["dtype"] == "video"]
    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    tasks.index.name = "task"
    task_of = {int(row.task_index): task for task, row in tasks.iterrows()}
    episodes = pd.concat([pd.read_parquet(p) for p in sorted((root / "meta/episodes").glob("*/*.parquet"))],
                         ignore_index=True)
    tables = [pq.read_table(p) for p in sorted((root / "data").glob("*/*.parquet"))]
    frames_total = sum(t.num_rows for t in tables)
    if frames_total != info["total_frames"]:
        errors.append(f"data: {frames_total} rows, info says {info['total_frames']}")
    if len(episodes) != info["total_episodes"] or len(tasks) != info["total_tasks"]:
        errors.append(f"meta: {len(episodes)} episodes / {len(tasks)} tasks vs info {info['total_episodes']} / "
                      f"{info['total_tasks']}")
    non_video = [k for k, ft in features.items() if ft["dtype"] != "video"]
    columns = {}
    for table in tables:
        if sorted(table.column_names) != sorted(non_video):
            errors.append(f"data columns {sorted(table.column_names)} != features {sorted(non_video)}")
        for k in non_video:
            ft = features[k]
            col = table.column(k).combine_chunks()
            scalar = ft["shape"] == [1]  # a bool column has no zero-copy view
            arr = col.to_numpy(zero_copy_only=False) if scalar else np.asarray(col.to_pylist(), dtype=ft["dtype"])
            if str(arr.dtype) != ft["dtype"] or (ft["shape"] != [1] and list(arr.shape[1:]) != ft["shape"]):
                errors.append(f"data {k}: {arr.dtype} {arr.shape[1:]} vs feature {ft['dtype']} {ft['shape']}")
            columns.setdefault(k, []).append(arr)
    columns = {k: np.concatenate(v) for k, v in columns.items()}
    decoded = {}
    report_videos = {k: [] for k in video_keys}
    for _, ep in episodes.iterrows():
        e = int(ep["episode_index"])
        lo, hi, length = int(ep["dataset_from_index"]), int(ep["dataset_to_index"]), int(ep["length"])
        rows = np.nonzero(columns["episode_index"] == e)[0]
        if hi - lo != length or len(rows) != length or (len(rows) and (rows[0] != lo or rows[-1] != hi - 1)):
            errors.append(f"episode {e}: range {lo}:{hi} length {length}, data rows {len(rows)}")
            continue
        if not np.array_equal(columns["frame_index"][lo:hi], np.arange(length)):
            errors.append(f"episode {e}: frame_index is not 0..{length - 1}")
        if not np.allclose(columns["timestamp"][lo:hi], np.arange(length) / fps, atol=TOLERANCE_S):
            errors.append(f"episode {e}: timestamp is not frame_index / fps")
        if not np.array_equal(columns["index"][lo:hi], np.arange(lo, hi)):
            errors.append(f"episode {e}: index is not {lo}..{hi - 1}")
        ep_tasks = {task_of[int(i)] for i in columns["task_index"][lo:hi]}
        if sorted(ep_tasks) != sorted(ep["tasks"]):
            errors.append(f"episode {e}: tasks {sorted(ep['tasks'])} vs frames' {sorted(ep_tasks)}")
        for key in video_keys:
            path = root / info["video_path"].format(video_key=key, chunk_index=int(ep[f"videos/{key}/chunk_index"]),
                                                    file_index=int(ep[f"videos/{key}/file_index"]))
            if path not in decoded:
                with av.open(str(path)) as container:
                    stream = container.streams.video[0]
                    decoded[path] = [(float(f.pts * f.time_base), f.to_ndarray(format="rgb24"))
                                     for f in container.decode(stream)]
            start, stop = float(ep[f"videos/{key}/from_timestamp"]), float(ep[f"videos/{key}/to_timestamp"])
            inside = [(t, f) for t, f in decoded[path] if start - TOLERANCE_S <= t < stop - TOLERANCE_S]
            report_videos[key].append(len(inside))
            pictures.setdefault(key, []).extend(f[::4, ::4] for _, f in inside)
            shape = list(features[key]["shape"])
            if any(list(f.shape) != shape for _, f in inside):
                errors.append(f"episode {e} {key}: frame shape differs from {shape}")
            times = np.array([t for t, _ in inside])
            wanted = start + columns["timestamp"][lo:hi].astype(np.float64)
            if len(times) != length or (len(times) and np.abs(times - wanted).max() > TOLERANCE_S):
                errors.append(f"episode {e} {key}: {len(times)} frames decoded in [{start}, {stop}) for {length} rows")
    if arrays is not None:
        np.savez_compressed(arrays, **{k: columns[k] for k in ("observation.state", "action", "episode_index")
                                       if k in columns}, **{k: np.stack(v) for k, v in pictures.items() if v})
    stats = json.loads((root / "meta/stats.json").read_text())
    for key, ft in features.items():
        if key not in stats or set(stats[key]) != STAT_NAMES:
            errors.append(f"stats.json {key}: {sorted(stats.get(key, {}))}")
            continue
        want = [3, 1, 1] if ft["dtype"] == "video" else list(ft["shape"])
        if list(np.shape(stats[key]["mean"])) != want or stats[key]["count"] != [
                info["total_frames"] if ft["dtype"] != "video" else stats[key]["count"][0]]:
            errors.append(f"stats.json {key}: mean shape {np.shape(stats[key]['mean'])}, count {stats[key]['count']}")
    return {"episodes": len(episodes), "frames": frames_total, "fps": fps,
            "tasks": [task_of[i] for i in sorted(task_of)],
            "episode_lengths": [int(v) for v in episodes["length"]], "features": sorted(features),
            "video_frames": report_videos, "state_mean": stats.get("observation.state", {}).get("mean"),
            "errors": errors}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)))
