"""What the official per-scene evaluators share: events, distances, phase records, gates, finish, completion."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

OPERATION_AREA = {"x": (-0.20, 0.15), "y": (-0.15, 0.15), "z": (0.74, 1.0)}
EPS = 1e-6


@dataclass
class PhaseResult:
    phase_name: str
    intent_score: float
    intent_reason: str
    exec_score: float
    exec_reason: str
    max_score: float

    def as_dict(self) -> dict:
        return {"phase": self.phase_name, "intent_score": self.intent_score, "intent_reason": self.intent_reason,
                "exec_score": self.exec_score, "exec_reason": self.exec_reason, "max_score": self.max_score}


def failed(name: str, why: str, top: float = 0.4) -> PhaseResult:
    """A phase scoring zero for intent and execution with one reason."""
    return PhaseResult(name, 0.0, why, 0.0, why, top)


def first_close_event(grips: list[float], threshold: float = 0.35, start_t: int = 0) -> int | None:
    """A closing crossing if there is one, else the first closed frame."""
    if not grips:
        return None
    end = len(grips) - 1
    for t in range(max(start_t, 1), end + 1):
        if grips[t - 1] > threshold and grips[t] <= threshold:
            return t
    for t in range(start_t, end + 1):
        if grips[t] <= threshold:
            return t
    return None


def first_open_event_after(grips: list[float], start_t: int, threshold: float = 0.7) -> int | None:
    if not grips:
        return None
    s = max(1, min(start_t + 1, len(grips) - 1))
    for t in range(s, len(grips)):
        if grips[t - 1] < threshold and grips[t] >= threshold:
            return t
    for t in range(s, len(grips)):
        if grips[t] >= threshold:
            return t
    return None


def close_events(grips: list[float], threshold: float = 0.35, start_t: int = 0) -> list[int]:
    """Scene 4 sequences: every closing crossing from start_t, and frame 0 when searching from 0 closed."""
    if not grips:
        return []
    start_t = max(0, start_t)
    if start_t > len(grips) - 1:
        return []
    events = [t for t in range(max(1, start_t), len(grips)) if grips[t - 1] > threshold and grips[t] <= threshold]
    if start_t == 0 and grips[0] <= threshold:
        events.insert(0, 0)
    return events


def dist_xy(a, b) -> float:  # type: ignore[no-untyped-def]
    return float(np.linalg.norm(np.asarray(a[:2]) - np.asarray(b[:2])))


def cos_similarity_2d(v1, v2) -> float:  # type: ignore[no-untyped-def]
    n1 = float(np.linalg.norm(v1))
    n2 = float(np.linalg.norm(v2))
    if n1 < 1e-8 or n2 < 1e-8:
        return 0.0
    return float(np.dot(v1, v2) / (n1 * n2))


def in_operation_area(p) -> bool:  # type: ignore[no-untyped-def]
    a = OPERATION_AREA
    return a["x"][0] <= p[0] <= a["x"][1] and a["y"][0] <= p[1] <= a["y"][1] and a["z"][0] <= p[2] <= a["z"][1]


def full(score: float, maximum: float) -> bool:
    return score + EPS >= maximum


def apply_gates(stage1: PhaseResult, stage2: PhaseResult, stage3: PhaseResult) -> list[PhaseResult]:
    s1, s2, s3 = copy.deepcopy(stage1), copy.deepcopy(stage2), copy.deepcopy(stage3)
    if s1.intent_score + EPS < s1.max_score:
        s2.intent_score, s2.intent_reason = 0.0, "gated: stage1 intent not full"
    if s1.intent_score + EPS < s1.max_score or s2.intent_score + EPS < s2.max_score:
        s3.intent_score, s3.intent_reason = 0.0, "gated: prior intent not full"
    if not (full(s1.intent_score, s1.max_score) and full(s1.exec_score, s1.max_score)
            and full(s2.intent_score, s2.max_score)):
        s2.exec_score, s2.exec_reason = 0.0, "gated: stage1 intent/exec or stage2 intent incomplete"
    if not (full(s1.intent_score, s1.max_score) and full(s1.exec_score, s1.max_score)
            and full(s2.intent_score, s2.max_score) and full(s2.exec_score, s2.max_score)
            and full(s3.intent_score, s3.max_score)):
        s3.exec_score, s3.exec_reason = 0.0, "gated: prior intent/exec not full"
    return [s1, s2, s3]


def apply_gates_pickup(stage1: PhaseResult, stage3: PhaseResult) -> list[PhaseResult]:
    s1, s3 = copy.deepcopy(stage1), copy.deepcopy(stage3)
    if s1.intent_score + EPS < s1.max_score:
        s3.intent_score, s3.intent_reason = 0.0, "gated: stage1 intent not full"
    if not (full(s1.intent_score, s1.max_score) and full(s1.exec_score, s1.max_score)
            and full(s3.intent_score, s3.max_score)):
        s3.exec_score, s3.exec_reason = 0.0, "gated: stage1 intent/exec or stage3 intent incomplete"
    return [s1, s3]


def first_home_frame(arm_traj: list[np.ndarray], completion_t: int, reset: float) -> int | None:
    """First t >= completion_t whose next w frames (clipped at the end) are all within ``reset`` of frame 0."""
    home = np.asarray(arm_traj[0])
    n = len(arm_traj)
    stable = min(20, max(1, n - completion_t))
    for t in range(completion_t, n):
        dists = [float(np.linalg.norm(np.asarray(arm_traj[s]) - home)) for s in range(t, min(n, t + stable))]
        if dists and all(d <= reset for d in dists):
            return t
    return None


def home_dist(arm_traj: list[np.ndarray], t: int) -> float:
    return float(np.linalg.norm(np.asarray(arm_traj[t]) - np.asarray(arm_traj[0])))


def finish_problems(arm_traj: list[np.ndarray], completion_t: int, reset: float, limit: int, leave: float,
                    arm: str) -> list[str]:
    """The three-stage evaluators' return-home checks of the operating arm (no area, no re-close)."""
    first_home_t = first_home_frame(arm_traj, completion_t, reset)
    if first_home_t is None:
        return [f"{arm} arm did not return home stably (final dist={home_dist(arm_traj, -1) * 100:.1f}cm)"]
    out = []
    if first_home_t - completion_t > limit:
        out.append(f"{arm} arm returned too late ({first_home_t - completion_t} steps)")
    for t in range(first_home_t + 1, len(arm_traj)):
        d = home_dist(arm_traj, t)
        if d > leave:
            out.append(f"{arm} arm left home again (dist={d * 100:.1f}cm)")
            break
    return out


