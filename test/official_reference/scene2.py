"""Scene 2: the official ``Scene2ThreeStageEvaluator`` (grasp, stack, push, bowl), retry bonus, ``run_once`` tail."""

from __future__ import annotations

import numpy as np

from official_reference.common import (
    PhaseResult,
    apply_gates,
    apply_gates_pickup,
    closes,
    dist_xy,
    failed,
    finish_stage,
    first_open_event_after,
    is_complete,
    messages,
    nearest_name,
    source_select,
    wrong_arm_penalised,
)
from official_reference.scene2_push import PushStages


class Scene2Evaluator(PushStages):
    def __init__(self, task, traj) -> None:  # type: ignore[no-untyped-def]
        self.task, self.traj = task, traj
        self.other_arm = "right" if task.arm == "left" else "left"
        self.cos_threshold = float(np.cos(np.deg2rad(45.0)))
        self.wrong_arm = False

    def sources(self) -> list[str]:
        return [n for n in self.traj.obj_pos if n not in self.traj.labels and n not in self.traj.bowls]

    def evaluate(self) -> list[PhaseResult]:
        self.wrong_arm = False
        if self.task.action == "pickup":
            s1, ctx = self.stage1_grasp(0.8)
            return apply_gates_pickup(s1, self.stage3(ctx))
        s1, ctx = self.stage1_push(0.4) if self.task.action == "push" else self.stage1_grasp(0.4)
        stage2 = {"stack": self.stage2_stack, "push": self.stage2_push, "place_bowl": self.stage2_place}
        s2 = stage2[self.task.action](ctx)
        return apply_gates(s1, s2, self.stage3(ctx))

    def closes(self, threshold: float) -> tuple[int | None, bool]:
        close, other, first_arm = closes(self.traj, self.task.arm, self.other_arm, threshold)
        self.wrong_arm = other is not None or first_arm != self.task.arm
        return close, self.wrong_arm

    def stage1_grasp(self, top: float) -> tuple[PhaseResult, dict]:
        ctx = {"close_t": None, "open_t": None, "stage2_intent_t": None}
        task, traj = self.task, self.traj
        if traj.n_steps <= 0 or task.source not in traj.obj_pos:
            return failed("stage1_source_select", "trajectory/source missing", top), ctx
        close, wrong = self.closes(0.35)
        ctx["close_t"] = close
        if close is None:
            return failed("stage1_source_select", "operating arm never closed gripper", top), ctx
        need = 0.03 if task.action == "pickup" else 0.01
        return source_select(traj, task, close, self.sources(), top, need, wrong), ctx

    def stacked_at(self, t: int) -> tuple[bool, float, float]:
        src, tgt = self.traj.obj_pos[self.task.source][t], self.traj.obj_pos[self.task.target][t]
        xy, dz = dist_xy(src, tgt), float(src[2] - tgt[2])
        return xy <= 0.03 and dz > 0.005, xy, dz

    def in_bowl_at(self, t: int) -> tuple[bool, float]:
        src, bowl = self.traj.obj_pos[self.task.source][t], self.traj.obj_pos[self.task.target][t]
        xy = dist_xy(src, bowl)
        return xy <= 0.04 and float(src[2]) <= float(bowl[2]) + 0.06, xy

    def bowl_nearest_at(self, t: int) -> bool:
        bowls = sorted(n for n in self.traj.bowls if n in self.traj.obj_pos)
        if self.task.target not in bowls:
            return False
        chosen, _ = nearest_name(self.traj.obj_pos[self.task.source][t], self.traj, bowls, t)
        return chosen == self.task.target

    def stage2_stack(self, ctx: dict) -> PhaseResult:
        close = ctx["close_t"]
        open_t = None if close is None else first_open_event_after(self.traj.grip[self.task.arm], close)
        ctx["open_t"] = open_t
        if self.task.source not in self.traj.obj_pos or self.task.target not in self.traj.obj_pos:
            return failed("stage2_stack", "source/target trajectory missing")
        if close is None:
            return failed("stage2_stack", "no grasp close event")
        pos, tpos = self.traj.obj_pos[self.task.source], self.traj.obj_pos[self.task.target]
        z0 = float(pos[0][2])
        lifted, intent, iw = False, False, "source never reached valid stack intent pose"
        for t in range(close + 1, self.traj.n_steps):
            sz, tz = float(pos[t][2]), float(tpos[t][2])
            if sz - z0 >= 0.01:
                lifted = True
            if not lifted:
                continue
            ee_src = dist_xy(self.traj.ee[self.task.arm][t], pos[t])
            if sz > tz + 0.005 and ee_src <= 0.07:
                intent, iw = True, "ok"
                ctx["stage2_intent_t"] = t
                break
            iw = (f"need source above target and ee-source<={0.07 * 100:.0f}cm; got z_diff={(sz - tz) * 100:.1f}cm "
                  f"ee_source={ee_src * 100:.1f}cm")
        exec_, ew = False, "gripper never opened with stable stacked result"
        if intent and open_t is not None:
            o_ok, o_xy, o_dz = self.stacked_at(open_t)
            f_ok, f_xy, f_dz = self.stacked_at(self.traj.n_steps - 1)
            dropped = any(float(pos[t][2]) <= float(tpos[t][2]) + 0.002 for t in range(open_t, self.traj.n_steps))
            exec_ = o_ok and f_ok and not dropped
            ew = "ok" if exec_ else (f"open(xy={o_xy * 100:.1f}cm,z_diff={o_dz * 100:.1f}cm), "
                                     f"final(xy={f_xy * 100:.1f}cm,z_diff={f_dz * 100:.1f}cm), dropped={dropped}")
        elif intent:
            ew = "no gripper-open event after close"
        return PhaseResult("stage2_stack", 0.4 if intent else 0.0, iw, 0.4 if exec_ else 0.0, ew, 0.4)

    def stage2_place(self, ctx: dict) -> PhaseResult:
        close = ctx["close_t"]
        open_t = None if close is None else first_open_event_after(self.traj.grip[self.task.arm], close)
        ctx["open_t"] = open_t
        if self.task.source not in self.traj.obj_pos or self.task.target not in self.traj.obj_pos:
            return failed("stage2_place_bowl", "source/target trajectory missing")
        if close is None:
            return failed("stage2_place_bowl", "no grasp close event")
        pos = self.traj.obj_pos[self.task.source]
        z0 = float(pos[0][2])
        intent, iw = False, "no valid low-height in-bowl approach near target bowl"
        best_xy = best_h = float("inf")
        for t in range(close + 1, self.traj.n_steps):
            h = float(pos[t][2] - z0)
            if h >= 0.06:
                continue
            inside, xy = self.in_bowl_at(t)
            nearest_ok = self.bowl_nearest_at(t)
            best_xy, best_h = min(best_xy, xy), min(best_h, h)
            if nearest_ok and xy <= 0.04 and inside:
                intent, iw = True, "ok"
                ctx["stage2_intent_t"] = t
                break
        exec_, ew = False, "gripper never opened with object placed in target bowl"
        if intent and open_t is not None:
            i_open, xy_open = self.in_bowl_at(open_t)
            i_fin, xy_fin = self.in_bowl_at(self.traj.n_steps - 1)
            exec_ = i_open and xy_open <= 0.04 and i_fin and xy_fin <= 0.04
            ew = "ok" if exec_ else (f"open(xy={xy_open * 100:.1f}cm,in_bowl={i_open}), "
                                     f"final(xy={xy_fin * 100:.1f}cm,in_bowl={i_fin})")
        elif intent:
            ew = "no gripper-open event after close"
        if not intent and np.isfinite(best_xy) and np.isfinite(best_h):
            iw = (f"best low-height approach: h={best_h * 100:.1f}cm, xy={best_xy * 100:.1f}cm "
                  f"(need <={0.04 * 100:.0f}cm and in target bowl)")
        return PhaseResult("stage2_place_bowl", 0.4 if intent else 0.0, iw, 0.4 if exec_ else 0.0, ew, 0.4)

    def completion_t(self, ctx: dict) -> int:
        if self.task.action in ("stack", "place_bowl"):
            if ctx.get("open_t") is not None:
                return int(ctx["open_t"])
            if ctx.get("stage2_intent_t") is not None:
                return int(ctx["stage2_intent_t"])
        if self.task.action == "push":
            if ctx.get("stage2_intent_t") is not None:
                return int(ctx["stage2_intent_t"])
            if ctx.get("close_t") is not None:
                return int(ctx["close_t"])
        pos = self.traj.obj_pos[self.task.source]
        start = ctx["close_t"] if ctx["close_t"] is not None else 0
        for t in range(start, self.traj.n_steps):
            if float(pos[t][2]) - float(pos[0][2]) >= 0.01:
                return t
        return max(0, self.traj.n_steps - 1)

    def stage3(self, ctx: dict) -> PhaseResult:
        c = self.completion_t(ctx) if self.traj.n_steps > 0 else 0
        return finish_stage(self.traj, self.task.arm, self.other_arm, c, 0.10, 0.14)

    def final_target_for_bonus(self) -> tuple[bool, str]:
        task, traj = self.task, self.traj
        if traj.n_steps <= 0:
            return False, "empty trajectory"
        last = traj.n_steps - 1
        if task.action == "push":
            return self.push_bonus()
        if task.action == "stack":
            ok, xy, dz = self.stacked_at(last)
            return ok, "ok" if ok else f"final stack mismatch: xy={xy * 100:.1f}cm, z_diff={dz * 100:.1f}cm"
        if task.action == "place_bowl":
            inside, xy = self.in_bowl_at(last)
            nearest_ok = self.bowl_nearest_at(last)
            ok = inside and nearest_ok
            why = f"final place mismatch: in_bowl={inside}, nearest={nearest_ok}, xy={xy * 100:.1f}cm"
            return ok, "ok" if ok else why
        return False, "action has no target-based bonus"


