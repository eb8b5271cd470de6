"""Every gold decision of the default suite, re-derived by brute force from what a model is shown.

Nothing here comes from ``robofollow_ros.decisions`` except the suite itself and the prompt text: the
table state, the candidates and their relations are read off the prompt; the rules are the ones the
prompt states; the world rules (what must be clear, pushed, empty) are the documented ones
(docs/owda.md), written again here as a tiny executor. Object-centric decisions: every subset of the
candidates is tried and exactly one must satisfy the rules. Action sequences: every permutation of the
remaining actions is tried in listed order and the first that respects the relations is the answer.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import pytest

from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.prompt import user_prompt

CORNER = (-0.45, -0.30)
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven")
_OBJECT = re.compile(r"^- (\w+): (?:(small|large) )?(\w+) (\w+)( \(not a candidate\))? at \(([-+.\d]+), ([-+.\d]+)\), "
                     r"(on the table|on top of (\w+)|inside (\w+))$")
_ACTION = re.compile(r"^(\d+)\. (\S+): .*?(?: \((.*)\))?$")


@pytest.fixture(scope="module")
def suite(owda_suite_seed0: Suite) -> Suite:
    return owda_suite_seed0


def read_prompt(prompt: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    objects: dict[str, dict[str, Any]] = {}
    actions: list[dict[str, Any]] = []
    for line in prompt.splitlines():
        if m := _OBJECT.match(line):
            name, size, colour, shape, not_candidate, x, y, _, on, inside = m.groups()
            objects[name] = {"colour": colour, "shape": shape, "size": size or "", "candidate": not not_candidate,
                             "xy": (float(x), float(y)), "on": on, "inside": inside}
        elif m := _ACTION.match(line):
            n, action_id, rel = m.groups()
            verb, rest = action_id.split(":", 1)
            obj, _, target = rest.partition("->")
            relations = dict(part.split(" ", 1) for part in (rel or "").split("; ") if part)
            actions.append({"n": int(n), "id": action_id, "verb": verb, "obj": obj, "target": target or None,
                            "requires": relations.get("requires", "").split(", ") if "requires" in relations else [],
                            "after": relations.get("after", "").removesuffix(" if done").split(", ")
                            if "after" in relations else []})
    return objects, actions


class World:
    """The documented world rules, once more: clear subjects, pushes on the table, empty bowls, loadable targets."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objs = objects
        self.where = {n: {"xy": o["xy"], "on": o["on"], "inside": o["inside"]} for n, o in objects.items()}

    def on_table(self, n: str) -> bool:
        return self.where[n]["on"] is None and self.where[n]["inside"] is None

    def loaded(self, n: str) -> bool:
        return any(w["on"] == n for w in self.where.values())

    def run(self, verb: str, x: str, t: str | None) -> str | None:
        if self.loaded(x):
            return f"something rests on {x}"
        if verb == "push":
            gap = math.dist(self.where[x]["xy"], self.where[t]["xy"])
            if not (self.on_table(x) and self.on_table(t)) or self.objs[x]["shape"] == "sphere" or gap < 0.10:
                return f"cannot push {x} to {t}"
            travel = min(max(gap - 0.05, 0.05), 0.07) - 0.011
            (x0, y0), (x1, y1) = self.where[x]["xy"], self.where[t]["xy"]
            end = (x0 + (x1 - x0) * travel / gap, y0 + (y1 - y0) * travel / gap)
            if any(math.dist(end, w["xy"]) < 0.07 for n, w in self.where.items()
                   if n not in (x, t) and self.objs[n]["shape"] != "label"):
                return f"the push leaves {x} against another object"
            self.where[x]["xy"] = end
        elif verb in ("place", "stack") and self.objs[t]["shape"] == "bowl":
            if any(w["inside"] == t for w in self.where.values()) or self.where[x]["inside"] == t:
                return f"bowl {t} is not empty"
            self.where[x] = {"xy": self.where[t]["xy"], "on": None, "inside": t}
        elif verb in ("place", "stack"):
            if "sphere" in (self.objs[x]["shape"], self.objs[t]["shape"]) or self.loaded(t) or not self.on_table(t):
                return f"cannot put {x} on {t}"
            self.where[x] = {"xy": self.where[t]["xy"], "on": t, "inside": None}
        return None


