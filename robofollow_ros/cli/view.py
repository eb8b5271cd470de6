"""``robofollow view RUN [RUN...] --out DIR``: a static run browser (docs/reports.md, "The run browser").

Every RUN is read and checked, and --out too, before anything is written; then the site is built beside DIR and
moved into place (``evaluation.view.site``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import SEED, CliError, integer, writing


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "view", help="a static run browser: Table 1 with n and intervals beside the published models, every trial "
                     "(video, stage timeline, verdict, marks, redos), paired comparisons, provenance",
        description="Write DIR/index.html, a self-contained site (no server, no network: open it from disk or serve "
                    "DIR with any web server) of one or more runs. With two runs or more, each later run is "
                    "compared with the first on the trials both ran (same task, round and seed).")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories (results.json; run.json, "
                   "summary.json, mcap/ and videos/ where they exist)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="folder for the site: new, empty, or a view written before (replaced)")
    p.add_argument("--bootstrap", type=integer(1, 1_000_000), default=10_000, metavar="N",
                   help="bootstrap resamples of the intervals (default 10000, as `report`)")
    p.add_argument("--seed", type=SEED, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=_view)


def _view(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation.view.runs import ViewInputError, load_run
    from robofollow_ros.evaluation.view.site import check_out, write_site

    try:
        runs = [load_run(path) for path in args.runs]
        check_out(args.out)
    except ViewInputError as exc:
        raise CliError(str(exc)) from None
    resolved = [r.path.resolve() for r in runs]
    if len(set(resolved)) < len(resolved):
        raise CliError("RUN: a run is given twice")
    with writing(args.out, "--out"):
        index = write_site(runs, args.out, args.bootstrap, args.seed)
    controls = sum(1 for r in runs for t in r.trials if t.get("control"))
    total = sum(len(r.trials) for r in runs) - controls
    print(f"view of {len(runs)} run{'s' if len(runs) != 1 else ''} ({total} trials"
          f"{f', and {controls} instruction-control trials' if controls else ''}): {index}")
    return 0