def result_entry(task, traj) -> dict:  # type: ignore[no-untyped-def]
    ev = Scene2Evaluator(task, traj)
    phases = ev.evaluate()
    intent = sum(p.intent_score for p in phases)
    exec_ = sum(p.exec_score for p in phases)
    max_total = sum(p.max_score for p in phases)
    final_ok, final_why = ev.final_target_for_bonus()
    ib = 0.3 if final_ok and intent < 0.5 else 0.0
    eb = 0.3 if final_ok and exec_ < 0.5 else 0.0
    retry = {"final_target_ok": bool(final_ok), "final_target_reason": final_why, "intent_bonus": float(ib),
             "exec_bonus": float(eb), "intent_score_after_bonus": float(min(max_total, float(intent + ib))),
             "exec_score_after_bonus": float(min(max_total, float(exec_ + eb)))}
    intent, exec_ = retry["intent_score_after_bonus"], retry["exec_score_after_bonus"]
    intent, exec_, ip, ep = wrong_arm_penalised(phases, intent, exec_, ev.wrong_arm)
    intent_ok, exec_ok, imsg, emsg = messages(intent, exec_, max_total)
    if ib > 0.0:
        imsg += f" (+{ib:.1f} retry bonus)"
    if eb > 0.0:
        emsg += f" (+{eb:.1f} retry bonus)"
    if ip > 0.0:
        imsg += f" (-{ip:.1f} wrong-arm penalty)"
    if ep > 0.0:
        emsg += f" (-{ep:.1f} wrong-arm penalty)"
    return {"task": task.name, "instruction": task.instruction, "intent_ok": intent_ok, "intent_msg": imsg,
            "exec_ok": exec_ok, "completion_ok": is_complete(phases, intent, exec_, task.action,
                                                             retry_final_target_ok=retry["final_target_ok"]),
            "exec_msg": emsg, "intent_score": float(intent), "exec_score": float(exec_), "retry_bonus": retry,
            "wrong_arm_intervened": ev.wrong_arm, "wrong_arm_intent_penalty": float(ip),
            "wrong_arm_exec_penalty": float(ep), "phases": [p.as_dict() for p in phases]}