def _objects_decision(objects: dict[str, dict[str, Any]], spec: dict[str, Any]) -> set[str]:
    cands = [n for n, o in objects.items() if o["candidate"]]
    scope = spec["scope"]
    allowed = [n for n in cands if scope == ["all"] or objects[n][scope[0]] == scope[1]]
    k = None
    for c in spec["constraints"]:
        if c["op"] == "E":
            allowed = [n for n in allowed if n not in c["names"]]
        elif c["op"] == "N":
            allowed = [n for n in allowed if objects[n][c["attr"]] != c["value"]]
        elif c["op"] == "Q":
            k = c["k"]

    def dist(n: str) -> float:
        return math.dist(objects[n]["xy"], CORNER)

    answers = []
    for size in range(1, len(cands) + 1):
        for subset in itertools.combinations(cands, size):
            s = set(subset)
            if not s <= set(allowed):
                continue
            rest = set(allowed) - s
            if k is None and rest:
                continue
            if k is not None and (len(s) != k or (rest and max(map(dist, s)) >= min(map(dist, rest)))):
                continue
            answers.append(s)
    assert len(answers) == 1, answers
    return answers[0]


def _objects_executable(objects: dict[str, dict[str, Any]], spec: dict[str, Any], chosen: set[str]) -> None:
    forbidden = {n for n, o in objects.items() if o["shape"] == "bowl" for c in spec["constraints"]
                 if c["op"] == "N" and o[c["attr"]] == c["value"]}
    for n in chosen:
        tops = [m for m, o in objects.items() if o["on"] == n]
        assert set(tops) <= chosen, f"{n} is picked while {tops} stay on it"
        assert objects[n]["inside"] not in forbidden, f"{n} is taken out of forbidden {objects[n]['inside']}"


def _actions_decision(objects: dict[str, dict[str, Any]], actions: list[dict[str, Any]],
                      spec: dict[str, Any]) -> list[str]:
    kept = list(actions)
    first = last = None
    k = None
    for c in spec["constraints"]:
        if c["op"] == "E":
            kept = [a for a in kept if a["id"] not in c["names"]]
        elif c["op"] == "N" and c["attr"] == "verb":
            kept = [a for a in kept if a["verb"] != c["value"]]
        elif c["op"] == "N":  # the object moved, its target, or the bowl it is taken out of
            kept = [a for a in kept if c["value"] not in (a["obj"], a["target"], objects[a["obj"]]["inside"])]
        elif c["op"] == "T":
            first, last = (c["names"][0], last) if c["value"] == "first" else (first, c["names"][0])
        elif c["op"] == "Q":
            k = c["k"]
    ids = {a["id"] for a in kept}
    assert all(set(a["requires"]) <= ids for a in kept), "a remaining action lost an action it requires"
    for order in itertools.permutations(kept):  # listed order first: the first valid one is the tie-broken order
        pos = {a["id"]: i for i, a in enumerate(order)}
        if (first and order[0]["id"] != first) or (last and order[-1]["id"] != last):
            continue
        if all(pos[r] < pos[a["id"]] for a in order for r in a["requires"] + a["after"] if r in pos):
            return [a["id"] for a in order][:k]
    raise AssertionError("no order respects the relations")


def test_every_gold_decision_is_rederived_and_executable(suite: Suite) -> None:
    anchors = {a.anchor_id: a for a in suite.anchors}
    checked = 0
    for fam in suite.families:
        anchor = anchors[fam.anchor_id]
        for inst in fam.instances:
            objects, actions = read_prompt(user_prompt(anchor, inst.text))
            assert len(objects) == len(anchor.objects) and len(actions) == len(anchor.actions)
            spec = inst.spec.to_dict()
            if anchor.kind == "object_centric":
                chosen = _objects_decision(objects, spec)
                assert chosen == set(inst.decision), inst.instance_id
                _objects_executable(objects, spec, chosen)
            else:
                assert _actions_decision(objects, actions, spec) == list(inst.decision), inst.instance_id
                world = World(objects)
                by_id = {a["id"]: a for a in actions}
                for step in inst.decision:
                    a = by_id[step]
                    assert world.run(a["verb"], a["obj"], a["target"]) is None, (inst.instance_id, step)
            checked += 1
    assert checked == 3952 + 408


def test_every_constraint_is_in_the_words(suite: Suite) -> None:
    """The stored task the brute force reads is what the sentence says: its value words are in the text."""
    for fam in suite.families:
        for inst in fam.instances:
            words = set(re.findall(r"\w+", inst.text.lower()))
            for c in inst.spec.constraints:
                if c.op == "Q":
                    assert NUMBERS[c.k] in words, inst.text
                elif c.op == "T":
                    assert c.value in words, inst.text
                elif c.op == "N" and c.attr in ("colour", "verb"):
                    assert c.value in words or c.value + "ing" in words or c.value[:-1] + "ing" in words, inst.text
                elif c.op == "N" and c.attr == "shape":
                    assert c.value in words or c.value + "s" in words, inst.text
