"""``report --table1 RUN...`` (issue 38 item 2): the paper's Table 1 with real runs (the oracle and the
memorizer, physics only, two tasks of S2/L0 over two rounds) beside every published model, each run cell with
n against the protocol's n and its intervals, privileged / subset / other rig / other budget rows marked, and
the same table as CSV and PNG."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.cli import main
from robofollow_ros.evaluation import table1 as t1

DATA = Path(__file__).resolve().parents[1] / "robofollow_ros" / "benchmark" / "data"
TASKS = "L0_pickup_red_cylinder,L0_pickup_blue_cylinder"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("table1")
    out = {}
    for spec in ("oracle", "memorizer"):
        out[spec] = root / spec
        assert main(["eval", "--policy", spec, "--tasks", TASKS, "--rounds", "2", "--no-render", "--backend",
                     "inline", "--output", str(out[spec])]) == 0
    return out


def protocol_n(scene: str, level: str) -> int:
    """Tasks of the cell in the official task list x 10 rounds (read from the data, not the registry)."""
    tasks = json.loads((DATA / "evaluation_tasks.json").read_text(encoding="utf-8"))
    return 10 * sum(1 for t in tasks if t["scene"] == f"scene{scene[1]}" and t["level"] == level)


def table_json(run_dirs: list[Path], out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["report", "--table1", *map(str, run_dirs), "--out", str(out), "--json", "--bootstrap", "300",
                 *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_runs_stand_beside_every_published_model_in_the_papers_layout(runs, tmp_path, capsys) -> None:
    assert main(["report", "--table1", str(runs["oracle"]), str(runs["memorizer"]), "--out", str(tmp_path),
                 "--bootstrap", "300", "--no-plot"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["model", "family", "scene", "marks", "L0", "IS/ES/CR", "L1", "IS/ES/CR", "L2",
                                "IS/ES/CR", "L3", "IS/ES/CR"]
    body = lines[3:lines.index(next(line for line in lines if line.startswith("IS/ES/CR in")))]
    # the runs first: S1..S4 and mean each; the scene that ran and the mean followed by their intervals
    firsts = [line.split("  ")[0] for line in body[:14]]
    assert firsts == ["oracle"] * 2 + [""] + ["oracle"] * 3 + [""] + ["memorizer"] * 2 + [""] + ["memorizer"] * 3 + [""]
    assert all("95% CI" in body[i] and body[i].count("/") == 2 for i in (2, 6, 9, 13))
    n = len(json.loads((runs["memorizer"] / "results.json").read_text(encoding="utf-8")))
    s2 = re.split(r"\s{2,}", body[8].strip())
    assert s2[:4] == ["memorizer", "this package: memorizer", "S2", "subset"]
    assert s2[4].endswith(f" n={n}/{protocol_n('S2', 'L0')}") and s2[5:] == ["-"] * 3
    # every published model, its family and its values as results.csv has them, one row per scene and a mean
    with open(DATA / "results.csv", encoding="utf-8", newline="") as fh:
        published = list(csv.DictReader(fh))
    split = [re.split(r"\s{2,}", line.strip()) for line in body[14:]]
    assert len(split) == 5 * len({r["model"] for r in published})
    for row in published:
        line = next(c for c in split if c[0] == row["model"] and c[2] == row["scene"])
        level = int(row["level"][1])
        expected = "/".join(f"{float(row[k]):.1f}" for k in ("intent_score", "execution_score", "completion_rate"))
        assert line[1] == row["family"] and line[3 + level] == expected
    assert Counter(c[0] for c in split if c[2] == "mean") == Counter({r["model"] for r in published})


def test_privileged_and_subset_rows_are_marked_and_said(runs, tmp_path, capsys) -> None:
    data = table_json([runs["oracle"], runs["memorizer"]], tmp_path, capsys)
    marks = {(r["model"], r["scene"]): r["marks"] for r in data["rows"] if r["run"]}
    assert marks[("oracle", "S2")] == ["privileged", "subset"]  # the oracle reads true poses in process
    assert marks[("memorizer", "S2")] == ["subset"]
    assert marks[("memorizer", "mean")] == ["subset", "mean of S2"]  # the published mean is over four scenes
    assert any(w.startswith("oracle is privileged") for w in data["warnings"])
    assert sum("a subset of the protocol: 2 of the" in w for w in data["warnings"]) == 2
    assert all(r["marks"] == [] for r in data["rows"] if not r["run"])


def test_another_rig_and_budget_are_marked_and_a_full_cell_is_not(runs, tmp_path, capsys) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for name in ("results.json", "run.json"):
        (other / name).write_text((runs["memorizer"] / name).read_text(encoding="utf-8"), encoding="utf-8")
    run = json.loads((other / "run.json").read_text(encoding="utf-8"))
    (other / "run.json").write_text(json.dumps({**run, "rig": {"name": "aloha"}, "max_steps": 3}), encoding="utf-8")
    # the whole protocol of S2/L0: every task of the cell, 10 rounds
    trial = json.loads((runs["memorizer"] / "results.json").read_text(encoding="utf-8"))[0]
    tasks = [t for t in json.loads((DATA / "evaluation_tasks.json").read_text(encoding="utf-8"))
             if t["scene"] == "scene2" and t["level"] == "L0"]
    full = tmp_path / "full"
    full.mkdir()
    (full / "results.json").write_text(json.dumps([{**trial, "task": t["task_id"], "round": r, "seed": 100 * r}
                                                   for t in tasks for r in range(1, 11)]), encoding="utf-8")
    (full / "run.json").write_text(json.dumps({**run, "status": "complete", "expected_trials": 10 * len(tasks)}),
                                   encoding="utf-8")
    data = table_json([other, full], tmp_path / "out", capsys)
    marks = {(r["model"], r["scene"]): r["marks"] for r in data["rows"] if r["run"]}
    assert marks[("other", "S2")] == ["subset", "rig aloha", "budget"]
    assert marks[("full", "S2")] == []
    assert marks[("full", "mean")] == ["mean of S2"]
    cell = next(r for r in data["rows"] if r["model"] == "full" and r["scene"] == "S2")["cells"]["L0"]
    assert cell["n"] == cell["protocol_n"] == protocol_n("S2", "L0")
    assert any("ran on the rig aloha" in w for w in data["warnings"])
    assert any(w == "other: max_steps 3 (the protocol: 10)" for w in data["warnings"])


def test_csv_and_png_hold_the_same_table(runs, tmp_path, capsys) -> None:
    data = table_json([runs["memorizer"]], tmp_path, capsys, "--compare", "PI05", "GR00T N1.6")
    assert data["png"] == str(tmp_path / "table1.png") and (tmp_path / "table1.png").stat().st_size > 10_000
    with open(tmp_path / "table1.csv", encoding="utf-8", newline="") as fh:
        lines = list(csv.DictReader(fh))
    cells = {(r["model"], r["scene"], level): c for r in data["rows"] for level, c in r["cells"].items()}
    assert len(lines) == len(cells)
    for line in lines:
        cell = cells[(line["model"], line["scene"], line["level"])]
        for metric in ("IS", "ES", "CR"):
            assert float(line[metric]) == cell[metric]
        assert int(line["protocol_n"]) == cell["protocol_n"]
        if line["source"] == "run":
            for metric in ("IS", "ES", "CR"):
                lo, hi = float(line[f"{metric}_lo"]), float(line[f"{metric}_hi"])
                assert [lo, hi] == cell[f"{metric}_ci95"] and lo <= float(line[metric]) <= hi and hi - lo > 1.0
        else:
            assert line["IS_lo"] == "" and line["family"] in ("VLA", "WAM", "Control")
    assert {line["model"] for line in lines if line["source"] == "published"} == {"π₀.₅", "GR00T N1.6"}
    rows = [t1.Table1Row(r["model"], r["family"], r["scene"], r["cells"], r["marks"], r["run"]) for r in data["rows"]]
    fig = t1.table1_figure(rows, data["warnings"])
    drawn = fig.axes[0].tables[0].get_celld()
    texts = t1.table_cells(rows)
    assert [[drawn[(i + 1, j)].get_text().get_text() for j in range(len(t1.HEADER))] for i in range(len(texts))] \
        == texts


@pytest.mark.parametrize(("args", "message"), [
    (["--table1", "{tmp}/nope"], "--table1: {tmp}/nope has no results.json"),
    (["--table1", "{run}", "--out", "{tmp}/file"], "--out: {tmp}/file is a file; give a directory"),
    (["--table1", "{run}", "--compare", "PI9"], "--compare: unknown model 'PI9'"),
    (["--table1", "{run}", "--png", "{tmp}/x.png"], "--png: --table1 writes table1.png"),
    (["{run}", "--out", "{tmp}"], "--out: only with --table1"),
])
def test_bad_input_is_one_line_naming_the_field(runs, tmp_path, capsys, args, message) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    fill = {"tmp": str(tmp_path), "run": str(runs["memorizer"])}
    assert main(["report", *(a.format(**fill) for a in args)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message.format(**fill) in err[0]


def test_the_privileged_built_ins_are_the_ones_whose_class_declares_it() -> None:
    from robofollow_ros.policy.spec import _BUILTINS, PRIVILEGED_BUILTINS, spec_declares_privileged

    declared = set()
    for name, factory in _BUILTINS.items():
        policy = factory()
        if getattr(policy, "needs_privileged", False) is True:
            declared.add(name)
        # read from the class without building it: what the built policy declares
        assert spec_declares_privileged(name) == (name in declared), name
        assert spec_declares_privileged(f"latency:5:{name}") == (name in declared), name
    assert declared == PRIVILEGED_BUILTINS
    assert not spec_declares_privileged("tcp://127.0.0.1:1") and not spec_declares_privileged("x:y")


def test_run_json_records_privileged_from_the_policy(runs: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json says the in-process oracle was privileged (its policy declares it; no flag was given), and why;
    reports read that, not a list of names; the list speaks only for a run.json written before the field."""
    from robofollow_ros.evaluation import report
    from robofollow_ros.evaluation.run_record import new_run_record
    from robofollow_ros.policy import spec

    oracle = json.loads((runs["oracle"] / "run.json").read_text(encoding="utf-8"))
    memorizer = json.loads((runs["memorizer"] / "run.json").read_text(encoding="utf-8"))
    assert (oracle["privileged"], oracle["privileged_source"], oracle["arguments"]["privileged"]) == (
        True, "policy", False)
    assert "privileged.task_id" in oracle["policy"]["observation_keys"]  # what the oracle is handed, in process
    assert (memorizer["privileged"], memorizer["privileged_source"]) == (False, None)
    assert not any(k.startswith("privileged") for k in memorizer["policy"]["observation_keys"])
    monkeypatch.setattr(spec, "PRIVILEGED_BUILTINS", frozenset())  # the record alone says it
    assert report.is_privileged(oracle) and not report.is_privileged(memorizer)
    data = table_json([runs["oracle"]], tmp_path, capsys)
    assert all("privileged" in r["marks"] for r in data["rows"] if r["run"])
    monkeypatch.undo()
    older = {k: v for k, v in oracle.items() if k != "privileged_source"}  # before the field: the flag alone
    assert report.is_privileged({**older, "privileged": False})
    assert not report.is_privileged({k: v for k, v in memorizer.items() if k != "privileged_source"})
    # a resume of either form is the same run (nothing left to run: no worker is started)
    for record in (oracle, {**older, "privileged": False}):
        (runs["oracle"] / "run.json").write_text(json.dumps(record), encoding="utf-8")
        assert main(["eval", "--policy", "oracle", "--tasks", TASKS, "--rounds", "2", "--no-render", "--backend",
                     "inline", "--output", str(runs["oracle"]), "--resume"]) == 0, capsys.readouterr().err
    (runs["oracle"] / "run.json").write_text(json.dumps(oracle), encoding="utf-8")
    # the ROS graph's record (no settings: the trial manager): the policy's declaration, read from its class
    for policy, flag, want in (("oracle", False, (True, "policy")), ("latency:5:blind", False, (True, "policy")),
                               ("memorizer", False, (False, None)), ("hold", True, (True, "--privileged"))):
        run = new_run_record(arguments={"policy": policy, "privileged": flag}, selected_tasks=[], expected_trials=0,
                             stepper="direct")
        assert (run["privileged"], run["privileged_source"]) == want, policy


