"""A trial's stage timeline for ``robofollow view``: live IS/ES and each stage's state over the trial's time,
read from its recording (``RUN/mcap/<trial>.mcap``; ``eval --record`` with or without cameras, the ROS graph).

Only the text topics are read (``/robofollow/trial``, ``/robofollow/score``, ``/robofollow/result``), never
the pictures, so a recording costs a fraction of a second. The states are the video's (``monitoring.stages.
stage_state``: pending, intent, done, missed), so the page and the video agree frame by frame; the trial's
final verdict (the last score marked ``final``, else ``/robofollow/result``) closes the timeline with every
stage done or missed. Times are seconds since the trial's first score, on the recording's log clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.stages import STAGE_STATES, stage_state

#: Points kept per timeline (a point is kept where any stage changes state; between, evenly thinned).
MAX_POINTS = 120


def _texts(path: Path) -> list[tuple[int, str, dict[str, Any]]]:
    """(log time, topic, JSON payload) of the trial, score and result messages, in log order."""
    from robofollow_ros.monitoring.video_bag import _reader

    wanted = {topics.TRIAL, topics.SCORE, topics.RESULT}
    out = []
    with _reader(path) as reader:
        connections = [c for c in reader.connections if c.topic in wanted]
        for conn, t, raw in reader.messages(connections=connections):
            try:
                value = json.loads(str(reader.deserialize(raw, conn.msgtype).data))
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append((int(t), conn.topic, value))
    return out


def _states(stages: Mapping[str, Any], names: Sequence[str], final: bool) -> list[int]:
    """Each named stage's state as an index into ``STAGE_STATES`` (pending for a stage not scored yet)."""
    out = []
    for name in names:
        stage = stages.get(name)
        state = stage_state(stage, final) if isinstance(stage, Mapping) else ("missed" if final else "pending")
        out.append(STAGE_STATES.index(state))
    return out


def _result_stages(result: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """A scored result's phases in the live score's shape."""
    return {str(p.get("phase")): {"intent": float(p.get("intent_score", 0.0)), "exec": float(p.get("exec_score", 0.0)),
                                  "intent_max": float(p.get("max_score", 0.0)),
                                  "exec_max": float(p.get("max_score", 0.0))}
            for p in result.get("phases") or [] if isinstance(p, Mapping)}


def _thin(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most :data:`MAX_POINTS`: the first, the last and every change of a stage state kept, the rest thinned."""
    if len(points) <= MAX_POINTS:
        return points
    keep = {0, len(points) - 1}
    keep |= {i for i in range(1, len(points)) if points[i]["s"] != points[i - 1]["s"]}
    rest = [i for i in range(len(points)) if i not in keep]
    room = max(0, MAX_POINTS - len(keep))
    if rest and room:
        step = len(rest) / room
        keep |= {rest[int(k * step)] for k in range(room)}
    return [points[i] for i in sorted(keep)]


def read_timeline(path: Path, trial_id: str | None = None) -> dict[str, Any] | None:
    """``{"stages": [names], "states": STAGE_STATES, "points": [{"t", "is", "es", "s": [state index per stage]}],
    "final": bool}`` of the trial in ``path`` (the scores naming ``trial_id``, or all of them in a one-trial
    recording); None when the recording holds no score. A recording that cannot be read raises ValueError."""
    try:
        events = _texts(path)
    except Exception as exc:  # rosbags raises its own error types for unreadable bags
        raise ValueError(f"{path}: not a readable recording ({type(exc).__name__}: {exc})") from None
    scores = [(t, v) for t, topic, v in events if topic == topics.SCORE
              and (trial_id is None or v.get("trial_id") in (None, trial_id))]
    if not scores:
        return None
    names = list(dict.fromkeys(n for _, v in scores for n in (v.get("stages") or {})))
    t0 = scores[0][0]
    points: list[dict[str, Any]] = [
        {"t": round((t - t0) / 1e9, 3), "is": float(v.get("intent", 0.0)), "es": float(v.get("exec", 0.0)),
         "s": _states(v.get("stages") or {}, names, bool(v.get("final")))} for t, v in scores]
    final = bool(scores[-1][1].get("final"))
    results = [(t, v["result"]) for t, topic, v in events if topic == topics.RESULT
               and isinstance(v.get("result"), Mapping) and (trial_id is None or v.get("trial") in (None, trial_id))]
    if not final and results:
        t, result = results[-1]
        stages = _result_stages(result)
        names += [n for n in stages if n not in names]
        for p in points:
            p["s"] += [STAGE_STATES.index("pending")] * (len(names) - len(p["s"]))
        points.append({"t": round(max(t - t0, 0) / 1e9, 3), "is": float(result.get("intent_score", 0.0)),
                       "es": float(result.get("exec_score", 0.0)), "s": _states(stages, names, True)})
        final = True
    return {"stages": names, "states": list(STAGE_STATES), "points": _thin(points), "final": final}
