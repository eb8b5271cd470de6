"""``robofollow report RUN_DIR --controls``: what a run's instruction controls measure (evaluation.control_stats)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import CliError, output_file, print_json, writing


def report_controls(args: argparse.Namespace, run_dir: Path, trials: list[dict[str, Any]]) -> int:
    """Text (or ``--json``), ``--csv DIR``/controls.csv and a PNG (``--png``, default RUN_DIR/controls.png)."""
    from robofollow_ros.evaluation.control_stats import (
        control_report,
        format_controls,
        plot_controls,
        write_controls_csv,
    )

    if args.tasks or args.failures or args.compare:
        raise CliError("--controls: not with --tasks, --failures or --compare (a view of its own)")
    report = control_report(trials, args.bootstrap, args.seed)
    if not report:
        raise CliError(f"RUN_DIR: {run_dir} has no control trials (run it with robofollow eval --controls)")
    png = Path(args.png) if args.png else run_dir / "controls.png"
    written: list[str] = []
    if not args.no_plot:
        output_file(png, "--png")
        with writing(png, "--png"):
            plot_controls(png, report, title=f"instruction controls: {run_dir.name}")
        written.append(str(png))
    csv_path = None
    if args.csv:
        with writing(args.csv, "--csv"):
            args.csv.mkdir(parents=True, exist_ok=True)
            csv_path = write_controls_csv(args.csv / "controls.csv", report)
    if args.json:
        print_json({"run": str(run_dir), "controls": report, "png": written[0] if written else None,
                    "csv": None if csv_path is None else str(csv_path)})
        return 0
    print(format_controls(report))
    for path in written:
        print(f"\nplot: {path}")
    if csv_path is not None:
        print(f"csv: {csv_path}")
    return 0
