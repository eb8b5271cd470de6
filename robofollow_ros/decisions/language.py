"""Natural-language realisation of task specs, and the strict parser that reads them back.

Every sentence has four templates (``templates``): a task-preserving rewrite rewords every sentence,
a task-changing rewrite swaps exactly one word (a colour, a shape, a verb, a number, first/last).
The parser is the reference decider's reader and the validator's round-trip check: a sentence it
cannot map back to the stored constraint is a realisation bug, not a model error.

Objects are named by the shortest phrase that picks out one of them on the anchor: colour and
shape, then size, then a position word (leftmost / middle / rightmost, or nearer / farther).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from functools import lru_cache, partial

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.errors import ParseError
from robofollow_ros.decisions.solver import Constraint, TaskSpec
from robofollow_ros.decisions.templates import ACTION_CLAUSES, BASE, N_TEMPLATES, OBJECT_CLAUSES, fill, matches

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven")
GERUNDS = {"lift": "lifting", "push": "pushing", "place": "placing", "stack": "stacking"}
_VERB_OF_GERUND = {g: v for v, g in GERUNDS.items()}
#: Objects must be this far apart (x, or y as a fallback) to be told apart by a position word.
REF_MIN_GAP_M = 0.05
#: A wording: the template index of the base sentence, then one per constraint clause.
Wording = tuple[int, ...]


# ------------------------------------------------------------------------------------ referring phrases
@lru_cache(maxsize=512)
def object_refs(anchor: Anchor) -> dict[str, str]:
    """name -> unique referring phrase ("the red sphere"); objects that cannot be told apart are left out."""
    groups: dict[tuple[str, str], list[AnchorObject]] = {}
    for o in anchor.objects:
        groups.setdefault((o.colour, o.shape), []).append(o)
    refs: dict[str, str] = {}
    for (colour, shape), objs in groups.items():
        if len(objs) == 1:
            refs[objs[0].name] = f"the {colour} {shape}"
        elif len({o.size for o in objs}) == len(objs) and all(o.size for o in objs):
            for o in objs:
                refs[o.name] = f"the {o.size} {colour} {shape}"
        else:
            for name, word in _position_words(objs).items():
                refs[name] = f"the {word} {colour} {shape}"
    return refs


def _position_words(objs: list[AnchorObject]) -> dict[str, str]:
    for axis, words in ((0, {2: ("leftmost", "rightmost"), 3: ("leftmost", "middle", "rightmost")}),
                        (1, {2: ("nearer", "farther")})):
        if len(objs) not in words:
            continue
        ordered = sorted(objs, key=lambda o: o.xy[axis])
        if all(b.xy[axis] - a.xy[axis] >= REF_MIN_GAP_M for a, b in itertools.pairwise(ordered)):
            return {o.name: w for o, w in zip(ordered, words[len(objs)], strict=True)}
    return {}


def action_phrase(anchor: Anchor, action: CandidateAction, gerund: bool = False) -> str:
    refs = object_refs(anchor)
    verb = GERUNDS[action.verb] if gerund else action.verb
    subject = refs.get(action.obj, action.obj)
    if action.target is None:
        return f"{verb} {subject}"
    target = refs.get(action.target, action.target)
    prep = {"push": "to", "stack": "on"}.get(action.verb)
    if prep is None:
        prep = "in" if anchor.object(action.target).shape == "bowl" else "on"
    return f"{verb} {subject} {prep} {target}"


@lru_cache(maxsize=512)
def _action_phrases(anchor: Anchor) -> dict[str, str]:
    """lower-case imperative and gerund phrase -> action id (both forms resolve)."""
    out: dict[str, str] = {}
    for a in anchor.actions:
        out[action_phrase(anchor, a)] = a.action_id
        out[action_phrase(anchor, a, gerund=True)] = a.action_id
    return out


# ------------------------------------------------------------------------------------------ realise
def realise(anchor: Anchor, spec: TaskSpec, wording: Wording | int = 0) -> str:
    """The instruction for ``spec``; ``wording`` picks a template per sentence (an int: the same for all)."""
    w = (wording,) * (1 + len(spec.constraints)) if isinstance(wording, int) else tuple(wording)
    if len(w) != 1 + len(spec.constraints):
        raise ParseError(f"wording {list(w)} needs {1 + len(spec.constraints)} template indices")
    t = [i % N_TEMPLATES for i in w]
    if anchor.kind == "object_centric":
        base = fill(BASE["object_centric"][t[0]], scope=_scope_phrase(spec.scope))
        clauses = [_oc_clause(anchor, c, i) for c, i in zip(spec.constraints, t[1:], strict=True)]
    else:
        base = BASE["action_sequence"][t[0]]
        clauses = [_as_clause(anchor, c, i) for c, i in zip(spec.constraints, t[1:], strict=True)]
    return " ".join([base, *clauses])


def _scope_phrase(scope: tuple[str, ...]) -> str:
    if scope == ("all",):
        return "all the objects"
    if scope[0] == "shape":
        return f"all the {scope[1]}s"
    return f"all the {scope[1]} objects"


def _ref(anchor: Anchor, name: str) -> str:
    refs = object_refs(anchor)
    if name not in refs:
        raise ParseError(f"object {name!r} has no unique referring phrase on anchor {anchor.anchor_id}")
    return refs[name]


def _oc_clause(anchor: Anchor, c: Constraint, t: int) -> str:
    if c.op == "E":
        return fill(OBJECT_CLAUSES["E"][t], refs=" and ".join(_ref(anchor, n) for n in c.names),
                    pron="they are" if len(c.names) > 1 else "it is")
    if c.op == "N":
        return fill(OBJECT_CLAUSES[f"N_{c.attr}"][t], value=c.value)
    if c.op == "Q":
        return fill(OBJECT_CLAUSES["Q"][t], k=NUMBER_WORDS[c.k])
    raise ParseError(f"constraint {c.op} cannot be realised on an object-centric anchor")


def _as_clause(anchor: Anchor, c: Constraint, t: int) -> str:
    if c.op == "E":
        phrases = [action_phrase(anchor, anchor.action(n), gerund=True) for n in c.names]
        return fill(ACTION_CLAUSES["E"][t], refs=" and ".join(phrases))
    if c.op == "N" and c.attr == "verb":
        return fill(ACTION_CLAUSES["N_verb"][t], verb=c.value, gerund=GERUNDS[c.value])
    if c.op == "N":
        return fill(ACTION_CLAUSES["N_object"][t], ref=_ref(anchor, c.value))
    if c.op == "Q":
        return fill(ACTION_CLAUSES["Q"][t], k=NUMBER_WORDS[c.k])
    action = anchor.action(c.names[0])
    return fill(ACTION_CLAUSES["T"][t], imperative=action_phrase(anchor, action), value=c.value,
                gerund_phrase=action_phrase(anchor, action, gerund=True))


# -------------------------------------------------------------------------------------------- parse
_SENTENCE = re.compile(r"(?<=\.)\s+")
_COLOURS = ("red", "yellow", "green", "blue")
_SHAPES = ("sphere", "cube", "cylinder", "bar")


def parse(anchor: Anchor, text: str) -> TaskSpec:
    """Read an instruction back into its spec; ``ParseError`` names the sentence it cannot read."""
    sentences = [s.strip().rstrip(".") for s in _SENTENCE.split(text.strip()) if s.strip()]
    if not sentences:
        raise ParseError("instruction: empty")
    base, rest = sentences[0], sentences[1:]
    if anchor.kind == "object_centric":
        read = [_read_scope(slots["scope"]) for _, slots in matches(BASE["object_centric"], base)]
        scopes = [s for s in read if s is not None]
        if not scopes:
            raise ParseError(f"instruction: cannot read the base sentence {base!r}")
        return TaskSpec(scopes[0], tuple(_one(_oc_readings(anchor, s), s) for s in rest))
    if not matches(BASE["action_sequence"], base):
        raise ParseError(f"instruction: cannot read the base sentence {base!r}")
    return TaskSpec(("all",), tuple(_one(_as_readings(anchor, s), s) for s in rest))


Reader = Callable[[], Constraint | None]


def _one(readers: list[Reader], sentence: str) -> Constraint:
    """The one constraint ``sentence`` reads as; a name that resolves nowhere is reported as such."""
    readings: list[Constraint] = []
    errors: list[str] = []
    for read in readers:
        try:
            c = read()
        except ParseError as exc:
            errors.append(str(exc))
            continue
        if c is not None:
            readings.append(c)
    unique = list(dict.fromkeys(readings))
    if len(unique) == 1:
        return unique[0]
    if unique:
        raise ParseError(f"instruction: the sentence {sentence!r} reads {len(unique)} ways")
    raise ParseError(errors[0] if errors else f"instruction: cannot read the sentence {sentence!r}")


def _each(templates: tuple[str, ...], sentence: str,
          read: Callable[[dict[str, str]], Constraint | None]) -> list[Reader]:
    return [partial(read, slots) for _, slots in matches(templates, sentence)]


def _read_scope(phrase: str) -> tuple[str, ...] | None:
    if phrase == "all the objects":
        return ("all",)
    if m := re.fullmatch(r"all the (\w+) objects", phrase):
        return ("colour", m.group(1)) if m.group(1) in _COLOURS else None
    if m := re.fullmatch(r"all the (\w+)s", phrase):
        return ("shape", m.group(1)) if m.group(1) in _SHAPES else None
    return None


def _number(word: str) -> int:
    if word not in NUMBER_WORDS:
        raise ParseError(f"instruction: {word!r} is not a number word")
    return NUMBER_WORDS.index(word)


def _resolve_ref(anchor: Anchor, phrase: str) -> str:
    by_phrase = {v: k for k, v in object_refs(anchor).items()}
    if phrase not in by_phrase:
        raise ParseError(f"instruction: {phrase!r} names no single object on anchor {anchor.anchor_id}")
    return by_phrase[phrase]


def _resolve_action(anchor: Anchor, phrase: str) -> str:
    table = _action_phrases(anchor)
    if phrase not in table:
        raise ParseError(f"instruction: {phrase!r} names no candidate action on anchor {anchor.anchor_id}")
    return table[phrase]


def _oc_readings(anchor: Anchor, s: str) -> list[Reader]:
    def exclusion(slots: dict[str, str]) -> Constraint | None:
        names = tuple(_resolve_ref(anchor, p) for p in slots["refs"].split(" and "))
        agrees = "pron" not in slots or slots["pron"] == ("they are" if len(names) > 1 else "it is")
        return Constraint("E", names=names) if agrees else None

    return [
        *_each(OBJECT_CLAUSES["E"], s, exclusion),
        *_each(OBJECT_CLAUSES["N_colour"], s, lambda v: Constraint("N", attr="colour", value=v["value"])
               if v["value"] in _COLOURS else None),
        *_each(OBJECT_CLAUSES["N_shape"], s, lambda v: Constraint("N", attr="shape", value=v["value"])
               if v["value"] in _SHAPES else None),
        *_each(OBJECT_CLAUSES["Q"], s, lambda v: Constraint("Q", k=_number(v["k"]))),
    ]


def _as_readings(anchor: Anchor, s: str) -> list[Reader]:
    def verb(slots: dict[str, str]) -> Constraint:
        word = slots.get("verb") or _VERB_OF_GERUND.get(slots.get("gerund", ""), "")
        if word not in GERUNDS:
            raise ParseError(f"instruction: {s!r} names no primitive verb")
        return Constraint("N", attr="verb", value=word)

    def order(slots: dict[str, str]) -> Constraint | None:
        if slots["value"] not in ("first", "last"):
            return None
        phrase = slots.get("imperative") or slots["gerund_phrase"]
        return Constraint("T", names=(_resolve_action(anchor, phrase),), value=slots["value"])

    return [
        *_each(ACTION_CLAUSES["E"], s, lambda v: Constraint(
            "E", names=tuple(_resolve_action(anchor, p) for p in v["refs"].split(" and ")))),
        *_each(ACTION_CLAUSES["N_verb"], s, verb),
        *_each(ACTION_CLAUSES["N_object"], s,
               lambda v: Constraint("N", attr="object", value=_resolve_ref(anchor, v["ref"]))),
        *_each(ACTION_CLAUSES["Q"], s, lambda v: Constraint("Q", k=_number(v["k"]))),
        *_each(ACTION_CLAUSES["T"], s, order),
    ]
