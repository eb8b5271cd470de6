"""Sentence templates for every clause, four paraphrases each, and the regular expressions that read them.

A family's base instruction uses one paraphrase per clause and its task-preserving rewrite another for
every clause, so preserving rewrites are real rewordings, not one fixed synonym swap. A task-changing
rewrite keeps the wording and changes exactly one word inside a slot (a colour, shape, verb, number,
object word, or first/last). Templates never contradict each other when combined: a base sentence
says "carry out the listed actions", not "every action", so "only the first two" can follow it.

Slots: {scope} {refs} {pron} {value} {verb} {gerund} {ref} {k} {imperative} {gerund_phrase}.
"""

from __future__ import annotations

import re
from functools import cache

BASE = {
    "object_centric": ("Pick up {scope}.", "Collect {scope}.", "Clear away {scope}.", "Gather up {scope}."),
    "action_sequence": ("Carry out the listed actions.", "Work through the action list.",
                        "Do the actions on the list.", "Go through the candidate actions."),
}
OBJECT_CLAUSES = {
    "E": ("Leave out {refs}.", "Skip {refs}.", "Do not take {refs}.", "Leave {refs} where {pron}."),
    "N_colour": ("Do not touch anything {value}.", "Avoid every {value} object.", "Leave anything {value} alone.",
                 "Keep away from anything {value}."),
    "N_shape": ("Do not touch any {value}.", "Avoid every {value}.", "Leave every {value} alone.",
                "Keep away from all {value}s."),
    "Q": ("Take only the {k} closest to the front left corner.", "Limit yourself to the {k} nearest the front left "
          "corner.", "Pick only the {k} closest to the front left corner.", "Stop at the {k} nearest the front "
          "left corner."),
}
ACTION_CLAUSES = {
    "E": ("Skip {refs}.", "Leave out {refs}.", "Omit {refs}.", "Do everything except {refs}."),
    "N_verb": ("Do not {verb} anything.", "No {gerund} at all.", "Avoid any {gerund}.", "Refrain from {gerund}."),
    "N_object": ("Do not touch {ref}.", "Keep your hands off {ref}.", "Leave {ref} alone.", "Stay away from {ref}."),
    "Q": ("Do only the first {k}.", "Stop after the first {k}.", "Do just the first {k} of them.",
          "Limit yourself to the first {k}."),
    "T": ("{imperative} {value}.", "Make {gerund_phrase} the {value} step.", "As the {value} step, {imperative}.",
          "{gerund_phrase} comes {value}."),
}
N_TEMPLATES = 4


def fill(template: str, **slots: str) -> str:
    text = template.format(**slots)
    return text[0].upper() + text[1:]


#: slots that hold one word (or a fixed phrase); the rest hold phrases
_SLOT_REGEX = {"value": r"\w+", "k": r"\w+", "verb": r"\w+", "gerund": r"\w+", "pron": "it is|they are"}


@cache
def pattern(template: str) -> re.Pattern[str]:
    """The template as a case-insensitive regex; each slot becomes a named group."""
    parts = re.split(r"\{(\w+)\}", template.rstrip("."))
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>{_SLOT_REGEX.get(p, '.+?')})"
                    for i, p in enumerate(parts))
    return re.compile(f"^{regex}$", re.IGNORECASE)


def matches(templates: tuple[str, ...], sentence: str) -> list[tuple[int, dict[str, str]]]:
    """(template index, slots) for every template that reads ``sentence`` (without its full stop)."""
    out = []
    for i, t in enumerate(templates):
        m = pattern(t).match(sentence)
        if m is not None:
            out.append((i, {k: v.lower() for k, v in m.groupdict().items()}))
    return out
