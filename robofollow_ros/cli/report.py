"""``robofollow report RUN_DIR [--compare MODEL ...]``: Table 1 of a run and a comparison plot;
``robofollow report --compare-runs RUN_A RUN_B``: two runs of the same trials compared pair by pair;
``robofollow report --table1 RUN...``: the paper's Table 1 with the runs beside the published models."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from robofollow_ros.cli._common import SEED, CliError, integer, output_file, print_json, writing
from robofollow_ros.exit_status import EXIT_TRIALS_FAILED


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("report", help="scene x level IS/ES/CR table of a run, and a PNG beside published models")
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="a run directory holding results.json")
    p.add_argument("--compare-runs", nargs=2, metavar=("RUN_A", "RUN_B"), type=Path,
                   help="compare two runs of the same trials, paired by (task, seed): IS/ES differences with "
                        "paired-bootstrap 95%% intervals and an exact McNemar test on completion")
    p.add_argument("--rank", nargs="+", metavar="RUN", type=Path,
                   help="rank two or more runs with a Bradley-Terry model on trials paired by (task, seed), "
                        "task-bootstrap 95%% intervals, beside the published models' completion rates")
    p.add_argument("--sim-real", nargs=2, metavar=("SIM_RUN", "RIG_RUN"), type=Path,
                   help="a sim run against a rig run of the same tasks: per-task and per-level agreement, "
                        "Pearson r (Fisher-z 95%% interval), MMRV and a scatter plot")
    p.add_argument("--table1", nargs="+", metavar="RUN", type=Path,
                   help="the paper's Table 1: the runs' rows (n against the protocol's, 95%% intervals, marks for "
                        "privileged, subset, other rig or budget) beside the published models (all, or --compare); "
                        "also writes table1.png and table1.csv into --out")
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="--table1: where to write table1.png and table1.csv (default: the first RUN)")
    p.add_argument("--bootstrap", type=integer(1, 1_000_000), default=10_000, metavar="N",
                   help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", type=SEED, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--compare", nargs="+", default=[], metavar="MODEL",
                   help="published model ids or names from results.csv (e.g. PI05 PI0)")
    p.add_argument("--png", metavar="PATH", help="where to write the plot (default RUN_DIR/report.png; with "
                                                 "--compare-runs ./compare_<A>_vs_<B>.png)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--json", action="store_true", help="print the cells as JSON")
    p.add_argument("--tasks", action="store_true",
                   help="each task over its rounds: n, IS/ES/CR with 95%% intervals (instead of the table)")
    p.add_argument("--failures", action="store_true",
                   help="each failed trial: the stage that failed, the reason, its MCAP and video when present")
    p.add_argument("--controls", action="store_true",
                   help="the run's instruction controls (eval --controls): language reliance, swap sensitivity, "
                        "paraphrase invariance per scene x level, with n and 95%% intervals; writes controls.png")
    p.add_argument("--rounds", type=integer(1, 10), metavar="K",
                   help="only rounds 1..K of every task (with RUN_DIR or --table1): a run stopped part-way, which "
                        "eval runs round by round, reported on its whole rounds")
    p.add_argument("--csv", metavar="DIR", type=Path,
                   help="also write DIR/trials.csv, DIR/cells.csv and DIR/tasks.csv")
    p.set_defaults(func=_report)


def _run_record(run_dir: Path) -> dict[str, Any] | None:
    """The run's run.json when it has a readable one (a results.json alone is reported too)."""
    try:
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) else None


