"""OWDA metrics: the reference decider scores 1.0 everywhere; ablating one operator costs exactly there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.deciders import ReferenceDecider, load_decider
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.evaluate import run_evaluation
from robofollow_ros.decisions.generator import Suite, generate_suite
from robofollow_ros.decisions.metrics import compute_metrics
from robofollow_ros.decisions.suite_io import write_suite


@pytest.fixture(scope="module")
def suite() -> Suite:
    return generate_suite(0)


@pytest.fixture(scope="module")
def suite_dir(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite")
    write_suite(suite, out)
    return out


def _values(m: dict) -> list[float]:  # type: ignore[type-arg]
    out = [m[k]["value"] for k in ("atomic_accuracy", "compositional_accuracy", "decision_invariance",
                                   "decision_sensitivity", "conditional_composition_success")]
    for group in ("by_k", "by_type", "atomic_by_op"):
        out += [e["value"] for e in m[group].values()]
    return out


def test_reference_decider_scores_one_on_every_metric(suite_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["owda", "eval", "--suite", str(suite_dir), "--model", "reference", "--output", str(tmp_path)]) == 0
    capsys.readouterr()
    # the same output directory refuses another model's run instead of mixing predictions
    assert main(["owda", "eval", "--suite", str(suite_dir), "--model", "ignore:N", "--output", str(tmp_path)]) == 2
    assert "holds another run" in capsys.readouterr().err
    assert main(["owda", "report", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    m = data["metrics"]
    assert _values(m) == [1.0] * len(_values(m))
    assert m["by_k"].keys() == {"2", "3"} and m["by_type"].keys() == {"E+N", "E+Q", "N+Q", "E+N+Q"}
    assert m["conditional_composition_success"]["families"] == 102
    assert m["atomic_accuracy"]["ci95"] == [1.0, 1.0]
    assert sum(1 for _ in (tmp_path / "predictions.jsonl").open()) == 3952 + 408
    assert main(["owda", "report", str(tmp_path)]) == 0
    assert "decision invariance (DI)           1.000" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["N", "E", "Q", "T"])
def test_ignoring_one_operator_fails_exactly_where_it_is_used(suite: Suite, tmp_path: Path, op: str) -> None:
    m = run_evaluation(suite, load_decider(f"ignore:{op}"), tmp_path)["metrics"]
    for name, entry in m["atomic_by_op"].items():
        if name == op:
            assert entry["value"] == 0.0, name  # every constraint is active: ignoring it is always wrong
        else:
            assert entry["value"] == 1.0, name
    for name, entry in m["by_type"].items():
        assert entry["value"] == (0.0 if op in name.split("+") else 1.0), name
    assert m["atomic_accuracy"]["value"] < 1.0
    assert m["decision_invariance"]["value"] < 1.0 and m["decision_sensitivity"]["value"] < 1.0
    lo, hi = m["atomic_accuracy"]["ci95"]
    assert lo < m["atomic_accuracy"]["value"] < hi
    if op == "T":
        assert m["compositional_accuracy"]["value"] == 1.0  # T never appears in a composition


def test_ccs_conditions_on_solved_constituents(suite: Suite) -> None:
    comp = next(f for f in suite.families if f.kind == "compositional")
    ids = [i.instance_id for f in suite.families for i in f.instances]
    correct = dict.fromkeys(ids, True)
    correct[comp.instances[3].instance_id] = False  # composition wrong while its constituents are right
    m = compute_metrics(suite.families, correct, reps=50)
    assert m["conditional_composition_success"]["value"] == pytest.approx(1 - 1 / 408)
    assert m["decision_invariance"]["value"] == pytest.approx(1 - 1 / (2 * 1090))
    assert m["decision_sensitivity"]["value"] == pytest.approx(1 - 1 / (2 * 1090))
    constituent = next(f for f in suite.families if f.family_id == comp.constituents[0])
    correct[constituent.instances[0].instance_id] = False  # now that family is no longer eligible
    m = compute_metrics(suite.families, correct, reps=50)
    users = [f for f in suite.families if f.kind == "compositional" and constituent.family_id in f.constituents]
    assert m["ccs_eligible_families"] == 102 - len(users)
    expected = 1.0 if comp in users else 1 - 1 / (4 * (102 - len(users)))
    assert m["conditional_composition_success"]["value"] == pytest.approx(expected)


def test_bootstrap_is_seeded(suite: Suite) -> None:
    ids = [i.instance_id for f in suite.families for i in f.instances]
    correct = {i: n % 3 != 0 for n, i in enumerate(ids)}
    a = compute_metrics(suite.families, correct, seed=5, reps=200)
    b = compute_metrics(suite.families, correct, seed=5, reps=200)
    c = compute_metrics(suite.families, correct, seed=6, reps=200)
    assert a == b
    assert a["atomic_accuracy"]["ci95"] != c["atomic_accuracy"]["ci95"]


def test_bad_model_specs_name_the_field(capsys: pytest.CaptureFixture[str], suite_dir: Path, tmp_path: Path) -> None:
    for spec, needle in (("ignore:X", "ignore:OP"), ("openai:ftp://x", "http(s) URL"),
                         ("openai:http://127.0.0.1:9/v1", "?model=NAME"), ("gpt", "unknown SPEC")):
        with pytest.raises(OwdaError, match="model"):
            load_decider(spec)
        assert main(["owda", "eval", "--suite", str(suite_dir), "--model", spec, "--output", str(tmp_path)]) == 2
        assert needle in capsys.readouterr().err
    assert isinstance(load_decider("reference"), ReferenceDecider)
    assert main(["owda", "report", str(tmp_path / "none")]) == 2
    assert "metrics.json" in capsys.readouterr().err
