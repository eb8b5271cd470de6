"""The default OWDA suite: exact sizes, determinism, validation, and validation failures that name the task."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.errors import TaskError
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.suite_io import load_suite, write_suite
from robofollow_ros.decisions.validate import validate_suite

EXPECTED = {"anchors": 85, "object_centric_anchors": 21, "action_sequence_anchors": 64, "atomic_families": 988,
            "atomic_instances": 3952, "compositional_families": 102, "compositional_instances": 408,
            "k2_families": 82, "k3_families": 20}


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite")
    assert main(["owda", "generate", "--seed", "0", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def seed4(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``robofollow owda generate --seed 4`` as a user runs it: the process and the suite it wrote."""
    out = tmp_path_factory.mktemp("seed4") / "s"
    proc = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "owda", "generate", "--seed", "4",
                           "--out", str(out), "--json"], capture_output=True, text=True, timeout=900)
    return proc, out


def test_generate_prints_the_benchmark_sizes(seed4: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _out = seed4
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == EXPECTED
    # progress on stderr: every stage ends with its last count (one line every few seconds before it)
    said = [line for line in proc.stderr.splitlines() if line.startswith("owda generate: ")]
    for last in ("anchors 85/85", "atomic candidates (anchors) 85/85", "K=3 compositions 20/20",
                 "K=2 compositions 82/82", "atomic families (anchors) 85/85"):
        assert any(line.startswith(f"owda generate: {last}  ") for line in said), (last, proc.stderr[-2000:])
    assert all(" ETA " in line for line in said)


def test_suite_files_are_deterministic_per_seed_and_differ_across_seeds(
        suite_dir: Path, seed4: tuple[subprocess.CompletedProcess[str], Path], owda_suite_seed0: Suite,
        tmp_path: Path) -> None:
    """Seed 0 generated twice (the CLI's ``suite_dir`` and the session's own, each from scratch) writes the same
    bytes; seed 4 writes other families."""
    again = tmp_path / "again"
    write_suite(owda_suite_seed0, again)
    for name in ("manifest.json", "anchors.json", "families.jsonl"):
        assert (again / name).read_bytes() == (suite_dir / name).read_bytes(), name
    assert seed4[0].returncode == 0, seed4[0].stderr
    assert (seed4[1] / "families.jsonl").read_bytes() != (suite_dir / "families.jsonl").read_bytes()


def test_suite_structure(suite_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = load_suite(suite_dir)
    told: list[tuple[str, int, int]] = []
    assert validate_suite(suite, lambda *step: told.append(step)) == EXPECTED
    total = len(suite.families)
    assert told == [("families", n, total) for n in range(1, total + 1)]  # progress after every family
    comp = [f for f in suite.families if f.kind == "compositional"]
    anchors = {a.anchor_id: a for a in suite.anchors}
    assert {f.type for f in comp} == {"E+N", "E+Q", "N+Q", "E+N+Q"}
    assert all(anchors[f.anchor_id].kind == "object_centric" for f in comp)
    assert all(anchors[f.anchor_id].kind == "action_sequence" for f in suite.families if "T" in f.ops)
    assert {f.ops[0] for f in suite.families if f.kind == "atomic"} == {"N", "E", "Q", "T"}
    by_id = {f.family_id: f for f in suite.families}
    for f in comp:  # matched constituents: same anchor and scope, one atomic family per operator
        assert [by_id[c].ops[0] for c in f.constituents] == list(f.ops)
        assert {by_id[c].anchor_id for c in f.constituents} == {f.anchor_id}
    assert {a.provenance["source"] for a in suite.anchors} == {"sim_layout"}
    capsys.readouterr()
    assert main(["owda", "validate", str(suite_dir)]) == 0
    err = capsys.readouterr().err.splitlines()  # not a terminal: a line every few seconds, and the last one
    assert err and err[-1].startswith(f"owda validate: families {total}/{total}  ") and " ETA " in err[-1]
    for f in comp:  # every compositional instance has one matched atomic instance per constraint, same task
        for inst in f.instances:
            atoms = {i.instance_id: i for a in suite.families if a.kind == "atomic" for i in a.instances}
            assert [atoms[m].spec.constraints for m in inst.matched] == [(c,) for c in inst.spec.constraints]
            assert {atoms[m].spec.scope for m in inst.matched} == {inst.spec.scope}


def _rewrite(suite_dir: Path, out: Path, edit_family: str, edit) -> Path:  # type: ignore[no-untyped-def]
    out.mkdir()
    for name in ("manifest.json", "anchors.json"):
        (out / name).write_bytes((suite_dir / name).read_bytes())
    lines = []
    for line in (suite_dir / "families.jsonl").read_text().splitlines():
        fam = json.loads(line)
        if fam["id"] == edit_family:
            edit(fam)
        lines.append(json.dumps(fam))
    (out / "families.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _first(suite_dir: Path, op: str, kind: str = "atomic") -> dict:  # type: ignore[type-arg]
    for line in (suite_dir / "families.jsonl").read_text().splitlines():
        fam = json.loads(line)
        if fam["kind"] == kind and op in fam["ops"]:
            return fam
    raise AssertionError(op)


def test_validate_names_the_task_and_constraint(suite_dir: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    q = _first(suite_dir, "Q")

    def wrong_decision(fam: dict) -> None:  # type: ignore[type-arg]
        fam["instances"][2]["decision"] = fam["instances"][0]["decision"]

    bad = _rewrite(suite_dir, tmp_path / "a", q["id"], wrong_decision)
    assert main(["owda", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{q['id']}/2" in err and "Q:" in err and "not the solution" in err

    t = _first(suite_dir, "T")

    def two_words(fam: dict) -> None:  # type: ignore[type-arg]
        # swap the base and its preserving rewrite: each still reads back, but the base and the
        # task-changing rewrite now differ in the template as well as in the changed word
        one, two = fam["instances"][0], fam["instances"][1]
        one["text"], two["text"] = two["text"], one["text"]

    bad = _rewrite(suite_dir, tmp_path / "b", t["id"], two_words)
    assert main(["owda", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert t["id"] in err and "T:" in err and "exactly one word" in err


def test_validate_rejects_inactive_and_ambiguous_constraints(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    fam = next(f for f in suite.families if f.ops == ("N",) and suite_anchor(suite, f.anchor_id) == "object_centric")
    anchor = next(a for a in suite.anchors if a.anchor_id == fam.anchor_id)
    absent = next(c for c in ("red", "yellow", "green", "blue") if all(o.colour != c for o in anchor.objects))
    from dataclasses import replace

    from robofollow_ros.decisions.language import realise
    from robofollow_ros.decisions.solver import Constraint, TaskSpec, solve

    spec = TaskSpec(fam.instances[0].spec.scope, (Constraint("N", attr="colour", value=absent),))
    inst = replace(fam.instances[0], spec=spec, text=realise(anchor, spec, 0), decision=solve(anchor, spec))
    broken = replace(fam, instances=(inst, *fam.instances[1:]))
    with pytest.raises(TaskError) as err:
        validate_suite(Suite(suite.seed, suite.anchors, (broken,)))
    assert err.value.constraint == "N" and "inactive" in str(err.value) and fam.family_id in str(err.value)

    # an empty decision: inhibit the very colour the scope selects
    colour = next(c for c in ("red", "yellow", "green", "blue")
                  if sum(o.colour == c for o in anchor.candidate_objects) >= 2)
    empty = TaskSpec(("colour", colour), (Constraint("N", attr="colour", value=colour),))
    inst = replace(fam.instances[0], spec=empty, text=realise(anchor, empty, 0), decision=())
    with pytest.raises(TaskError) as err:
        validate_suite(Suite(suite.seed, suite.anchors, (replace(fam, instances=(inst, *fam.instances[1:])),)))
    assert err.value.constraint == "N" and "empty" in str(err.value) and f"{fam.family_id}/0" in str(err.value)


def suite_anchor(suite: Suite, anchor_id: str) -> str:
    return next(a.kind for a in suite.anchors if a.anchor_id == anchor_id)


def test_unreadable_suites_exit_2_with_the_file_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["owda", "validate", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "manifest.json").write_text("{not json")
    assert main(["owda", "validate", str(tmp_path / "s")]) == 2
    assert "manifest.json is not valid JSON" in capsys.readouterr().err


def _same_layout(a: object, b: object) -> bool:
    """Independent of the authoring code: the same looks, supports and spots (within 3 cm) up to look-alikes."""
    def look(anchor, o):  # type: ignore[no-untyped-def]
        def of(n):  # type: ignore[no-untyped-def]
            return None if n is None else (anchor.object(n).colour, anchor.object(n).shape)
        return (o.colour, o.shape, o.size, o.role, of(o.on_top_of), of(o.in_container))

    pool = [(look(b, o), o.xy) for o in b.objects]  # type: ignore[attr-defined]
    if sorted(p[0] for p in pool) != sorted(look(a, o) for o in a.objects):  # type: ignore[attr-defined]
        return False
    return all(any(lk == look(a, o) and math.dist(xy, o.xy) < 0.03 for lk, xy in pool)
               for o in a.objects)  # type: ignore[attr-defined]


def test_families_anchors_and_ids_are_distinct_and_truthful(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    # no two families on one anchor hold the same sentences, nor the same two tasks (a mirror pair)
    by_sentences: dict[tuple[str, frozenset[str]], str] = {}
    by_tasks: dict[tuple[str, frozenset[str]], str] = {}
    for f in suite.families:
        texts = (f.anchor_id, frozenset(i.text for i in f.instances))
        tasks = (f.anchor_id, frozenset(json.dumps({"scope": i.spec.scope, "c": sorted(
            json.dumps({**c.to_dict(), "names": sorted(c.names)}, sort_keys=True) for c in i.spec.constraints)},
            sort_keys=True) for i in f.instances))
        assert texts not in by_sentences, (f.family_id, by_sentences.get(texts))
        assert tasks not in by_tasks, (f.family_id, by_tasks.get(tasks))
        by_sentences[texts] = by_tasks[tasks] = f.family_id
    anchors = list(suite.anchors)
    for i, a in enumerate(anchors):  # every anchor is its own physical state
        for b in anchors[i + 1:]:
            assert not _same_layout(a, b), (a.anchor_id, b.anchor_id)
        for o in a.objects:  # ids say what the object is, never where: size, colour, shape and a neutral number
            tokens = o.name.split("_")
            while tokens[-1].isdigit():
                tokens.pop()
            assert tokens == [t for t in (o.size, o.colour, o.shape) if t], (a.anchor_id, o.name)


def test_stats_table_counts_families_sentences_and_rejections(suite_dir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["owda", "stats", str(suite_dir), "--json"]) == 0
    rows = {r["type"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"N", "E", "Q", "T", "E+N", "E+Q", "N+Q", "E+N+Q"}
    assert sum(r["families"] for r in rows.values()) == 1090
    assert sum(r["instances"] for r in rows.values()) == 4360
    assert all(r["duplicate_families"] == 0 for r in rows.values())
    suite = load_suite(suite_dir)
    for label, r in rows.items():
        texts = {(f.anchor_id, i.text) for f in suite.families if f.type == label for i in f.instances}
        assert r["distinct_sentences"] == len(texts)
        assert r["rejected"] == sum(r["reasons"].values())
    assert rows["N"]["reasons"]["world: an object that stays rests on a picked one"] > 0
    assert rows["T"]["rejected"] > 0


def test_validate_names_the_instance_and_the_broken_precondition(suite_dir: Path) -> None:
    from dataclasses import replace

    from robofollow_ros.decisions.anchors import Anchor
    from robofollow_ros.decisions.language import realise
    from robofollow_ros.decisions.solver import Constraint, TaskSpec

    suite = load_suite(suite_dir)
    # object-centric: "do not touch anything <colour of a top object>" keeps the object under it
    def tops(anchor_id: str) -> list:  # type: ignore[type-arg]
        objs = anchor_of(suite, anchor_id).objects
        return [o for o in objs if o.on_top_of and all(b.colour != o.colour for b in objs if b.role == "bowl")]

    fam, top = next((f, o) for f in suite.families if f.ops == ("N",)
                    and suite_anchor(suite, f.anchor_id) == "object_centric" for o in tops(f.anchor_id))
    anchor = anchor_of(suite, fam.anchor_id)
    spec = TaskSpec(("all",), (Constraint("N", attr="colour", value=top.colour),))
    bad = replace(fam.instances[0], spec=spec, text=realise(anchor, spec, 0), decision=())
    with pytest.raises(TaskError) as err:
        validate_suite(Suite(suite.seed, suite.anchors, (replace(fam, instances=(bad, *fam.instances[1:])),)))
    assert err.value.constraint == "N" and f"{fam.family_id}/0" in str(err.value)
    assert f"'{top.name}', which stays, rests on '{top.on_top_of}'" in str(err.value)
    # action sequence: list first, without its relations, an action that needs another cleared first
    a_fam = next(f for f in suite.families if "T" not in f.ops and suite_anchor(suite, f.anchor_id) == "action_sequence"
                 and any(anchor_of(suite, f.anchor_id).action(x).requires for x in f.instances[0].decision))
    a_anchor = anchor_of(suite, a_fam.anchor_id)
    needy = next(a_anchor.action(x) for x in a_fam.instances[0].decision if a_anchor.action(x).requires)
    loose = Anchor.from_dict({**a_anchor.to_dict(), "actions": [
        {**needy.to_dict(), "requires": [], "after": []},
        *(act.to_dict() for act in a_anchor.actions if act.action_id != needy.action_id)]})
    anchors = tuple(loose if a.anchor_id == loose.anchor_id else a for a in suite.anchors)
    with pytest.raises(TaskError) as err:
        validate_suite(Suite(suite.seed, anchors, (a_fam,)))
    assert err.value.constraint == "world" and f"{a_fam.family_id}/0" in str(err.value)
    assert "cannot run" in str(err.value) and "rests on" in str(err.value)


def anchor_of(suite: Suite, anchor_id: str):  # type: ignore[no-untyped-def]
    return next(a for a in suite.anchors if a.anchor_id == anchor_id)


def test_every_anchor_leaves_the_gripper_room(suite_dir: Path) -> None:
    from robofollow_ros.decisions.anchors import Anchor
    from robofollow_ros.decisions.world import cramped

    suite = load_suite(suite_dir)
    for a in suite.anchors:
        assert all(o.extent is not None for o in a.objects), a.anchor_id
        assert cramped(a) == [], a.anchor_id
    # move one free candidate 5 cm beside another, along the fingers' axis: the validator refuses the anchor
    anchor = next(a for a in suite.anchors if a.kind == "object_centric")
    mover, other = [o for o in anchor.candidate_objects if not o.on_top_of and not o.in_container
                    and not any(b.on_top_of == o.name for b in anchor.objects)][:2]
    tight = Anchor.from_dict({**anchor.to_dict(), "objects": [
        {**o.to_dict(), "xy": [other.xy[0] + 0.05, other.xy[1]]} if o.name == mover.name else o.to_dict()
        for o in anchor.objects]})
    with pytest.raises(TaskError) as err:
        validate_suite(Suite(suite.seed, (tight,), ()))
    assert err.value.constraint == "anchor" and tight.anchor_id in str(err.value)
    assert "the gripper would land on" in str(err.value)
