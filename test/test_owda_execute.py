"""Executing OWDA decisions in SAPIEN with the oracle's planner, and checking the final state."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.execute import execute_decision
from robofollow_ros.decisions.generator import Suite, generate_suite
from robofollow_ros.decisions.tasks import Family


@pytest.fixture(scope="module")
def suite() -> Suite:
    return generate_suite(0)


def _first(suite: Suite, pred: Callable[[Family, Anchor], bool]) -> tuple[Family, Anchor]:
    anchors = {a.anchor_id: a for a in suite.anchors}
    return next((f, anchors[f.anchor_id]) for f in suite.families if pred(f, anchors[f.anchor_id]))


SAMPLE = {  # the first family of the suite of each kind, both its base and its one-word change
    "E+N+Q on an object-centric anchor": lambda f, a: f.type == "E+N+Q",
    "atomic N on an object-centric anchor": lambda f, a: f.ops == ("N",) and a.kind == "object_centric",
    "atomic T on an action-sequence anchor": lambda f, a: f.ops == ("T",),
    "atomic Q on an action-sequence anchor": lambda f, a: f.ops == ("Q",) and a.kind == "action_sequence",
}


@pytest.mark.parametrize("kind", list(SAMPLE))
def test_sampled_decisions_execute_and_satisfy_themselves(suite: Suite, kind: str) -> None:
    family, anchor = _first(suite, SAMPLE[kind])
    for inst in (family.instances[0], family.instances[2]):
        report = execute_decision(anchor, inst.decision)
        assert report["satisfied"], (inst.text, report)
        assert [s["action"] for s in report["steps"]] == [
            f"lift:{n}" for n in inst.decision] if anchor.kind == "object_centric" else list(inst.decision)
        if anchor.kind == "object_centric":
            assert report["lifted"] == sorted(inst.decision)


def test_the_check_catches_a_decision_that_is_not_the_expected_one(suite: Suite) -> None:
    family, anchor = _first(suite, SAMPLE["atomic N on an object-centric anchor"])
    base, changed = family.instances[0], family.instances[2]
    report = execute_decision(anchor, changed.decision, expected=base.decision)
    assert all(s["ok"] for s in report["steps"])  # the primitives ran fine ...
    assert not report["satisfied"]  # ... but the state is the changed instruction's, not the base's
    assert report["lifted"] == sorted(changed.decision)


def test_cli_execute_runs_an_instruction(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["owda", "execute", "--anchor", "oc01_scene1_default", "--sim", "--json",
                 "--instruction", "Collect all the objects. Avoid every cube."])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["satisfied"]
    assert report["decision"] == ["red_sphere", "red_cylinder", "green_sphere"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--anchor", "nope", "--instruction", "Pick up all the objects."], "--anchor: unknown anchor 'nope'"),
    (["--anchor", "oc01_scene1_default", "--instruction", "Dance."], "cannot read the base sentence"),
    (["--anchor", "oc01_scene1_default", "--instruction", "Pick up all the objects. Skip the purple cube."],
     "'the purple cube' names no single object"),
])
def test_cli_execute_bad_input_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    assert main(["owda", "execute", "--sim", *argv]) == 2
    assert needle in capsys.readouterr().err
