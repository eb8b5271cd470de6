"""Executing OWDA decisions in SAPIEN with the oracle's planner, checked step by step against the world model."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.execute import execute_decision
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.tasks import Family


@pytest.fixture(scope="module")
def suite(owda_suite_seed0: Suite) -> Suite:
    return owda_suite_seed0


def _first(suite: Suite, pred: Callable[[Family, Anchor], bool]) -> tuple[Family, Anchor]:
    anchors = {a.anchor_id: a for a in suite.anchors}
    return next((f, anchors[f.anchor_id]) for f in suite.families if pred(f, anchors[f.anchor_id]))


def _stacked_pair_picked(f: Family, a: Anchor) -> bool:
    chosen = set(f.instances[0].decision)
    return a.kind == "object_centric" and any(o.on_top_of in chosen and o.name in chosen for o in a.objects)


def _push_and_stack(f: Family, a: Anchor) -> bool:
    verbs = {x.split(":")[0] for x in f.instances[0].decision}
    return a.kind == "action_sequence" and f.ops == ("N",) and {"push", "stack"} <= verbs


def _sphere_set_back_then_more(f: Family, a: Anchor) -> bool:
    """A sphere lifted and set back early in the sequence: it must stay put while the arm works beside it."""
    decision = f.instances[0].decision
    return a.kind == "action_sequence" and len(decision) >= 3 and decision[0].startswith("lift:") \
        and a.object(decision[0].split(":")[1]).shape == "sphere"


SAMPLE = {  # the first family of the suite of each kind, both its base and its one-word change
    "E+N+Q on an object-centric anchor": lambda f, a: f.type == "E+N+Q",
    "a top object and its base both picked": _stacked_pair_picked,
    "an action sequence with a push and a stack": _push_and_stack,
    "a sphere set back, then more actions": _sphere_set_back_then_more,
}


@pytest.mark.parametrize("kind", list(SAMPLE))
def test_sampled_decisions_execute_and_match_the_world_model(suite: Suite, kind: str) -> None:
    family, anchor = _first(suite, SAMPLE[kind])
    for inst in (family.instances[0], family.instances[2]):
        report = execute_decision(anchor, inst.decision, spec=inst.spec)
        assert report["satisfied"], (inst.text, report)
        assert report["initial_state"] == "matches the anchor"
        if anchor.kind == "object_centric":
            assert report["lifted"] == sorted(inst.decision)
            set_aside = {s["action"].split()[0].removeprefix("lift:") for s in report["steps"]
                         if "set aside" in s["action"]}
            assert set_aside == {n for n in inst.decision if anchor.object(n).on_top_of in inst.decision}
        else:
            assert [s["action"] for s in report["steps"]] == list(inst.decision)


def test_the_check_catches_a_decision_that_is_not_the_expected_one(suite: Suite) -> None:
    family, anchor = _first(suite, lambda f, a: f.ops == ("N",) and a.kind == "object_centric")
    base, changed = family.instances[0], family.instances[2]
    report = execute_decision(anchor, changed.decision, expected=base.decision)
    assert all(s["ok"] for s in report["steps"])  # the primitives ran fine ...
    assert not report["satisfied"]  # ... but the state is the changed instruction's, not the base's
    assert report["lifted"] == sorted(changed.decision)


def test_a_step_whose_precondition_is_false_in_the_world_model_is_not_run(suite: Suite) -> None:
    family, anchor = _first(suite, lambda f, a: a.kind == "action_sequence" and any(
        a.action(x).requires for x in f.instances[0].decision))
    decision = family.instances[0].decision
    needy = next(x for x in decision if anchor.action(x).requires)
    report = execute_decision(anchor, (needy,))  # without what it requires
    assert not report["satisfied"] and len(report["steps"]) == 1
    detail = report["steps"][0]["detail"]
    assert detail.startswith("world: ") and ("rests on" in detail or "is not empty" in detail), detail
    assert report["lifted"] == []  # nothing moved in the simulator


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


def test_an_anchor_built_alone_is_the_suites_own(suite: Suite) -> None:
    """``owda execute --anchor`` builds the anchors up to the one asked for (not all 85): each must be the
    very anchor of the whole suite, and the ids listed without building any must be the suite's."""
    from robofollow_ros.decisions.authoring import authored_anchor_ids, authored_anchors

    assert authored_anchor_ids(0) == [a.anchor_id for a in suite.anchors]
    by_id = {a.anchor_id: a for a in suite.anchors}
    first_action = next(a.anchor_id for a in suite.anchors if a.kind == "action_sequence")
    for anchor_id in ("oc01_scene1_default", first_action):
        built = authored_anchors(0, until=anchor_id)
        assert built[-1].anchor_id == anchor_id and built[-1].to_dict() == by_id[anchor_id].to_dict()
    assert len(authored_anchors(0, until="oc01_scene1_default")) == 1
