"""Solver, language and anchor checks of OWDA on small hand-built anchors (no generator involved)."""

from __future__ import annotations

import pytest

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction, check_anchor
from robofollow_ros.decisions.errors import AnchorError, ParseError, TaskError
from robofollow_ros.decisions.language import object_refs, parse, realise
from robofollow_ros.decisions.solver import Constraint, TaskSpec, solve
from robofollow_ros.decisions.templates import N_TEMPLATES

PROV = {"source": "sim_layout", "scene": "test", "layout": "hand", "seed": 0}


def _obj(name: str, shape: str, colour: str, x: float, y: float, **kw: object) -> AnchorObject:
    return AnchorObject(name, shape, colour, str(kw.get("size", "")), (x, y), str(kw.get("role", "object")),
                        kw.get("on_top_of"), kw.get("in_container"))  # type: ignore[arg-type]


@pytest.fixture()
def table() -> Anchor:
    """Corner distances from (-0.45, -0.30): a 0.33, b 0.41, c 0.45, d 0.61."""
    return Anchor("t_oc", "object_centric", "test", (
        _obj("a", "cube", "red", -0.14, -0.18),
        _obj("b", "sphere", "red", -0.14, -0.04),
        _obj("c", "cube", "yellow", -0.02, -0.18),
        _obj("d", "cube", "green", 0.10, -0.04),
        _obj("bowl", "bowl", "green", 0.2, -0.1, role="bowl"),
    ), provenance=PROV)


@pytest.fixture()
def chain() -> Anchor:
    """lift a; push c to d; stack b on c (after the push: c must not move loaded); place d in the bowl
    (after the push towards d: d must still be on the table)."""
    objs = (_obj("a", "cube", "red", -0.14, -0.18), _obj("b", "cylinder", "red", -0.14, -0.04),
            _obj("c", "cube", "yellow", -0.02, -0.18), _obj("d", "cube", "green", 0.10, -0.04),
            _obj("bowl", "bowl", "green", 0.2, -0.1, role="bowl"))
    acts = (CandidateAction("lift:a", "lift", "a"), CandidateAction("push:c->d", "push", "c", "d"),
            CandidateAction("stack:b->c", "stack", "b", "c", after=("push:c->d",)),
            CandidateAction("place:d->bowl", "place", "d", "bowl", after=("push:c->d",)))
    return Anchor("t_as", "action_sequence", "test", objs, acts, PROV)


def test_exclusion_inhibition_and_cardinality_compose_in_fixed_order(table: Anchor) -> None:
    assert solve(table, TaskSpec(("all",), ())) == ("a", "b", "c", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("E", names=("c",)),))) == ("a", "b", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("N", attr="colour", value="red"),))) == ("c", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("Q", k=2),))) == ("a", "b")
    # Q applies after E: excluding the closest object moves the cut
    assert solve(table, TaskSpec(("all",), (Constraint("E", names=("a",)), Constraint("Q", k=2)))) == ("b", "c")
    assert solve(table, TaskSpec(("shape", "cube"), (Constraint("N", attr="colour", value="yellow"),))) == ("a", "d")


def test_solver_names_the_failing_constraint(table: Anchor) -> None:
    cases = [(TaskSpec(("all",), (Constraint("Q", k=4),)), "Q", "between 1 and 3"),
             (TaskSpec(("shape", "cube"), (Constraint("E", names=("b",)),)), "E", "'b'"),
             (TaskSpec(("colour", "red"), (Constraint("N", attr="colour", value="red"),)), "N", "empty"),
             (TaskSpec(("all",), (Constraint("T", names=("a",), value="first"),)), "T", "action-sequence")]
    for spec, op, needle in cases:
        with pytest.raises(TaskError, match=needle) as err:
            solve(table, spec)
        assert err.value.constraint == op


def test_q_rejects_a_cut_between_objects_equally_far_from_the_corner(table: Anchor) -> None:
    twin = Anchor("t_tie", "object_centric", "test", (*table.objects[:4], _obj("e", "cube", "blue", -0.14, -0.181)),
                  provenance=PROV)
    with pytest.raises(TaskError, match="not unique") as err:
        solve(twin, TaskSpec(("all",), (Constraint("Q", k=1),)))
    assert err.value.constraint == "Q"


