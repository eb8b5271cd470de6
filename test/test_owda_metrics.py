"""OWDA metrics: the paper's definitions on hand-computed cases, the reader of replies, and end to end
(the reference decider scores 1.0 everywhere; ablating one operator costs exactly there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.deciders import ReferenceDecider, load_decider
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.evaluate import run_evaluation
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.metrics import compute_metrics
from robofollow_ros.decisions.prompt import read_reply
from robofollow_ros.decisions.solver import TaskSpec
from robofollow_ros.decisions.suite_io import write_suite
from robofollow_ros.decisions.tasks import ROLES, Family, Instance

SPEC = TaskSpec(("all",), ())


def _family(fid: str, anchor: str, kind: str, ops: tuple[str, ...], matched: list[list[str]] | None = None,
            constituents: tuple[str, ...] = ()) -> Family:
    insts = tuple(Instance(f"{fid}/{i}", ROLES[i], f"text {fid} {i}", SPEC, ("x",) if i < 2 else ("y",),
                           tuple(matched[i]) if matched else ()) for i in range(4))
    return Family(fid, kind, anchor, ops, ops[0], insts, constituents)


@pytest.fixture()
def tiny() -> list[Family]:
    """Two anchors: a1 holds atomic A1 (E), A2 (N) and composition C1 (E+N); a2 holds atomic A3 (Q)."""
    matched = [["A1/0", "A2/0"], ["A1/1", "A2/1"], ["A1/2", "A2/0"], ["A1/3", "A2/1"]]
    return [_family("A1", "a1", "atomic", ("E",)), _family("A2", "a1", "atomic", ("N",)),
            _family("A3", "a2", "atomic", ("Q",)),
            _family("C1", "a1", "compositional", ("E", "N"), matched, ("A1", "A2"))]


def _correct(pattern: dict[str, str]) -> dict[str, bool]:
    return {f"{fid}/{i}": flag == "1" for fid, flags in pattern.items() for i, flag in enumerate(flags)}


def test_metrics_follow_the_papers_formulas_on_a_hand_computed_case(tiny: list[Family]) -> None:
    correct = _correct({"A1": "1110", "A2": "1100", "A3": "1011", "C1": "1011"})
    m = compute_metrics(tiny, correct, reps=200)
    assert m["atomic_accuracy"]["value"] == pytest.approx(8 / 12)
    assert m["compositional_accuracy"]["value"] == pytest.approx(3 / 4)
    # DI: preserving pairs (0,1), (2,3) with both right: A1 1+0, A2 1+0, A3 0+1, C1 0+1
    assert m["decision_invariance"]["value"] == pytest.approx(4 / 8)
    # DS: changing pairs (0,2), (1,3) with both right: A1 1+0, A2 0+0, A3 1+0, C1 1+0
    assert m["decision_sensitivity"]["value"] == pytest.approx(3 / 8)
    # CCS per instance: C1/0 (A1/0, A2/0 right) right; C1/1 (A1/1, A2/1 right) wrong; C1/2 (A1/2, A2/0 right)
    # right; C1/3 is not counted, A1/3 is wrong
    assert m["conditional_composition_success"]["value"] == pytest.approx(2 / 3)
    assert m["ccs_eligible_instances"] == 3
    assert m["ccs_family_level"]["value"] is None  # A1 and A2 are not entirely right
    everything_atomic = _correct({"A1": "1111", "A2": "1111", "A3": "1111", "C1": "1011"})
    m = compute_metrics(tiny, everything_atomic, reps=50)
    assert m["conditional_composition_success"]["value"] == pytest.approx(3 / 4)
    assert m["ccs_family_level"]["value"] == pytest.approx(3 / 4)
    assert m["answers"] == {"ok": 16, "format_failure": 0, "invalid_decision": 0, "missing": 0}


def test_di_needs_identical_decisions_and_ds_different_ones(tiny: list[Family]) -> None:
    correct = _correct({"A1": "1111", "A2": "1111", "A3": "1111", "C1": "1111"})
    same = {i.instance_id: i.decision for f in tiny for i in f.instances}
    assert compute_metrics(tiny, correct, same, reps=20)["decision_invariance"]["value"] == 1.0
    split = dict(same)
    split["A3/3"] = ("z",)  # marked right, yet not the same decision as its preserving partner
    m = compute_metrics(tiny, correct, split, reps=20)
    assert m["decision_invariance"]["value"] == pytest.approx(7 / 8)
    alike = dict(same)
    alike["A3/2"] = ("x",)  # the same decision as the base: not the change the rewrite asks for
    assert compute_metrics(tiny, correct, alike, reps=20)["decision_sensitivity"]["value"] == pytest.approx(7 / 8)


def test_bootstrap_resamples_anchors_not_instances(tiny: list[Family]) -> None:
    correct = _correct({"A1": "1110", "A2": "1100", "A3": "1011", "C1": "1011"})
    acc = compute_metrics(tiny, correct, reps=400, seed=3)["atomic_accuracy"]
    # a1 holds 5 of 8 right, a2 3 of 4: resampling the two anchors gives 10/16, 8/12 or 6/8 and nothing else
    assert acc["anchors"] == 2 and acc["units"] == 12
    assert acc["ci95"] == [pytest.approx(10 / 16), pytest.approx(6 / 8)]
    assert compute_metrics(tiny, correct, reps=400, seed=3) == compute_metrics(tiny, correct, reps=400, seed=3)


def test_the_reader_takes_the_first_json_object_and_counts_failures_apart() -> None:
    objs = tuple(AnchorObject(n, "cube", "red", "", (0.1 * i, 0.0), "object") for i, n in enumerate("abc"))
    oc = Anchor("r_oc", "object_centric", "t", objs, provenance={"source": "t"})
    acts = tuple(CandidateAction(f"lift:{n}", "lift", n) for n in "abc")
    seq = Anchor("r_as", "action_sequence", "t", objs, acts, provenance={"source": "t"})
    cases = [
        (oc, 'The answer is {"decision": ["a", "b"]}. I chose them because they are red.', ("a", "b"), "ok"),
        (oc, '```json\n{"decision": ["c"], "why": "closest"}\n```', ("c",), "ok"),
        (oc, '{"decision": "b"}', ("b",), "ok"),
        (oc, 'Thinking {not json} then {"decision": ["a"]}', ("a",), "ok"),
        (oc, '{"decision": ["a", "a"]}', ("a",), "ok"),  # a set named twice is still that set
        (oc, "a, b", None, "format_failure"),
        (oc, '{"answer": ["a"]} {"decision": ["b"]}', None, "format_failure"),  # the first object decides
        (oc, '{"decision": [1, 2]}', None, "format_failure"),
        (oc, '{"decision": ["a", "purple"]}', None, "invalid_decision"),
        (oc, '{"decision": []}', None, "invalid_decision"),
        (seq, '{"decision": ["lift:b", "lift:a"]}', ("lift:b", "lift:a"), "ok"),
        (seq, '{"decision": ["lift:b", "lift:b"]}', None, "invalid_decision"),  # an action cannot run twice
    ]
    for anchor, reply, decision, status in cases:
        reading = read_reply(anchor, reply)
        assert (reading.decision, reading.status) == (decision, status), reply


@pytest.fixture(scope="module")
def suite(owda_suite_seed0: Suite) -> Suite:
    return owda_suite_seed0


@pytest.fixture(scope="module")
def suite_dir(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite")
    write_suite(suite, out)
    return out


def _values(m: dict) -> list[float]:  # type: ignore[type-arg]
    out = [m[k]["value"] for k in ("atomic_accuracy", "compositional_accuracy", "decision_invariance",
                                   "decision_sensitivity", "conditional_composition_success", "ccs_family_level")]
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
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert _values(m) == [1.0] * len(_values(m))
    assert m["by_k"].keys() == {"2", "3"} and m["by_type"].keys() == {"E+N", "E+Q", "N+Q", "E+N+Q"}
    assert m["ccs_eligible_instances"] == 408 and m["conditional_composition_success"]["units"] == 408
    assert m["atomic_accuracy"]["ci95"] == [1.0, 1.0] and m["atomic_accuracy"]["anchors"] == 85
    assert m["answers"]["ok"] == 4360
    assert sum(1 for _ in (tmp_path / "predictions.jsonl").open()) == 3952 + 408
    assert main(["owda", "report", str(tmp_path)]) == 0
    assert "decision invariance (DI)           1.000" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["N", "E", "Q", "T"])
def test_ignoring_one_operator_fails_exactly_where_it_is_used(suite: Suite, tmp_path: Path, op: str) -> None:
    m = run_evaluation(suite, load_decider(f"ignore:{op}"), tmp_path)["metrics"]
    for name, entry in m["atomic_by_op"].items():
        assert entry["value"] == (0.0 if name == op else 1.0), name  # every constraint is active
    for name, entry in m["by_type"].items():
        assert entry["value"] == (0.0 if op in name.split("+") else 1.0), name
    assert m["decision_invariance"]["value"] < 1.0 and m["decision_sensitivity"]["value"] < 1.0
    lo, hi = m["atomic_accuracy"]["ci95"]
    assert lo < m["atomic_accuracy"]["value"] < hi
    if op == "T":
        assert m["compositional_accuracy"]["value"] == 1.0  # T never appears in a composition
    else:  # compositions using op are wrong, but so is their op constituent: CCS counts only the others
        assert m["compositional_accuracy"]["value"] < 1.0
        assert m["conditional_composition_success"]["value"] == 1.0
        assert m["ccs_eligible_instances"] == 4 * sum(1 for f in suite.families
                                                      if f.kind == "compositional" and op not in f.ops)


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
