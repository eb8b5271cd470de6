"""XPolicyLab's websocket envelope, message types and error codes (``client_server/ws/protocol/``).

Every frame is one msgpack map with exactly the envelope fields XPolicyLab's pydantic ``Frame``
(``extra="forbid"``) defines: ``message_type``, ``message_id``, ``evaluation_id``, ``action_case_id``,
``trial_id``, ``repeat_index``, ``step``, ``sent_at`` (ISO 8601, UTC) and ``payload`` (a map). A
request is answered by the frame of its pair type (:data:`REPLY_TO`) carrying the same
``message_id``, or by ``error`` with ``{"code", "message", "details"}``; ``close`` has no answer.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from robofollow_ros.policy.wire.common import WireFormatError

HELLO, HELLO_ACK = "hello", "hello_ack"
PREPARE_CASE, PREPARE_CASE_ACK = "prepare_case", "prepare_case_ack"
RESET, RESET_RESULT = "reset", "reset_result"
INFER, INFER_RESULT = "infer", "infer_result"
TRIAL_END, TRIAL_END_ACK = "trial_end", "trial_end_ack"
HEARTBEAT, HEARTBEAT_ACK = "heartbeat", "heartbeat_ack"
CLOSE, ERROR = "close", "error"

#: Request type → the reply type that answers it (XPolicyLab's ``REQUEST_RESPONSE_PAIRS``).
REPLY_TO = {HELLO: HELLO_ACK, PREPARE_CASE: PREPARE_CASE_ACK, RESET: RESET_RESULT, INFER: INFER_RESULT,
            TRIAL_END: TRIAL_END_ACK, HEARTBEAT: HEARTBEAT_ACK}
MESSAGE_TYPES = frozenset({*REPLY_TO, *REPLY_TO.values(), CLOSE, ERROR})
#: XPolicyLab's ``ErrorCode`` values.
ERROR_CODES = frozenset({"invalid_frame", "unknown_message_type", "timeout", "infer_failed", "reset_failed",
                         "internal"})
#: The envelope's fields, exactly (their pydantic model forbids any other).
ENVELOPE_FIELDS = ("message_type", "message_id", "evaluation_id", "action_case_id", "trial_id", "repeat_index",
                   "step", "sent_at", "payload")


def envelope(message_type: str, message_id: str, evaluation_id: str, payload: dict[str, Any], *,
             action_case_id: str | None = None, trial_id: str | None = None, repeat_index: int | None = None,
             step: int = 0) -> dict[str, Any]:
    """One request frame's map, with exactly :data:`ENVELOPE_FIELDS`."""
    return {"message_type": message_type, "message_id": message_id, "evaluation_id": evaluation_id,
            "action_case_id": action_case_id, "trial_id": trial_id, "repeat_index": repeat_index,
            "step": int(step), "sent_at": datetime.now(timezone.utc).isoformat(), "payload": payload}


def check_reply(frame: Any) -> dict[str, Any]:
    """A reply frame's map, checked as XPolicyLab's ``Frame.from_wire_dict`` does; raises
    :class:`WireFormatError` naming the field."""
    if not isinstance(frame, dict):
        raise WireFormatError(f"frame: expected a map, got {type(frame).__name__}")
    unknown = sorted(str(k) for k in frame if k not in ENVELOPE_FIELDS)
    if unknown:
        raise WireFormatError(f"frame: unknown envelope fields {unknown[:5]}")
    kind = frame.get("message_type")
    if kind not in MESSAGE_TYPES:
        raise WireFormatError(f"message_type: {str(kind)[:60]!r} is not an XPolicyLab message type")
    for name in ("message_id", "evaluation_id"):
        if not isinstance(frame.get(name), str):
            raise WireFormatError(f"{name}: expected a string, got {type(frame.get(name)).__name__}")
    payload = frame.get("payload")
    if payload is None:
        frame["payload"] = payload = {}
    if not isinstance(payload, dict):
        raise WireFormatError(f"payload: expected a map, got {type(payload).__name__}")
    return frame
