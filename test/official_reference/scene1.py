"""Scene 1: the official ``Scene1ThreeStageEvaluator`` and the tail of its ``run_once``."""

from __future__ import annotations

import numpy as np

from official_reference.common import (
    PhaseResult,
    apply_gates,
    apply_gates_pickup,
    closes,
    cos_similarity_2d,
    finish_stage,
    first_open_event_after,
    is_complete,
    messages,
    source_select,
    wrong_arm_penalised,
)

RELATIONS = ("place_behind", "place_in_front", "place_left_of", "place_beside")
DIRECTIONS = {"place_left_of": (-1.0, 0.0), "place_beside": (1.0, 0.0), "place_behind": (0.0, 1.0),
              "place_in_front": (0.0, -1.0)}


class Scene1Evaluator:
    def __init__(self, task, traj) -> None:  # type: ignore[no-untyped-def]
        self.task, self.traj = task, traj
        self.other_arm = "right" if task.arm == "left" else "left"
        self.cos_threshold = float(np.cos(np.deg2rad(45.0)))
        self.wrong_arm = False

    def evaluate(self) -> list[PhaseResult]:
        self.wrong_arm = False
        if self.task.action == "pickup":
            s1, ctx = self.stage1(0.8)
            return apply_gates_pickup(s1, self.stage3(ctx))
        s1, ctx = self.stage1(0.4)
        s2 = self.stage2(ctx)
        return apply_gates(s1, s2, self.stage3(ctx))

    def stage1(self, top: float) -> tuple[PhaseResult, dict]:
        ctx = {"close_t": None, "open_t": None, "stage2_intent_t": None}
        traj, task = self.traj, self.task
        if traj.n_steps <= 0 or task.source not in traj.obj_pos:
            why = "trajectory/source missing"
            return PhaseResult("stage1_source_select", 0.0, why, 0.0, why, top), ctx
        close, other, first_arm = closes(traj, task.arm, self.other_arm)
        ctx["close_t"] = close
        self.wrong_arm = other is not None or first_arm != task.arm
        if close is None:
            why = "operating arm never closed gripper"
            return PhaseResult("stage1_source_select", 0.0, why, 0.0, why, top), ctx
        names = [n for n in traj.obj_pos if n not in traj.labels and n not in traj.bowls]
        return source_select(traj, task, close, names, top, 0.01, self.wrong_arm), ctx

    def relation_ok_at(self, t: int) -> tuple[bool, str]:
        task, traj = self.task, self.traj
        if task.target is None:
            return False, "target missing"
        desired = np.array(DIRECTIONS[task.action], dtype=np.float64)
        vec = traj.obj_pos[task.source][t][:2] - traj.obj_pos[task.target][t][:2]
        dist = float(np.linalg.norm(vec))
        if dist > 0.12:
            return False, f"distance={dist * 100:.1f}cm > {0.12 * 100:.0f}cm"
        if dist < 1e-6:
            return False, "source/target overlap"
        cos = cos_similarity_2d(vec, desired)
        if cos < self.cos_threshold:
            return False, f"relation angle mismatch (cos={cos:.3f})"
        return True, "ok"

    def on_table(self, t: int) -> bool:
        pos = self.traj.obj_pos[self.task.source]
        return abs(float(pos[t][2]) - float(pos[0][2])) <= 0.02

    def stage2(self, ctx: dict) -> PhaseResult:
        close = ctx["close_t"]
        open_t = None if close is None else first_open_event_after(self.traj.grip[self.task.arm], close)
        ctx["open_t"] = open_t
        if close is None:
            return PhaseResult("stage2_relative_place", 0.0, "no grasp close event", 0.0, "no grasp close event", 0.4)
        pos = self.traj.obj_pos[self.task.source]
        z0 = float(pos[0][2])
        lifted, intent, iw = False, False, "source never returned to table in correct relative pose"
        for t in range(close + 1, self.traj.n_steps):
            if float(pos[t][2]) - z0 >= 0.01:
                lifted = True
            if not lifted or not self.on_table(t):
                continue
            ok, why = self.relation_ok_at(t)
            if ok:
                intent, iw = True, "ok"
                ctx["stage2_intent_t"] = t
                break
            iw = why
        exec_, ew = False, "gripper never opened in correct relative pose"
        if intent and open_t is not None:
            lifted_before = any(float(pos[t][2]) - z0 >= 0.01 for t in range(close, min(open_t + 1, self.traj.n_steps)))
            ok, why = self.relation_ok_at(open_t)
            if lifted_before and self.on_table(open_t) and ok:
                exec_, ew = True, "ok"
            else:
                ew = why if not ok else "source not on table when gripper opened"
        elif intent:
            ew = "no gripper-open event after close"
        return PhaseResult("stage2_relative_place", 0.4 if intent else 0.0, iw, 0.4 if exec_ else 0.0, ew, 0.4)

    def completion_t(self, ctx: dict) -> int:
        if self.task.target is not None and self.task.action in RELATIONS:
            if ctx.get("open_t") is not None:
                return int(ctx["open_t"])
            if ctx.get("stage2_intent_t") is not None:
                return int(ctx["stage2_intent_t"])
        pos = self.traj.obj_pos[self.task.source]
        start = ctx["close_t"] if ctx["close_t"] is not None else 0
        for t in range(start, self.traj.n_steps):
            if float(pos[t][2]) - float(pos[0][2]) >= 0.01:
                return t
        return max(0, self.traj.n_steps - 1)

    def stage3(self, ctx: dict) -> PhaseResult:
        c = self.completion_t(ctx) if self.traj.n_steps > 0 else 0
        return finish_stage(self.traj, self.task.arm, self.other_arm, c, 0.12, 0.16)