def _report(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation.operator_marks import disagreements
    from robofollow_ros.evaluation.report import (
        PRIVILEGED_MARK,
        is_privileged,
        plot_comparison,
        protocol_differences,
        published_table,
        run_table,
        up_to_round,
    )
    from robofollow_ros.evaluation.report_views import (
        cell_stats,
        executed_count,
        format_grid,
        format_intervals,
        published_cells,
    )
    from robofollow_ros.scoring.summary import summarize

    if args.table1:
        from robofollow_ros.cli._report_table1 import table1

        return table1(args)
    if args.out is not None:
        raise CliError("--out: only with --table1 (the other views take --png and --csv)")
    if args.rounds is not None and (args.compare_runs or args.rank or args.sim_real or args.controls):
        raise CliError(f"--rounds: {args.rounds}: only with RUN_DIR or --table1 (the paired views and --controls "
                       "take every trial they pair)")
    if args.rank or args.sim_real:
        return _rank_or_sim_real(args)
    if args.compare_runs:
        if args.run_dir or args.compare:
            raise CliError("--compare-runs: give either RUN_DIR (with --compare) or --compare-runs RUN_A RUN_B")
        return _compare_runs(args)
    if not args.run_dir:
        raise CliError("RUN_DIR: missing; give a run directory, or --compare-runs RUN_A RUN_B")
    run_dir = Path(args.run_dir)
    results_path = run_dir / "results.json"
    if not results_path.is_file():
        raise CliError(f"RUN_DIR: {run_dir} has no results.json")
    if args.csv is not None and args.csv.exists() and not args.csv.is_dir():
        raise CliError(f"--csv: {args.csv} is a file; give a directory")
    png = Path(args.png) if args.png else run_dir / "report.png"
    if not args.no_plot:
        output_file(png, "--png")
    try:
        everything = json.loads(results_path.read_text(encoding="utf-8"))
        if args.controls:
            from robofollow_ros.cli._report_controls import report_controls

            return report_controls(args, run_dir, everything)
        trials = [t for t in up_to_round(everything, args.rounds) if not t.get("control")]  # controls: --controls
        summary = summarize(trials)
    except (json.JSONDecodeError, ValueError, TypeError) as exc:
        raise CliError(f"RUN_DIR: {results_path} is not a RoboFollow results file: {exc}") from None
    if executed_count(trials) == 0:
        raise CliError(f"RUN_DIR: {run_dir} has no executed trial ({len(trials)} recorded, none ran: "
                       "nothing to report)", exit_code=EXIT_TRIALS_FAILED)
    stats = cell_stats(trials, args.bootstrap, args.seed)
    if args.tasks or args.failures or args.csv:
        code = _views(args, run_dir, trials, stats)
        if args.tasks or args.failures:
            return code
    table = run_table(summary)
    try:
        models = {m: published_table(m) for m in args.compare}
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    run = _run_record(run_dir)
    privileged = is_privileged(run)
    differences = protocol_differences(run, trials)
    disagreeing = disagreements(trials)
    label = f"{run_dir.name} (privileged)" if privileged else run_dir.name
    if not args.no_plot:
        with writing(png, "--png"):
            plot_comparison(png, table, models, run_label=label, stats=stats,
                            warnings=differences if models else ())
    if args.json:
        print_json({"run": table, "cells": stats, "trials": len(trials), "executed": executed_count(trials),
                    "models": {m: published_cells(c) for m, c in models.items()},
                    "png": None if args.no_plot else str(png),
                    "privileged": privileged, "protocol_differences": differences,
                    "operator_marks_disagreeing": disagreeing})
        return 0
    mark = f" — {PRIVILEGED_MARK}" if privileged else ""
    print(format_grid(f"run {run_dir} (IS/ES/CR, %){mark}", stats))
    print(format_intervals(stats, args.bootstrap))
    if privileged:
        print(f"note: {PRIVILEGED_MARK}: its policy was given the objects' poses and the task id")
    if models and differences:  # the published figures ran the whole protocol: say where this run does not
        for difference in differences:
            print(f"warning: this run is {difference}; the published figures below ran the whole protocol "
                  "(every task, 10 rounds, 10 calls of 50 rows, TOPP), so the cells are not directly comparable"
                  if difference.startswith("a subset") else
                  f"warning: this run differs from the published protocol: {difference}")
    if disagreeing:
        print("\noperator marks disagreeing with the verdict:")
        for line in disagreeing:
            print(f"  {line}")
    for name, cells in models.items():
        print()
        print(format_grid(f"published: {name} (IS/ES/CR, %; n of the protocol, no intervals published)",
                          published_cells(cells)))
    if not args.no_plot:
        print(f"\nplot: {png}")
    return 0


def _views(args: argparse.Namespace, run_dir: Path, trials: list[dict[str, Any]],
           stats: dict[str, Any]) -> int:
    """``--tasks``, ``--failures`` and ``--csv DIR`` (report_views)."""
    from robofollow_ros.evaluation.report_views import failures, format_failures, format_tasks, task_stats, write_csv

    tasks = task_stats(trials, args.bootstrap, args.seed)
    failed = failures(trials, run_dir)
    written: list[Path] = []
    if args.csv:
        with writing(args.csv, "--csv"):
            written = write_csv(args.csv, trials, run_dir, stats, tasks)
    if args.json and (args.tasks or args.failures):
        print_json({**({"tasks": tasks} if args.tasks else {}), **({"failures": failed} if args.failures else {}),
                    "trials": len(trials), "csv": [str(p) for p in written]})
        return 0
    if args.tasks:
        print(format_tasks(tasks))
    if args.failures:
        print(("\n" if args.tasks else "") + format_failures(failed, len(trials)))
    if written and not args.json:
        print("csv: " + ", ".join(str(p) for p in written))
    return 0


def _compare_runs(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation import comparability
    from robofollow_ros.evaluation.compare import (
        compare_runs,
        comparison_json,
        format_comparison,
        load_run_trials,
        plot_comparison,
    )

    run_a, run_b = args.compare_runs
    names = (str(run_a), str(run_b))
    png = Path(args.png) if args.png else Path(f"compare_{run_a.name}_vs_{run_b.name}.png")
    if not args.no_plot:
        output_file(png, "--png")
    try:
        trials_a, trials_b = load_run_trials(run_a), load_run_trials(run_b)
        cells = compare_runs(trials_a, trials_b, n_resamples=args.bootstrap, seed=args.seed, names=names)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    runs = [comparability.traits(name, comparability.read_run_json(d), t)
            for name, d, t in ((names[0], run_a, trials_a), (names[1], run_b, trials_b))]
    warnings = comparability.warnings(runs)
    if not args.no_plot:
        with writing(png, "--png"):
            plot_comparison(png, cells, names, warnings)
    if args.json:
        print_json({**comparison_json(cells, names), "png": None if args.no_plot else str(png),
                    "not_comparable": warnings})
        return 0
    for line in warnings:
        print(f"warning: not comparable: {line}")
    print(format_comparison(cells, names))
    if not args.no_plot:
        print(f"\nplot: {png}")
    return 0


def _rank_or_sim_real(args: argparse.Namespace) -> int:
    """``--rank RUN...`` and ``--sim-real SIM_RUN RIG_RUN`` (robofollow_ros.evaluation.ranking / simreal)."""
    flag = "--rank" if args.rank else "--sim-real"
    if args.run_dir or args.compare or args.compare_runs or (args.rank and args.sim_real):
        raise CliError(f"{flag}: give it alone (not with RUN_DIR, --compare, --compare-runs or the other of "
                       "--rank / --sim-real)")
    return _rank(args) if args.rank else _sim_real(args)


def _rank(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation import comparability
    from robofollow_ros.evaluation.ranking import (
        format_ranking,
        load_run,
        published_rows,
        rank_runs,
        ranking_json,
        unique_names,
    )

    if len(args.rank) < 2:
        raise CliError(f"--rank: need at least two runs, got {len(args.rank)}")
    if args.png:
        raise CliError("--png: --rank draws no plot")
    try:
        loaded = [load_run(d, "--rank") for d in args.rank]
        names = unique_names([label for label, _ in loaded], args.rank)
        runs = [comparability.traits(name, comparability.read_run_json(d), trials)
                for name, d, (_, trials) in zip(names, args.rank, loaded, strict=True)]
        ranking = rank_runs([trials for _, trials in loaded], names, [str(d) for d in args.rank],
                            n_resamples=args.bootstrap, seed=args.seed)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    published = published_rows()
    warnings = comparability.warnings(runs)
    marks = {r.name: r.tags for r in runs}
    if args.json:
        print_json({**ranking_json(ranking, published, marks), "not_comparable": warnings})
    else:
        for line in warnings:
            print(f"warning: not comparable: {line}")
        print(format_ranking(ranking, published, marks))
    return 0


def _sim_real(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation import comparability
    from robofollow_ros.evaluation.ranking import load_run
    from robofollow_ros.evaluation.simreal import format_sim_real, plot_sim_real, sim_real_json, sim_vs_real

    sim_dir, rig_dir = args.sim_real
    names = (str(sim_dir), str(rig_dir))
    png = Path(args.png) if args.png else Path(f"simreal_{sim_dir.name}_vs_{rig_dir.name}.png")
    if not args.no_plot:
        output_file(png, "--png")
    try:
        _, sim = load_run(sim_dir, "--sim-real")
        _, rig = load_run(rig_dir, "--sim-real")
        runs = [comparability.traits(name, comparability.read_run_json(d), t)
                for name, d, t in ((names[0], sim_dir, sim), (names[1], rig_dir, rig))]
        refused = comparability.other_policies(runs)
        if refused:
            raise ValueError(f"--sim-real: {refused}; sim against real compares one policy on two embodiments")
        result = sim_vs_real(sim, rig)
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    if not args.no_plot:
        with writing(png, "--png"):
            plot_sim_real(png, result, names)
    privileged = [line for line in comparability.warnings(runs, rigs=False) if " is privileged" in line]
    if args.json:
        print_json({**sim_real_json(result, names), "png": None if args.no_plot else str(png),
                    "not_comparable": privileged})
        return 0
    for line in privileged:
        print(f"warning: not comparable: {line}")
    print(format_sim_real(result, names))
    if not args.no_plot:
        print(f"\nplot: {png}")
    return 0
