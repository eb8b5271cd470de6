"""The decision prompt every model gets, and the reader of its answers.

The prompt gives the anchor (objects with ids, attributes, positions and what they rest on), the
candidate decision space with its relations, every rule the solver applies, in plain words, and the
output format. Nothing the solver assumes is left for the model to guess: that "do not touch" counts a
target as touched, that a number applies after every exclusion, and how ties in the order are broken.

The reader is as lenient as the benchmark's "an output that cannot be mapped to a valid decision is
wrong", and no more: it takes the first JSON object anywhere in the reply (prose or a code fence
around it is fine) and maps its ``decision`` onto the candidates. A reply with no JSON object, or
whose first object has no usable ``decision``, is a *format failure*; one whose decision names
something outside the decision space is an *invalid decision*. Both are wrong; reports count them apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.language import action_phrase
from robofollow_ros.decisions.solver import Q_CORNER_XY, Q_MIN_GAP_M
from robofollow_ros.decisions.world import PUSH_MIN_GAP_M

SYSTEM_PROMPT = (
    "You turn a robot instruction into one executable decision over a fixed table state. "
    "Reply with a single JSON object and nothing else."
)

OBJECT_RULES = (
    "Rules:",
    "- The instruction selects objects to pick up; the decision is the set of selected candidate ids.",
    '- "Leave out", "skip", "do not take" or "leave ... where it is" removes exactly the named objects.',
    '- "Do not touch", "avoid", "leave ... alone" or "keep away from" removes every object with that colour or '
    "shape, and forbids reaching into a bowl with it: nothing may be taken out of such a bowl.",
    "- An object can be picked up only if every object resting on it is picked up as well (the top one first).",
    '- A number ("only the two closest to the front left corner") applies last, after every exclusion: of the '
    "objects still selected, keep that many, ranked by straight-line distance from the front left corner "
    f"(there are no ties: where the cut falls, the distances differ by at least {Q_MIN_GAP_M * 100:.0f} cm).",
    "- Every instruction has exactly one executable decision.",
)

ACTION_RULES = (
    "Rules:",
    "- Start from all the listed actions. The decision is the list of actions to execute, in order.",
    '- "Skip", "leave out", "omit" or "do everything except" removes exactly the named actions.',
    '- "Do not <verb> anything", "no <verb>ing" and the like remove every action with that verb.',
    '- "Do not touch X", "keep your hands off X", "leave X alone" or "stay away from X" removes every action '
    "that involves X: as the object it moves, as its target (pushing towards X or stacking onto X touches X), "
    "or by taking its object out of X.",
    "- Order: an action comes after every action it requires and after every action in its 'after' list that "
    "is also done. Where that leaves a choice, the earliest-listed remaining action goes next "
    "(the listed order is the tie-break). "
    '"X first" / "X last" puts X at the start / end; the other actions keep that rule.',
    '- A number ("only the first two") applies last: after all removals and ordering, keep that many actions '
    "from the start of the order.",
    "- Every instruction has exactly one executable decision.",
)


def describe_anchor(anchor: Anchor) -> str:
    lines = [
        f"Table state {anchor.anchor_id}. Positions are (x, y) in metres: x grows to the robot's right, "
        f"y grows away from the robot. The table's front left corner is at ({Q_CORNER_XY[0]:.2f}, "
        f"{Q_CORNER_XY[1]:.2f}).",
        "Objects:",
    ]
    for o in anchor.objects:
        where = f"on top of {o.on_top_of}" if o.on_top_of else (f"inside {o.in_container}" if o.in_container
                                                                 else "on the table")
        size = f"{o.size} " if o.size else ""
        kind = "" if o.role == "object" else " (not a candidate)"
        lines.append(f"- {o.name}: {size}{o.colour} {o.shape}{kind} at ({o.xy[0]:+.3f}, {o.xy[1]:+.3f}), {where}")
    if anchor.kind == "object_centric":
        lines.append("Candidate objects (the decision is a set of these ids): " + ", ".join(anchor.candidate_ids))
        return "\n".join(lines)
    lines.append(f"Candidate actions, in listed order (lift = lift and put back; push moves the object a few "
                 f"centimetres towards the target, which is at least {PUSH_MIN_GAP_M * 100:.0f} cm away):")
    for n, a in enumerate(anchor.actions, start=1):
        rel = []
        if a.requires:
            rel.append(f"requires {', '.join(a.requires)}")
        if a.after:
            rel.append(f"after {', '.join(a.after)} if done")
        lines.append(f"{n}. {a.action_id}: {action_phrase(anchor, a)}" + (f" ({'; '.join(rel)})" if rel else ""))
    return "\n".join(lines)


def output_rules(anchor: Anchor) -> str:
    if anchor.kind == "object_centric":
        return "\n".join(OBJECT_RULES) + '\nAnswer {"decision": [object ids]}; order does not matter.'
    return "\n".join(ACTION_RULES) + '\nAnswer {"decision": [action ids]} in execution order.'


def user_prompt(anchor: Anchor, instruction: str) -> str:
    return f"{describe_anchor(anchor)}\n\nInstruction: {instruction}\n\n{output_rules(anchor)} No explanation."


@dataclass(frozen=True)
class Reading:
    """What a reply maps to: a decision, or why none (``format_failure`` | ``invalid_decision``)."""

    decision: tuple[str, ...] | None
    status: str  # ok | format_failure | invalid_decision
    detail: str = ""


def first_json_object(text: str) -> dict[str, object] | None:
    """The first JSON object in ``text`` (scanning each '{' in turn), or None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def read_reply(anchor: Anchor, text: str) -> Reading:
    """Map a model's reply onto the decision space (see the module doc for what counts as what)."""
    payload = first_json_object(text)
    if payload is None:
        return Reading(None, "format_failure", "no JSON object in the reply")
    if "decision" not in payload:
        return Reading(None, "format_failure", f"the first JSON object has no 'decision' (keys {sorted(payload)[:5]})")
    raw = payload["decision"]
    ids = [raw] if isinstance(raw, str) else raw
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return Reading(None, "format_failure", "'decision' is not a list of ids")
    return read_ids(anchor, ids)


def read_ids(anchor: Anchor, ids: list[str]) -> Reading:
    """Map a list of ids onto the decision space: the part of :func:`read_reply` after the JSON, which
    a Python decider's answer (``module:function``) goes through as well."""
    if not ids:
        return Reading(None, "invalid_decision", "the decision is empty")
    unknown = [i for i in ids if i not in anchor.candidate_ids]
    if unknown:
        return Reading(None, "invalid_decision", f"not candidates: {unknown[:5]}")
    if anchor.kind == "action_sequence" and len(set(ids)) != len(ids):
        return Reading(None, "invalid_decision", "an action appears twice in the sequence")
    return Reading(tuple(dict.fromkeys(ids)), "ok")


def read_decision(anchor: Anchor, text: str) -> tuple[str, ...] | None:
    """The decision in a model's reply, or None when the reply does not map onto the decision space."""
    return read_reply(anchor, text).decision


def same_decision(anchor: Anchor, predicted: tuple[str, ...] | None, gold: tuple[str, ...]) -> bool:
    """Exact match after normalisation: same members (objects) or same members in the same order (actions)."""
    if predicted is None:
        return False
    if anchor.kind == "object_centric":
        return set(predicted) == set(gold)
    return tuple(predicted) == tuple(gold)


def normalised(anchor: Anchor, decision: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The form two decisions are compared in: sorted for sets, as is for sequences."""
    if decision is None:
        return None
    return tuple(sorted(decision)) if anchor.kind == "object_centric" else tuple(decision)