def result_entry(task, traj) -> dict:  # type: ignore[no-untyped-def]
    ev = Scene1Evaluator(task, traj)
    phases = ev.evaluate()
    intent = sum(p.intent_score for p in phases)
    exec_ = sum(p.exec_score for p in phases)
    max_total = sum(p.max_score for p in phases)
    final_ok, final_why = False, "n/a (no relation target)"
    if traj.n_steps > 0 and task.target is not None and task.action in RELATIONS:
        if traj.n_steps < 10:
            final_why = "trajectory too short for final 10-frame check"
        else:
            fail = None
            for t in range(traj.n_steps - 10, traj.n_steps):
                ok, why = ev.relation_ok_at(t)
                if not ok:
                    fail = (t, why)
                    break
                if not ev.on_table(t):
                    fail = (t, "source not on table")
                    break
            final_ok = fail is None
            final_why = "ok (last 10 frames)" if final_ok else f"final-window failed at t={fail[0]}: {fail[1]}"
    ib = eb = 0.0
    if final_ok:
        if intent < 0.5:
            ib = 0.3
            intent += ib
        if exec_ < 0.5:
            eb = 0.3
            exec_ += eb
    intent, exec_, ip, ep = wrong_arm_penalised(phases, intent, exec_, ev.wrong_arm)
    intent_ok, exec_ok, imsg, emsg = messages(intent, exec_, max_total)
    if ip > 0.0:
        imsg += f" (-{ip:.1f} wrong-arm penalty)"
    if ep > 0.0:
        emsg += f" (-{ep:.1f} wrong-arm penalty)"
    return {"task": task.name, "instruction": task.instruction, "intent_ok": intent_ok, "intent_msg": imsg,
            "exec_ok": exec_ok,
            "completion_ok": is_complete(phases, intent, exec_, task.action, final_target_ok=final_ok),
            "exec_msg": emsg, "intent_score": float(intent), "exec_score": float(exec_), "final_target_ok": final_ok,
            "final_target_reason": final_why, "final_target_window": 10, "intent_bonus": float(ib),
            "exec_bonus": float(eb), "wrong_arm_intervened": ev.wrong_arm, "wrong_arm_intent_penalty": float(ip),
            "wrong_arm_exec_penalty": float(ep), "phases": [p.as_dict() for p in phases]}
