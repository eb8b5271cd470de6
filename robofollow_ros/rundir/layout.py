"""Which files a run directory holds, named in one place.

Each command that writes a run directory owns a few names in it; the RoboFollow-wide ones (the lock)
are shared. Everything else a directory holds is either a result (kept, and what makes a directory
"not empty") or debris a killed writer left (:func:`is_debris`: the lock file, atomic-write
temporaries), which the next lock holder may remove.
"""

from __future__ import annotations

from pathlib import Path

from robofollow_ros.rundir.atomic import is_temporary

# -- every run directory -------------------------------------------------------------------------
#: The ``flock`` of the process writing the directory, naming it (``lock.RunDirLock``).
LOCK_FILE = ".robofollow.lock"

# -- robofollow eval and the ROS trial manager (``evaluation.results.RunWriter``) -----------------
RUN_FILE = "run.json"  # how the run was started, its status; also OWDA's run record
RESULTS_FILE = "results.json"
SUMMARY_FILE = "summary.json"
STORE_FILE = "results.sqlite"
#: The store and what SQLite keeps beside it (a run killed before recording anything may leave them).
STORE_FILES = (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal")
#: ``--record``: one MCAP per trial, ``<trial id>.mcap``.
RECORDINGS_DIR = "mcap"
#: ``--record --video`` (and ``robofollow video`` on a run's recordings): ``<trial id>.mp4`` and its contact
#: sheet ``<trial id>.png``; ``report --failures`` links the MP4.
VIDEOS_DIR = "videos"

# -- robofollow collect (the root of a LeRobot v3.0 dataset) --------------------------------------
#: RoboFollow's record beside LeRobot's ``meta/`` files: settings, episodes' provenance, failures.
DATASET_META_FILE = "meta/robofollow.json"
#: The object in :data:`DATASET_META_FILE` holding the settings a ``--resume`` must share.
COLLECT_IDENTITY_KEY = "collect"
#: Finished episodes, each whole, until the dataset is assembled (``datasets.staging``).
STAGING_DIR = ".staging"

# -- robofollow owda eval (its run record is RUN_FILE: model, suite seed, counts) -----------------
PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"


def is_debris(path: Path) -> bool:
    """What a killed writer can leave that is not a result: the lock file and atomic-write temporaries."""
    return path.name == LOCK_FILE or is_temporary(path)


def meaningful_entries(run_dir: Path) -> list[Path]:
    """Entries of ``run_dir`` that are not debris (an absent directory has none)."""
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if not is_debris(p))