def reclosed_after(grips: list[float], completion_t: int, threshold: float = 0.35) -> bool:
    return any(grips[t - 1] > threshold and grips[t] <= threshold for t in range(max(1, completion_t + 1), len(grips)))


def is_complete(phases: list[PhaseResult], intent: float, exec_: float, action: str,
                final_target_ok: bool | None = None, retry_final_target_ok: bool | None = None) -> bool:
    action = (action or "").strip().lower()
    if action in {"pickup", "sequence_pickups"} or action.startswith("pickup"):
        return intent >= 0.8 and exec_ >= 0.8
    if final_target_ok is not None:
        return bool(final_target_ok)
    if retry_final_target_ok is not None:
        return bool(retry_final_target_ok)
    by_name = {p.phase_name: p.exec_score for p in phases}
    if "stage3_orientation" in by_name:
        return by_name["stage3_orientation"] > 0.0
    for name in ("stage2_stack", "stage2_unstack_slot", "stage2_place_bowl", "stage2_push"):
        if name in by_name:
            return by_name[name] > 0.0
    return False


def is_full_success(phases: list[PhaseResult], intent: float, exec_: float) -> bool:
    total = sum(p.max_score for p in phases)
    return bool(phases) and all(full(p.intent_score, p.max_score) and full(p.exec_score, p.max_score)
                                for p in phases) and full(intent, total) and full(exec_, total)