def test_picks_never_lift_a_support_under_an_object_that_stays_nor_reach_into_a_forbidden_bowl() -> None:
    anchor = Anchor("t_stack", "object_centric", "test", (
        _obj("base", "cube", "blue", -0.02, -0.06), _obj("top", "cylinder", "green", -0.02, -0.06, on_top_of="base"),
        _obj("inner", "cube", "red", -0.14, -0.06, in_container="bowl"), _obj("ball", "sphere", "red", -0.14, -0.18),
        _obj("bowl", "bowl", "green", -0.14, -0.06, role="bowl")), provenance=PROV)
    assert solve(anchor, TaskSpec(("all",), ())) == ("base", "top", "inner", "ball")
    with pytest.raises(TaskError, match="'top', which stays, rests on 'base'") as err:  # the cubes, not the top
        solve(anchor, TaskSpec(("shape", "cube"), ()))
    assert err.value.constraint == "scope"
    with pytest.raises(TaskError, match="'top', which stays, rests on 'base'") as err:
        solve(anchor, TaskSpec(("all",), (Constraint("E", names=("top",)),)))
    assert err.value.constraint == "E"
    # "do not touch anything green" removes the top and forbids the green bowl: nothing is executable with the base
    with pytest.raises(TaskError, match="world") as err:
        solve(anchor, TaskSpec(("all",), (Constraint("N", attr="colour", value="green"),)))
    assert err.value.constraint == "N"
    # without the base in scope, the inner cube still sits in the forbidden bowl
    with pytest.raises(TaskError, match="'inner' sits inside 'bowl', which the instruction forbids touching"):
        solve(anchor, TaskSpec(("colour", "red"), (Constraint("N", attr="colour", value="green"),)))
    # leaving the base alone while taking the top is fine: lifting the top off touches nothing that stays
    assert solve(anchor, TaskSpec(("all",), (Constraint("E", names=("base",)),))) == ("top", "inner", "ball")


def test_actions_follow_listed_order_under_relations_and_t(chain: Anchor) -> None:
    check_anchor(chain)
    assert solve(chain, TaskSpec(("all",), ())) == ("lift:a", "push:c->d", "stack:b->c", "place:d->bowl")
    last = TaskSpec(("all",), (Constraint("T", names=("lift:a",), value="last"),))
    assert solve(chain, last) == ("push:c->d", "stack:b->c", "place:d->bowl", "lift:a")
    first = TaskSpec(("all",), (Constraint("T", names=("stack:b->c",), value="first"),))
    with pytest.raises(TaskError, match="cannot go first") as err:
        solve(chain, first)
    assert err.value.constraint == "T"
    # an 'after' relation is only an order: dropping the push leaves stacking and placing executable
    assert solve(chain, TaskSpec(("all",), (Constraint("N", attr="verb", value="push"),))) == (
        "lift:a", "stack:b->c", "place:d->bowl")
    assert solve(chain, TaskSpec(("all",), (Constraint("N", attr="verb", value="push"),
                                            Constraint("T", names=("place:d->bowl",), value="first")))) == (
        "place:d->bowl", "lift:a", "stack:b->c")
    q = TaskSpec(("all",), (Constraint("N", attr="verb", value="lift"), Constraint("Q", k=2)))
    assert solve(chain, q) == ("push:c->d", "stack:b->c")
    # "do not touch d" also removes the push *towards* d: targets count as touched
    assert solve(chain, TaskSpec(("all",), (Constraint("N", attr="object", value="d"),))) == ("lift:a", "stack:b->c")


def test_removing_a_required_action_is_rejected_and_named() -> None:
    objs = (_obj("base", "cube", "blue", -0.02, -0.06), _obj("top", "cylinder", "green", -0.02, -0.06,
                                                              on_top_of="base"),
            _obj("x", "cube", "red", -0.14, -0.18), _obj("bowl", "bowl", "yellow", 0.1, -0.1, role="bowl"))
    acts = (CandidateAction("place:top->bowl", "place", "top", "bowl"),
            CandidateAction("push:base->x", "push", "base", "x", requires=("place:top->bowl",)),
            CandidateAction("lift:x", "lift", "x"))
    anchor = Anchor("t_req", "action_sequence", "test", objs, acts, PROV)
    check_anchor(anchor)
    assert solve(anchor, TaskSpec(("all",), ())) == ("place:top->bowl", "push:base->x", "lift:x")
    with pytest.raises(TaskError, match="precondition of remaining action 'push:base->x'") as err:
        solve(anchor, TaskSpec(("all",), (Constraint("N", attr="verb", value="place"),)))
    assert err.value.constraint == "N"
    # a catalog that omits the relation is caught by the world model when the solver runs the order
    loose = Anchor("t_loose", "action_sequence", "test", objs,
                   (CandidateAction("push:base->x", "push", "base", "x"), acts[0], acts[2]), PROV)
    with pytest.raises(TaskError, match="'top' rests on 'base'") as err:
        solve(loose, TaskSpec(("all",), ()))
    assert err.value.constraint == "world"


