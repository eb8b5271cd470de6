"""Solver, language and anchor checks of OWDA on small hand-built anchors (no generator involved)."""

from __future__ import annotations

import pytest

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction, check_anchor
from robofollow_ros.decisions.errors import AnchorError, ParseError, TaskError
from robofollow_ros.decisions.language import object_refs, parse, realise
from robofollow_ros.decisions.solver import Constraint, TaskSpec, solve

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
    """Actions: p0 lift a; p1 push c to d; p2 stack b on c (requires p1); p3 place d in bowl."""
    objs = (_obj("a", "cube", "red", -0.14, -0.18), _obj("b", "sphere", "red", -0.14, -0.04),
            _obj("c", "cube", "yellow", -0.02, -0.18), _obj("d", "cube", "green", 0.10, -0.04),
            _obj("bowl", "bowl", "green", 0.2, -0.1, role="bowl"))
    acts = (CandidateAction("lift:a", "lift", "a"), CandidateAction("push:c->d", "push", "c", "d"),
            CandidateAction("stack:b->c", "stack", "b", "c", ("push:c->d",)),
            CandidateAction("place:d->bowl", "place", "d", "bowl"))
    return Anchor("t_as", "action_sequence", "test", objs, acts, PROV)


def test_exclusion_inhibition_and_cardinality_compose_in_fixed_order(table: Anchor) -> None:
    all_objects = TaskSpec(("all",), ())
    assert solve(table, all_objects) == ("a", "b", "c", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("E", names=("c",)),))) == ("a", "b", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("N", attr="colour", value="red"),))) == ("c", "d")
    assert solve(table, TaskSpec(("all",), (Constraint("Q", k=2),))) == ("a", "b")
    # Q applies after E: excluding the closest object moves the cut
    spec = TaskSpec(("all",), (Constraint("E", names=("a",)), Constraint("Q", k=2)))
    assert solve(table, spec) == ("b", "c")
    assert solve(table, TaskSpec(("shape", "cube"), (Constraint("N", attr="colour", value="yellow"),))) == ("a", "d")


def test_solver_names_the_failing_constraint(table: Anchor) -> None:
    with pytest.raises(TaskError) as err:
        solve(table, TaskSpec(("all",), (Constraint("Q", k=4),)))
    assert err.value.constraint == "Q"
    with pytest.raises(TaskError) as err:
        solve(table, TaskSpec(("shape", "cube"), (Constraint("E", names=("b",)),)))
    assert err.value.constraint == "E" and "'b'" in str(err.value)
    with pytest.raises(TaskError) as err:
        solve(table, TaskSpec(("colour", "red"), (Constraint("N", attr="colour", value="red"),)))
    assert err.value.constraint == "N" and "empty" in str(err.value)
    with pytest.raises(TaskError) as err:
        solve(table, TaskSpec(("all",), (Constraint("T", names=("a",), value="first"),)))
    assert err.value.constraint == "T"


def test_q_rejects_a_cut_between_objects_equally_far_from_the_corner(table: Anchor) -> None:
    twin = Anchor("t_tie", "object_centric", "test", (*table.objects[:4], _obj("e", "cube", "blue", -0.14, -0.181)),
                  provenance=PROV)
    with pytest.raises(TaskError, match="not unique") as err:
        solve(twin, TaskSpec(("all",), (Constraint("Q", k=1),)))
    assert err.value.constraint == "Q"


def test_actions_follow_catalog_order_under_preconditions_and_t(chain: Anchor) -> None:
    assert solve(chain, TaskSpec(("all",), ())) == ("lift:a", "push:c->d", "stack:b->c", "place:d->bowl")
    last = TaskSpec(("all",), (Constraint("T", names=("lift:a",), value="last"),))
    assert solve(chain, last) == ("push:c->d", "stack:b->c", "place:d->bowl", "lift:a")
    first = TaskSpec(("all",), (Constraint("T", names=("place:d->bowl",), value="first"),))
    assert solve(chain, first) == ("place:d->bowl", "lift:a", "push:c->d", "stack:b->c")
    q = TaskSpec(("all",), (Constraint("N", attr="verb", value="lift"), Constraint("Q", k=2)))
    assert solve(chain, q) == ("push:c->d", "stack:b->c")
    with pytest.raises(TaskError, match="cannot go first") as err:
        solve(chain, TaskSpec(("all",), (Constraint("T", names=("stack:b->c",), value="first"),)))
    assert err.value.constraint == "T"
    with pytest.raises(TaskError, match="precondition") as err:
        solve(chain, TaskSpec(("all",), (Constraint("N", attr="verb", value="push"),)))
    assert err.value.constraint == "N"


def test_referring_phrases_are_unique_and_round_trip(table: Anchor, chain: Anchor) -> None:
    refs = object_refs(table)
    assert refs["a"] == "the red cube" and refs["bowl"] == "the green bowl"
    assert len(set(refs.values())) == len(refs)
    specs = [TaskSpec(("all",), (Constraint("E", names=("c", "a")), Constraint("N", attr="shape", value="sphere"))),
             TaskSpec(("shape", "cube"), (Constraint("Q", k=2),)),
             TaskSpec(("colour", "red"), (Constraint("E", names=("b",)),))]
    for spec in specs:
        for template in (0, 1):
            assert parse(table, realise(table, spec, template)) == spec
    as_specs = [TaskSpec(("all",), (Constraint("T", names=("push:c->d",), value="last"),)),
                TaskSpec(("all",), (Constraint("E", names=("place:d->bowl",)), Constraint("Q", k=1))),
                TaskSpec(("all",), (Constraint("N", attr="object", value="a"),)),
                TaskSpec(("all",), (Constraint("N", attr="verb", value="place"),))]
    for spec in as_specs:
        for template in (0, 1):
            assert parse(chain, realise(chain, spec, template)) == spec


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
    with pytest.raises(AnchorError, match="provenance"):
        check_anchor(Anchor("t_np", "object_centric", "test", chain.objects))
    round_trip = Anchor.from_dict(chain.to_dict())
    assert round_trip.to_dict() == chain.to_dict()
