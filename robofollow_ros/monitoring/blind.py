"""The live view of a blinded run (``bringup --controls``, ``nodes.trial_blind``): nothing that says which
instruction a trial got, nor which task scores it.

Applied to what the live view is sent, never to the recording: the bag keeps the instruction, the trial
state and the scores as they were. The live view keeps the trial's label, phase, scene, round and seed,
the layout, the cameras, the robot and the numbers (IS, ES, completion, per-stage values); it loses the
instruction (``/robofollow/instruction`` reads :data:`BLINDED`), the task ids (a swap is scored against
another task: the scorer's task would name it), the stage names and every reason or message that could
name an object of the task. ROS-free.
"""

from __future__ import annotations

import json
from typing import Any

from robofollow_ros.monitoring import rosmsg, topics

BLINDED = "(blinded: shown when the run ends)"
#: JSON keys the live view of a blinded run never gets (at any depth).
HIDDEN_KEYS = frozenset({"instruction", "task", "scored_task", "also_scored", "control", "partner",
                         "control_source_task", "original_verdict", "intent_reason", "exec_reason", "intent_msg",
                         "exec_msg", "blind_label"})
#: JSON topics the live view gets scrubbed.
JSON_TOPICS = frozenset({topics.TRIAL, topics.SCORE, topics.RESULT, topics.FRAME})


def scrub(value: Any, key: str | None = None) -> Any:
    """``value`` without :data:`HIDDEN_KEYS`; a score's ``stages`` keyed ``stage 1..3`` instead of their names,
    a result's ``phases`` without their names."""
    if isinstance(value, dict):
        kept = {k: scrub(v, k) for k, v in value.items() if k not in HIDDEN_KEYS}
        if key == "stages":
            return {f"stage {i + 1}": v for i, v in enumerate(kept.values())}
        return kept
    if isinstance(value, list):
        items = [scrub(v) for v in value]
        if key == "phases":
            return [{k: v for k, v in item.items() if k != "phase"} if isinstance(item, dict) else item
                    for item in items]
        return items
    return value


def blind_live(topic: str, type_name: str, data: bytes) -> bytes:
    """What the live view of a blinded run is sent instead of ``data`` on ``topic``."""
    if topic == topics.INSTRUCTION:
        return rosmsg.encode(rosmsg.string(BLINDED))
    if topic in JSON_TOPICS and type_name == topics.STRING:
        try:
            payload = json.loads(str(rosmsg.decode(data, topics.STRING).data))
        except (ValueError, TypeError):
            return rosmsg.encode(rosmsg.string("{}"))
        return rosmsg.encode(rosmsg.string(json.dumps(scrub(payload))))
    if topic == topics.STATUS:
        msg = rosmsg.decode(data, type_name)
        for status in msg.status:
            status.hardware_id = ""  # a stage's name, the scorer's task
            status.values = [kv for kv in status.values if kv.key not in HIDDEN_KEYS and kv.key != "stage"]
        return rosmsg.encode(msg)
    return data


__all__ = ["BLINDED", "HIDDEN_KEYS", "blind_live", "scrub"]
