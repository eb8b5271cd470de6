"""Cross-run views refuse or loudly mark runs that are not comparable (issue 38): ``--rank`` tags a
privileged or subset run on its own row and says why; ``--compare-runs`` says why in text, JSON and PNG;
``--sim-real`` refuses two policies in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.cli import main
from robofollow_ros.evaluation.comparability import traits, warnings
from test_report_views import S1_L0, S1_L0_B, trial


def run_dir(path: Path, spec: str, *, privileged: bool = False, rig: str = "builtin", max_steps: int = 10,
            done: tuple[bool, ...] = (True, False, True)) -> Path:
    path.mkdir(parents=True)
    trials = [trial(cell, r, ok) for cell in (S1_L0, S1_L0_B) for r, ok in enumerate(done, start=1)]
    (path / "results.json").write_text(json.dumps(trials), encoding="utf-8")
    run: dict[str, Any] = {"policy": {"spec": spec, "kwargs": {}}, "privileged": privileged, "rig": {"name": rig},
                           "max_steps": max_steps, "actions_per_step": 50, "status": "complete",
                           "arguments": {"privileged": privileged}}
    (path / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return path


def test_rank_tags_a_privileged_subset_run_on_its_row_and_says_why(tmp_path: Path, capsys) -> None:
    plain = run_dir(tmp_path / "plain", "memorizer", done=(False, False, True))
    priv = run_dir(tmp_path / "priv", "oracle", privileged=True)
    assert main(["report", "--rank", str(plain), str(priv), "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "oracle" in line and "%" not in line[:4] and "  " in line)
    assert "oracle [privileged, subset]" in row
    assert "warning: not comparable: " in out and "is privileged" in out and "is a subset of the protocol" in out
    data_plain = main(["report", "--rank", str(plain), str(priv), "--json", "--bootstrap", "200"])
    data = json.loads(capsys.readouterr().out)
    assert data_plain == 0 and any("privileged" in line for line in data["not_comparable"])


def test_compare_runs_names_the_other_rig_and_budget(tmp_path: Path, capsys) -> None:
    a = run_dir(tmp_path / "a", "oracle")
    b = run_dir(tmp_path / "b", "memorizer", rig="aloha", max_steps=20)
    assert main(["report", "--compare-runs", str(a), str(b), "--no-plot", "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    assert f"warning: not comparable: rigs differ: {a} builtin, {b} aloha" in out
    assert "warning: not comparable: budgets differ" in out and "'max_steps': 20" in out


def test_sim_real_refuses_two_policies_in_one_line(tmp_path: Path, capsys) -> None:
    sim = run_dir(tmp_path / "sim", "oracle")
    rig = run_dir(tmp_path / "rig", "memorizer", rig="aloha")
    assert main(["report", "--sim-real", str(sim), str(rig), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"policies differ: {sim} oracle, {rig} memorizer" in err[0]
    same = run_dir(tmp_path / "rig2", "oracle", rig="aloha")
    assert main(["report", "--sim-real", str(sim), str(same), "--no-plot"]) == 0


@pytest.mark.parametrize("same", [True, False])
def test_comparable_runs_raise_no_warning_but_rigs_and_policies_are_checked_on_request(same: bool) -> None:
    trials = [trial(S1_L0, r, True) for r in range(1, 11)]
    base = {"policy": {"spec": "memorizer"}, "rig": {"name": "builtin"}, "max_steps": 10, "status": "complete"}
    other = base if same else {**base, "policy": {"spec": "pi0"}}
    runs = [traits("a", base, trials), traits("b", other, trials)]
    assert [w for w in warnings(runs) if "subset" not in w] == []  # policies differ by design in a comparison
    policy_lines = [w for w in warnings(runs, policies=True) if w.startswith("policies differ")]
    assert len(policy_lines) == (0 if same else 1)
