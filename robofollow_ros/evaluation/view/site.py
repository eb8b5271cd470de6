"""Writes the site of ``robofollow view``: ``DIR/index.html`` (the data embedded as JSON), ``view.js``,
``view.css``, and under ``DIR/runs/<key>/`` each run's JSON files and its trial videos and contact sheets.

Self-contained: every link is relative and inside DIR, so it opens from disk (file://, which cannot fetch:
hence the embedded data) and from any web server. Videos are hard-linked where DIR is on the run's file
system, copied otherwise. The site is built in a temporary folder beside DIR and moved into place at the
end, so a failed build leaves DIR as it was; DIR may be new, empty or an earlier view (its marker file),
anything else is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from robofollow_ros.evaluation.view.page_data import page_data
from robofollow_ros.evaluation.view.runs import Run, ViewInputError
from robofollow_ros.monitoring.video_bag import safe_name
from robofollow_ros.rundir.layout import RESULTS_FILE, RUN_FILE, SUMMARY_FILE

#: The file that marks a folder as a view this command wrote (so a rebuild may replace it).
MARKER = ".robofollow-view"
ASSETS = ("view.js", "view.css")


def check_out(out: Path) -> None:
    """``out`` is new, an empty folder or an earlier view; else one-line :class:`ViewInputError`."""
    if out.exists() and not out.is_dir():
        raise ViewInputError(f"--out: {out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ViewInputError(f"--out: {out} is not empty and not a view written by `robofollow view` "
                             f"(no {MARKER}); give a new or empty folder")
    if out.parent.exists() and not out.parent.is_dir():
        raise ViewInputError(f"--out: {out.parent} is a file, not a folder")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _place(src: Path, dst: Path) -> None:
    """A hard link to ``src`` at ``dst`` where the file system allows, else a copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _localise(data: dict[str, Any], runs: Sequence[Run], root: Path) -> None:
    """Copies each run's JSON files and each trial's video and contact sheet under ``root/runs/<key>/`` and
    points the page at them (relative); the recording stays where it is, named by its path."""
    for run_data, run in zip(data["runs"], runs, strict=True):
        folder = root / "runs" / run_data["key"]
        folder.mkdir(parents=True)
        for name in (RUN_FILE, RESULTS_FILE, SUMMARY_FILE):
            if (run.path / name).is_file():
                shutil.copy2(run.path / name, folder / name)
        if not (folder / RUN_FILE).is_file():
            (folder / RUN_FILE).write_text("null\n", encoding="utf-8")
        for trial in run_data["trials"]:
            for kind in ("video", "sheet"):
                if kind in trial["files"]:
                    src = Path(trial["files"][kind])
                    rel = f"runs/{run_data['key']}/videos/{safe_name(trial['id'])}{src.suffix}"
                    _place(src, root / rel)
                    trial["files"][kind] = rel


def _embed(data: dict[str, Any]) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def write_site(runs: Sequence[Run], out: Path, n_resamples: int = 10_000, seed: int = 0) -> Path:
    """Builds the view of ``runs`` into ``out`` (checked by :func:`check_out` first); returns index.html."""
    out = Path(out)
    check_out(out)
    data = page_data(runs, n_resamples, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{out.name}.view-", dir=out.parent))
    try:
        _localise(data, runs, build)
        for name in ASSETS:
            (build / name).write_text(_asset(name), encoding="utf-8")
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        title = "RoboFollow view: " + ", ".join(r["label"] for r in data["runs"])
        page = (_asset("index.html").replace("__TITLE__", escape(title)).replace("__WHEN__", when)
                .replace("__DATA__", _embed(data)))
        (build / "index.html").write_text(page, encoding="utf-8")
        (build / MARKER).write_text(json.dumps({"runs": [r["dir"] for r in data["runs"]], "written": when}) + "\n",
                                    encoding="utf-8")
        build.chmod(0o755)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        out.rename(old / "view")
    try:
        build.rename(out)
    except BaseException:
        if old is not None:  # the earlier view back in its place
            (old / "view").rename(out)
        shutil.rmtree(build, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out / "index.html"