def test_every_template_reads_back(table: Anchor, chain: Anchor) -> None:
    refs = object_refs(table)
    assert refs["a"] == "the red cube" and refs["bowl"] == "the green bowl"
    assert len(set(refs.values())) == len(refs)
    specs = [TaskSpec(("all",), (Constraint("E", names=("c", "a")), Constraint("N", attr="shape", value="sphere"))),
             TaskSpec(("shape", "cube"), (Constraint("Q", k=2),)),
             TaskSpec(("colour", "red"), (Constraint("E", names=("b",)),)),
             TaskSpec(("all",), (Constraint("N", attr="colour", value="green"), Constraint("Q", k=1)))]
    as_specs = [TaskSpec(("all",), (Constraint("T", names=("push:c->d",), value="last"),)),
                TaskSpec(("all",), (Constraint("E", names=("place:d->bowl",)), Constraint("Q", k=1))),
                TaskSpec(("all",), (Constraint("N", attr="object", value="a"),)),
                TaskSpec(("all",), (Constraint("N", attr="verb", value="place"),))]
    texts = set()
    for anchor, group in ((table, specs), (chain, as_specs)):
        for spec in group:
            for t in range(N_TEMPLATES):
                text = realise(anchor, spec, t)
                texts.add(text)
                assert parse(anchor, text) == spec, text
    assert len(texts) == N_TEMPLATES * (len(specs) + len(as_specs))  # every template says it its own way
    assert realise(chain, as_specs[0], 2) == "Do the actions on the list. As the last step, push the yellow " \
                                            "cube to the green cube."


def test_same_looking_objects_get_position_words() -> None:
    anchor = Anchor("t_pos", "object_centric", "test", (
        _obj("y1", "cube", "yellow", -0.14, -0.1), _obj("y2", "cube", "yellow", -0.02, -0.1),
        _obj("y3", "cube", "yellow", 0.10, -0.1)), provenance=PROV)
    assert object_refs(anchor) == {"y1": "the leftmost yellow cube", "y2": "the middle yellow cube",
                                   "y3": "the rightmost yellow cube"}


def test_parser_rejects_unknown_sentences_and_references(table: Anchor) -> None:
    with pytest.raises(ParseError, match="base sentence"):
        parse(table, "Throw all the objects.")
    with pytest.raises(ParseError, match="names no single object"):
        parse(table, "Pick up all the objects. Skip the purple cube.")
    with pytest.raises(ParseError, match="number word"):
        parse(table, "Pick up all the objects. Take only the many closest to the front left corner.")
    with pytest.raises(ParseError, match="cannot read the sentence"):  # "it is" with two objects does not agree
        parse(table, "Pick up all the objects. Leave the red cube and the yellow cube where it is.")


def test_anchor_checks_catch_inconsistent_catalogs(chain: Anchor) -> None:
    cyclic = Anchor("t_cyc", "action_sequence", "test", chain.objects, (
        CandidateAction("lift:a", "lift", "a", None, ("lift:b",)), CandidateAction("lift:b", "lift", "b", None,
                                                                                   ("lift:a",)),
        CandidateAction("lift:c", "lift", "c")), PROV)
    with pytest.raises(AnchorError, match="cycle"):
        check_anchor(cyclic)
    unknown = Anchor("t_unk", "action_sequence", "test", chain.objects, (
        *chain.actions[:3], CandidateAction("lift:z", "lift", "z")), PROV)
    with pytest.raises(AnchorError, match="unknown object 'z'"):
        check_anchor(unknown)
    twice = Anchor("t_two", "action_sequence", "test", chain.objects, (
        *chain.actions, CandidateAction("lift:d", "lift", "d")), PROV)
    with pytest.raises(AnchorError, match="at most one candidate action"):
        check_anchor(twice)
    into_cube = Anchor("t_pl", "action_sequence", "test", chain.objects, (
        *chain.actions[:3], CandidateAction("place:d->a", "place", "d", "a")), PROV)
    with pytest.raises(AnchorError, match="not a bowl or label"):
        check_anchor(into_cube)
    with pytest.raises(AnchorError, match="provenance"):
        check_anchor(Anchor("t_np", "object_centric", "test", chain.objects))
    round_trip = Anchor.from_dict(chain.to_dict())
    assert round_trip.to_dict() == chain.to_dict()