def nearest_name(point, traj, names: list[str], t: int) -> tuple[str | None, float | None]:  # type: ignore[no-untyped-def]
    best_name, best = None, None
    for name in names:
        d = dist_xy(point, traj.obj_pos[name][t])
        if best is None or d < best:
            best, best_name = d, name
    return best_name, best


def wrong_arm_penalised(phases: list[PhaseResult], intent: float, exec_: float, wrong: bool
                        ) -> tuple[float, float, float, float]:
    """Scenes 1-3: 0.2 off a total whose last phase is full, floored at 0."""
    ip = ep = 0.0
    if wrong and phases:
        tail = phases[-1]
        if tail.intent_score + EPS >= tail.max_score:
            ip = 0.2
            intent = max(0.0, intent - ip)
        if tail.exec_score + EPS >= tail.max_score:
            ep = 0.2
            exec_ = max(0.0, exec_ - ep)
    return intent, exec_, ip, ep


def messages(intent: float, exec_: float, max_total: float) -> tuple[bool, bool, str, str]:
    intent_ok = intent >= max_total * 0.99
    exec_ok = exec_ >= max_total * 0.99
    return (intent_ok, exec_ok, "ok" if intent_ok else f"intent_score={intent:.2f}/{max_total:.2f}",
            "ok" if exec_ok else f"exec_score={exec_:.2f}/{max_total:.2f}")


def closes(traj, arm: str, other_arm: str, threshold: float = 0.35) -> tuple[int | None, int | None, str | None]:  # type: ignore[no-untyped-def]
    """Both arms' first close events and which arm closed first (the task arm on a tie)."""
    close = first_close_event(traj.grip[arm], threshold)
    other = first_close_event(traj.grip[other_arm], threshold)
    if close is None and other is None:
        first_arm = None
    elif other is None or (close is not None and close <= other):
        first_arm = arm
    else:
        first_arm = other_arm
    return close, other, first_arm


def source_select(traj, task, close: int, names: list[str], top: float, need: float,  # type: ignore[no-untyped-def]
                  wrong_arm: bool) -> PhaseResult:
    """Scenes 1-3 stage 1 once the operating arm closed: nearest and < 0.07 at the first close, then a lift."""
    ee = traj.ee[task.arm][close]
    src_xy = dist_xy(ee, traj.obj_pos[task.source][close])
    chosen, _ = nearest_name(ee, traj, names, close)
    intent = chosen == task.source and src_xy < 0.07
    z0 = float(traj.obj_pos[task.source][0][2])
    max_lift = max(float(p[2]) for p in traj.obj_pos[task.source]) - z0
    exec_ = intent and max_lift >= need
    iw = "ok" if intent else f"at first close: closest={chosen}, source_xy={src_xy * 100:.1f}cm"
    if exec_:
        ew = "ok"
    elif intent:
        ew = f"source lift={max_lift * 100:.1f}cm (need >= {need * 100:.1f}cm)"
    else:
        ew = "intent not correct at first close"
    if wrong_arm:
        iw, ew = f"{iw}; wrong arm participated", f"{ew}; wrong arm participated"
    return PhaseResult("stage1_source_select", top if intent else 0.0, iw, top if exec_ else 0.0, ew, top)


def finish_stage(traj, arm: str, other_arm: str, completion_t: int, reset: float,  # type: ignore[no-untyped-def]
                 leave: float) -> PhaseResult:
    """``stage3_finish`` of the three-stage evaluators (S1, S2, S4), given completion_t."""
    if traj.n_steps <= 0:
        return PhaseResult("stage3_finish", 0.0, "empty trajectory", 0.0, "empty trajectory", 0.2)
    problems = []
    if any(in_operation_area(p) for p in traj.ee[other_arm]):
        problems.append("non-operating arm entered operation area")
    problems += finish_problems(traj.ee[arm], completion_t, reset, 180, leave, arm)
    if reclosed_after(traj.grip[arm], completion_t):
        problems.append("operating gripper re-closed after completion")
    if problems:
        why = "; ".join(problems)
        return PhaseResult("stage3_finish", 0.0, why, 0.0, why, 0.2)
    return PhaseResult("stage3_finish", 0.2, "ok", 0.2, "ok", 0.2)
