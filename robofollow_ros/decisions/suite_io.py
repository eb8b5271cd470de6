"""Suite files: ``manifest.json`` (format, seed, counts), ``anchors.json`` and ``families.jsonl``.

JSON Lines for families so a reader can stream 1,090 families and an error can name the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.tasks import Family

SUITE_FORMAT = "owda-suite/1"


def write_suite(suite: Suite, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"format": SUITE_FORMAT, "seed": suite.seed, "counts": suite.counts(), "available": suite.available,
                "rejections": suite.rejections}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out_dir / "anchors.json").write_text(json.dumps([a.to_dict() for a in suite.anchors], indent=1) + "\n")
    with (out_dir / "families.jsonl").open("w") as fh:
        for f in suite.families:
            fh.write(json.dumps(f.to_dict(), separators=(",", ":")) + "\n")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise OwdaError(f"suite: missing file {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise OwdaError(f"suite: {path} is not valid JSON ({exc})") from None


def load_suite(suite_dir: Path) -> Suite:
    """Read a suite back; errors name the file (and line) at fault."""
    if not suite_dir.is_dir():
        raise OwdaError(f"suite: {suite_dir} is not a directory")
    manifest = _read_json(suite_dir / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != SUITE_FORMAT:
        raise OwdaError(f"suite: manifest.json field 'format' must be {SUITE_FORMAT!r}, "
                        f"got {manifest.get('format') if isinstance(manifest, dict) else manifest!r}")
    raw_anchors = _read_json(suite_dir / "anchors.json")
    if not isinstance(raw_anchors, list):
        raise OwdaError("suite: anchors.json must hold a list of anchors")
    anchors = tuple(Anchor.from_dict(a) for a in raw_anchors)
    families: list[Family] = []
    path = suite_dir / "families.jsonl"
    if not path.is_file():
        raise OwdaError(f"suite: missing file {path}")
    with path.open() as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                families.append(Family.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise OwdaError(f"suite: families.jsonl line {n}: {type(exc).__name__}: {exc}") from None
    raw = manifest.get("rejections", {})
    try:
        rejections = {str(k): {str(r): int(n) for r, n in v.items()} for k, v in raw.items()}
        available = {str(k): int(v) for k, v in manifest.get("available", {}).items()}
    except (AttributeError, TypeError, ValueError):
        raise OwdaError("suite: manifest.json fields 'rejections' and 'available' must map operators to counts") \
            from None
    suite = Suite(int(manifest.get("seed", 0)), anchors, tuple(families), rejections, available)
    if manifest.get("counts") and manifest["counts"] != suite.counts():
        raise OwdaError(f"suite: manifest.json counts {manifest['counts']} do not match the files {suite.counts()}")
    return suite
