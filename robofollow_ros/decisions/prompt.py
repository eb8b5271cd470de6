"""The decision prompt every model gets, and the strict reader of its answers.

The prompt gives the anchor (objects with ids, attributes and positions), the candidate decision
space, the ordering conventions and the output format. The reader accepts exactly one JSON object
``{"decision": [ids...]}``, optionally inside one ```json fence, with known, distinct ids; anything
else is unparseable and therefore wrong (the benchmark gives no partial credit).
"""

from __future__ import annotations

import json
import re

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.language import action_phrase
from robofollow_ros.decisions.solver import Q_CORNER_XY

SYSTEM_PROMPT = (
    "You turn a robot instruction into one executable decision over a fixed table state. "
    "Reply with a single JSON object and nothing else."
)


def describe_anchor(anchor: Anchor) -> str:
    lines = [
        f"Table state {anchor.anchor_id}. Positions are (x, y) in metres: x grows to the robot's right, "
        f"y grows away from the robot. The table's front left corner is at ({Q_CORNER_XY[0]:.2f}, "
        f"{Q_CORNER_XY[1]:.2f}).",
        "Objects:",
    ]
    for o in anchor.objects:
        extra = f", on top of {o.on_top_of}" if o.on_top_of else (f", inside {o.in_container}" if o.in_container
                                                                    else "")
        size = f"{o.size} " if o.size else ""
        lines.append(f"- {o.name}: {size}{o.colour} {o.shape} at ({o.xy[0]:+.3f}, {o.xy[1]:+.3f}){extra}")
    if anchor.kind == "object_centric":
        lines.append("Candidate objects (the decision is a set of these ids): " + ", ".join(anchor.candidate_ids))
    else:
        lines.append("Candidate actions (the decision is an ordered list of these ids):")
        for a in anchor.actions:
            req = f" (requires {', '.join(a.requires)} done before)" if a.requires else ""
            lines.append(f"- {a.action_id}: {action_phrase(anchor, a)}{req}")
    return "\n".join(lines)


def output_rules(anchor: Anchor) -> str:
    if anchor.kind == "object_centric":
        return ('Answer {"decision": [object ids]} listing every object the instruction selects; order does not '
                'matter. "Closest to the front left corner" ranks objects by straight-line distance to that corner.')
    return ('Answer {"decision": [action ids]} listing the actions to execute, in execution order. Where the '
            "instruction leaves the order open, go down the candidate list and always take the earliest-listed "
            "action whose required actions are already done. \"The first k\" means the first k actions of that "
            "order.")


def user_prompt(anchor: Anchor, instruction: str) -> str:
    return f"{describe_anchor(anchor)}\n\nInstruction: {instruction}\n\n{output_rules(anchor)} No explanation."


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def read_decision(anchor: Anchor, text: str) -> tuple[str, ...] | None:
    """The decision in a model's reply, or None when the reply does not map onto the decision space."""
    body = text.strip()
    if m := _FENCE.match(body):
        body = m.group(1).strip()
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(payload, dict) or set(payload) != {"decision"}:
        return None
    ids = payload["decision"]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return None
    if len(set(ids)) != len(ids) or not set(ids) <= set(anchor.candidate_ids):
        return None
    return tuple(ids)


def same_decision(anchor: Anchor, predicted: tuple[str, ...] | None, gold: tuple[str, ...]) -> bool:
    """Exact match after normalisation: same members (objects) or same members in the same order (actions)."""
    if predicted is None:
        return False
    if anchor.kind == "object_centric":
        return set(predicted) == set(gold) and len(predicted) == len(gold)
    return tuple(predicted) == tuple(gold)