def test_rounds_reports_a_stopped_run_on_its_whole_rounds(runs, tmp_path, capsys) -> None:
    """``--rounds K`` keeps rounds 1..K of every task (eval runs round by round, so a stopped run holds whole
    rounds): n halves from the fixture's two rounds, and the subset warning says 1 of 10 rounds."""
    both = table_json([runs["memorizer"]], tmp_path / "both", capsys)
    first = table_json([runs["memorizer"]], tmp_path / "first", capsys, "--rounds", "1")
    cell = next(r["cells"]["L0"] for r in both["rows"] if r["run"] and r["scene"] == "S2")
    kept = next(r["cells"]["L0"] for r in first["rows"] if r["run"] and r["scene"] == "S2")
    assert cell["n"] == 4 and kept["n"] == 2 and kept["tasks"] == 2
    recorded = json.loads((runs["memorizer"] / "results.json").read_text(encoding="utf-8"))
    assert kept["CR_k"] == sum(t["completion_ok"] for t in recorded if t["round"] == 1)
    assert any("a subset of the protocol: 2 of the" in w and "1 of 10 rounds per task" in w for w in first["warnings"])
    assert main(["report", str(runs["memorizer"]), "--rounds", "1", "--json", "--no-plot", "--bootstrap", "300"]) == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 2


@pytest.mark.parametrize("extra", [["--rounds", "0"], ["--rounds", "11"], ["--controls", "--rounds", "1"]])
def test_rounds_out_of_range_or_with_a_paired_view_is_refused_naming_it(runs, capsys, extra) -> None:
    assert main(["report", str(runs["memorizer"]), "--no-plot", *extra]) == 2
    assert "--rounds" in capsys.readouterr().err
