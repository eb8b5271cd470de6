"""``robofollow report --table1 RUN... [--compare MODEL...] [--out DIR]``: the paper's Table 1 with the runs'
rows beside the published models (``evaluation/table1.py``), as text (or JSON), PNG and CSV."""

from __future__ import annotations

import argparse
from pathlib import Path

from robofollow_ros.cli._common import CliError, print_json, writing
from robofollow_ros.exit_status import EXIT_TRIALS_FAILED

PNG_NAME = "table1.png"
CSV_NAME = "table1.csv"


def table1(args: argparse.Namespace) -> int:
    from robofollow_ros.evaluation import comparability
    from robofollow_ros.evaluation import table1 as t1
    from robofollow_ros.evaluation.ranking import load_run
    from robofollow_ros.evaluation.report import protocol_differences, up_to_round
    from robofollow_ros.evaluation.report_views import cell_stats, executed_count

    if args.run_dir or args.compare_runs or args.rank or args.sim_real or args.tasks or args.failures or args.csv:
        raise CliError("--table1: give it alone with its runs (with --compare, --out, --json, --no-plot, "
                       "--bootstrap, --seed)")
    if args.png:
        raise CliError("--png: --table1 writes table1.png and table1.csv into --out DIR (default: the first run)")
    runs = [Path(d) for d in args.table1]
    out = Path(args.out) if args.out else runs[0]
    if out.exists() and not out.is_dir():
        raise CliError(f"--out: {out} is a file; give a directory")
    full = t1.protocol_n()
    rows: list[t1.Table1Row] = []
    warnings: list[str] = []
    try:
        loaded = [(label, up_to_round(trials, args.rounds))
                  for label, trials in (load_run(d, "--table1") for d in runs)]
        names = [d.name if [r.name for r in runs].count(d.name) == 1 else str(d) for d in runs]
        for name, d, (_, trials) in zip(names, runs, loaded, strict=True):
            if executed_count(trials) == 0:
                raise CliError(f"--table1: {d} has no executed trial ({len(trials)} recorded, none ran: nothing "
                               "to report)", exit_code=EXIT_TRIALS_FAILED)
            run = comparability.read_run_json(d)
            marks = t1.run_marks(name, run, trials)
            policy = (run or {}).get("policy")
            spec = policy.get("spec") if isinstance(policy, dict) else None
            rows += t1.run_rows(name, f"{t1.RUN_FAMILY}: {spec}" if spec else t1.RUN_FAMILY,
                                cell_stats(trials, args.bootstrap, args.seed), marks, full)
            warnings += [f"{name}: {d_}" for d_ in protocol_differences(run, trials)]
            if "privileged" in marks:
                warnings.append(f"{name} is privileged: its policy was given object poses and the task id; not an "
                                "instruction-following result, not comparable with the published models")
            warnings += [f"{name} ran on the rig {m[4:]}, not the protocol's (the built-in twin of RoboTwin's "
                         "aloha-agilex)" for m in marks if m.startswith("rig ")]
        rows += t1.published_rows(args.compare or None, full)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    except (ValueError, TypeError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None
    png, csv_path = out / PNG_NAME, out / CSV_NAME
    with writing(out, "--out"):
        out.mkdir(parents=True, exist_ok=True)
        t1.write_table1_csv(csv_path, rows)
        if not args.no_plot:
            t1.plot_table1(png, rows, warnings)
    if args.json:
        print_json({"rows": t1.table1_json(rows), "warnings": warnings, "csv": str(csv_path),
                    "png": None if args.no_plot else str(png)})
        return 0
    print(t1.format_table1(rows, warnings))
    print(f"\ncsv: {csv_path}" + ("" if args.no_plot else f"\nplot: {png}"))
    return 0
