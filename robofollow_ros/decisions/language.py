"""Natural-language realisation of task specs, and the strict parser that reads them back.

Each constraint has two templates (0 and 1): a task-preserving rewrite swaps templates, a
task-changing rewrite swaps exactly one word (a colour, a shape, a verb, a number, first/last).
The parser is the reference decider's reader and the validator's round-trip check: a sentence it
cannot map back to the stored constraint is a realisation bug, not a model error.

Objects are named by the shortest phrase that picks out one of them on the anchor: colour and
shape, then size, then a position word (leftmost / middle / rightmost, or nearer / farther).
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

from robofollow_ros.decisions.anchors import Anchor, AnchorObject, CandidateAction
from robofollow_ros.decisions.errors import ParseError
from robofollow_ros.decisions.solver import Constraint, TaskSpec

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven")
GERUNDS = {"lift": "lifting", "push": "pushing", "place": "placing", "stack": "stacking"}
_VERB_OF_GERUND = {g: v for v, g in GERUNDS.items()}
#: Objects must be this far apart (x, or y as a fallback) to be told apart by a position word.
REF_MIN_GAP_M = 0.05

_BASE = {
    "object_centric": ("Pick up {scope}.", "Collect {scope}."),
    "action_sequence": ("Carry out the listed actions.", "Perform every action on the list."),
}
_OC_CLAUSES = {
    "E": ("Leave out {refs}.", "Skip {refs}."),
    "N_colour": ("Do not touch anything {value}.", "Avoid every {value} object."),
    "N_shape": ("Do not touch any {value}.", "Avoid every {value}."),
    "Q": ("Take only the {k} closest to the front left corner.",
          "Stop after the {k} nearest the front left corner."),
}
_AS_CLAUSES = {
    "E": ("Skip {refs}.", "Leave out {refs}."),
    "N_verb": ("Do not {value} anything.", "No {gerund} at all."),
    "N_object": ("Do not touch {ref}.", "Keep your hands off {ref}."),
    "Q": ("Do only the first {k}.", "Stop after the first {k}."),
    "T": ("{imperative} {value}.", "Make {gerund_phrase} the {value} step."),
}


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
def realise(anchor: Anchor, spec: TaskSpec, template: int) -> str:
    """The instruction for ``spec`` in template set 0 or 1."""
    if anchor.kind == "object_centric":
        base = _BASE["object_centric"][template].format(scope=_scope_phrase(spec.scope))
        clauses = [_oc_clause(anchor, c, template) for c in spec.constraints]
    else:
        base = _BASE["action_sequence"][template]
        clauses = [_as_clause(anchor, c, template) for c in spec.constraints]
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
        return _OC_CLAUSES["E"][t].format(refs=" and ".join(_ref(anchor, n) for n in c.names))
    if c.op == "N":
        return _OC_CLAUSES[f"N_{c.attr}"][t].format(value=c.value)
    if c.op == "Q":
        return _OC_CLAUSES["Q"][t].format(k=NUMBER_WORDS[c.k])
    raise ParseError(f"constraint {c.op} cannot be realised on an object-centric anchor")


def _as_clause(anchor: Anchor, c: Constraint, t: int) -> str:
    if c.op == "E":
        phrases = [action_phrase(anchor, anchor.action(n), gerund=True) for n in c.names]
        return _AS_CLAUSES["E"][t].format(refs=" and ".join(phrases))
    if c.op == "N" and c.attr == "verb":
        return _AS_CLAUSES["N_verb"][t].format(value=c.value, gerund=GERUNDS[c.value])
    if c.op == "N":
        return _AS_CLAUSES["N_object"][t].format(ref=_ref(anchor, c.value))
    if c.op == "Q":
        return _AS_CLAUSES["Q"][t].format(k=NUMBER_WORDS[c.k])
    action = anchor.action(c.names[0])
    text = _AS_CLAUSES["T"][t].format(imperative=action_phrase(anchor, action), value=c.value,
                                       gerund_phrase=action_phrase(anchor, action, gerund=True))
    return text[0].upper() + text[1:]


# -------------------------------------------------------------------------------------------- parse
_SENTENCE = re.compile(r"(?<=\.)\s+")
_OC_BASE = re.compile(r"^(?:pick up|collect) all the (?:(objects)|(\w+) objects|(\w+)s)$")
_AS_BASE = ("carry out the listed actions", "perform every action on the list")


def parse(anchor: Anchor, text: str) -> TaskSpec:
    """Read an instruction back into its spec; ``ParseError`` names the sentence it cannot read."""
    sentences = [s.strip().lower().rstrip(".") for s in _SENTENCE.split(text.strip()) if s.strip()]
    if not sentences:
        raise ParseError("instruction: empty")
    base, rest = sentences[0], sentences[1:]
    if anchor.kind == "object_centric":
        m = _OC_BASE.match(base)
        if m is None:
            raise ParseError(f"instruction: cannot read the base sentence {base!r}")
        scope: tuple[str, ...] = ("all",) if m.group(1) else ("colour", m.group(2)) if m.group(2) else (
            "shape", m.group(3))
        return TaskSpec(scope, tuple(_parse_oc_clause(anchor, s) for s in rest))
    if base not in _AS_BASE:
        raise ParseError(f"instruction: cannot read the base sentence {base!r}")
    return TaskSpec(("all",), tuple(_parse_as_clause(anchor, s) for s in rest))


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


def _parse_oc_clause(anchor: Anchor, s: str) -> Constraint:
    if m := re.match(r"^(?:leave out|skip) (.+)$", s):
        return Constraint("E", names=tuple(_resolve_ref(anchor, p) for p in m.group(1).split(" and ")))
    if m := (re.match(r"^do not touch anything (\w+)$", s) or re.match(r"^avoid every (\w+) object$", s)):
        return Constraint("N", attr="colour", value=m.group(1))
    if m := (re.match(r"^do not touch any (\w+)$", s) or re.match(r"^avoid every (\w+)$", s)):
        return Constraint("N", attr="shape", value=m.group(1))
    if m := (re.match(r"^take only the (\w+) closest to the front left corner$", s)
              or re.match(r"^stop after the (\w+) nearest the front left corner$", s)):
        return Constraint("Q", k=_number(m.group(1)))
    raise ParseError(f"instruction: cannot read the sentence {s!r}")


def _parse_as_clause(anchor: Anchor, s: str) -> Constraint:
    if m := re.match(r"^(?:skip|leave out) (.+)$", s):
        return Constraint("E", names=tuple(_resolve_action(anchor, p) for p in m.group(1).split(" and ")))
    if m := re.match(r"^do not touch (.+)$", s) or re.match(r"^keep your hands off (.+)$", s):
        return Constraint("N", attr="object", value=_resolve_ref(anchor, m.group(1)))
    if m := re.match(r"^do not (\w+) anything$", s):
        if m.group(1) not in GERUNDS:
            raise ParseError(f"instruction: {m.group(1)!r} is not a primitive verb")
        return Constraint("N", attr="verb", value=m.group(1))
    if m := re.match(r"^no (\w+) at all$", s):
        if m.group(1) not in _VERB_OF_GERUND:
            raise ParseError(f"instruction: {m.group(1)!r} is not a primitive")
        return Constraint("N", attr="verb", value=_VERB_OF_GERUND[m.group(1)])
    if m := (re.match(r"^do only the first (\w+)$", s) or re.match(r"^stop after the first (\w+)$", s)):
        return Constraint("Q", k=_number(m.group(1)))
    if m := (re.match(r"^make (.+) the (first|last) step$", s) or re.match(r"^(.+) (first|last)$", s)):
        return Constraint("T", names=(_resolve_action(anchor, m.group(1)),), value=m.group(2))
    raise ParseError(f"instruction: cannot read the sentence {s!r}")
