"""Scene 4: the official ``Scene4ThreeStageEvaluator`` and ``Scene4SequenceEvaluator``, and the ``run_once`` tail."""

from __future__ import annotations

import copy

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
    is_full_success,
    messages,
    nearest_name,
)

SLOT_XY = {1: (-0.14, -0.06), 2: (-0.02, -0.06), 3: (0.10, -0.06), 4: (-0.14, -0.18), 5: (-0.02, -0.18),
           6: (0.10, -0.18)}



class Scene4Base:
    def __init__(self, task, traj) -> None:  # type: ignore[no-untyped-def]
        self.task, self.traj = task, traj

    def sources(self) -> list[str]:
        return [n for n in self.traj.obj_pos if n not in self.traj.bowls]

    def support_under(self, source: str, t: int) -> str | None:
        if source not in self.traj.obj_pos:
            return None
        src = self.traj.obj_pos[source][t]
        best, best_gap = None, float("inf")
        for name in self.sources():
            if name == source:
                continue
            obj = self.traj.obj_pos[name][t]
            gap = float(src[2]) - float(obj[2])
            if dist_xy(src, obj) <= 0.02 and gap >= 0.005 and gap < best_gap:
                best, best_gap = name, gap
        return best


class Scene4Evaluator(Scene4Base):
    def __init__(self, task, traj) -> None:  # type: ignore[no-untyped-def]
        super().__init__(task, traj)
        self.other_arm = "right" if task.arm == "left" else "left"

    def half_height(self, name: str) -> float:
        return float(self.traj.half_heights.get(name, 0.025))

    def stage1(self, top: float) -> tuple[PhaseResult, dict]:
        ctx = {"close_t": None, "open_t": None, "first_arm": None, "wrong_closed": False, "stage2_intent_t": None,
               "pickup_t": None, "support": None, "support_lift": 0.0}
        task, traj = self.task, self.traj
        if traj.n_steps <= 0 or task.source not in traj.obj_pos:
            return failed("stage1_source_select", "trajectory/source missing", top), ctx
        close, other, ctx["first_arm"] = closes(traj, task.arm, self.other_arm)
        ctx["close_t"] = close
        if task.action == "pickup":
            ctx["wrong_closed"] = other is not None and close is not None and other <= close
        else:
            ctx["wrong_closed"] = other is not None
        if close is None:
            return failed("stage1_source_select", "operating arm never closed gripper", top), ctx
        if ctx["first_arm"] != task.arm or ctx["wrong_closed"]:
            return failed("stage1_source_select", "wrong arm participated in grasp stage", top), ctx
        t = close
        ee = traj.ee[task.arm][t]
        src_xy = dist_xy(ee, traj.obj_pos[task.source][t])
        support = self.support_under(task.source, t)
        ctx["support"] = support
        if support is not None:
            z0s = float(traj.obj_pos[support][0][2])
            rise = 0.0
            for k in range(t, traj.n_steps):
                rise = max(rise, float(traj.obj_pos[support][k][2]) - z0s)
            ctx["support_lift"] = rise
        names = [n for n in self.sources() if n != support]
        chosen, _ = nearest_name(ee, traj, names, t)
        intent = chosen == task.source and src_xy < 0.07
        z0 = float(traj.obj_pos[task.source][0][2])
        lift_t, max_lift = None, 0.0
        for k in range(t, traj.n_steps):
            lift = float(traj.obj_pos[task.source][k][2]) - z0
            max_lift = max(max_lift, lift)
            if lift_t is None and lift >= 0.01:
                lift_t = k
        ctx["pickup_t"] = lift_t if lift_t is not None else t
        exec_ = intent and lift_t is not None
        iw = "ok" if intent else f"at first close: closest={chosen}, source_xy={src_xy * 100:.1f}cm"
        if exec_:
            ew = "ok"
        else:
            ew = f"source lift={max_lift * 100:.1f}cm (need >= {0.01 * 100:.1f}cm)" if intent else \
                "intent not correct at first close"
        return PhaseResult("stage1_source_select", top if intent else 0.0, iw, top if exec_ else 0.0, ew, top), ctx

    def stage2(self, ctx: dict) -> PhaseResult:
        task, traj = self.task, self.traj
        stack = task.action == "stack_on_target"
        name = "stage2_stack" if stack else "stage2_unstack_slot"
        close = ctx["close_t"]
        open_t = None if close is None else first_open_event_after(traj.grip[task.arm], close)
        ctx["open_t"] = open_t
        if stack and (task.source not in traj.obj_pos or task.target not in traj.obj_pos):
            return failed(name, "source/target trajectory missing")
        if not stack and task.source not in traj.obj_pos:
            return failed(name, "source missing")
        if ctx["wrong_closed"] or ctx["first_arm"] != task.arm:
            return failed(name, "wrong arm participated in stage1/2")
        if close is None:
            return failed(name, "no grasp close event")
        src_h = self.half_height(task.source)

        def error(t: int) -> tuple[float, float]:
            src = traj.obj_pos[task.source][t]
            if stack:
                tgt = traj.obj_pos[task.target][t]
                expected = float(tgt[2] + src_h + self.half_height(task.target) + 0.002)
                return dist_xy(src, tgt), abs(float(src[2]) - expected)
            expected = float(traj.table_height + src_h + 0.001)
            xy = float(np.linalg.norm(np.asarray(src[:2]) - np.asarray(SLOT_XY[task.place_slot])))
            return xy, abs(float(src[2]) - expected)

        lim_xy, lim_z = (0.07, 0.06) if stack else (0.07, 0.07)
        intent, best_xy, best_z = False, float("inf"), float("inf")
        for t in range(close + 1, traj.n_steps):
            xy, dz = error(t)
            best_xy, best_z = min(best_xy, xy), min(best_z, dz)
            if xy <= lim_xy and dz <= lim_z:
                intent = True
                ctx["stage2_intent_t"] = t
                break
        exec_, ew = False, "no gripper-open event after close"
        if intent and open_t is not None:
            o_xy, o_z = error(open_t)
            f_xy, f_z = error(traj.n_steps - 1)
            exec_ = o_xy <= 0.05 and o_z <= 0.05 and f_xy <= 0.05 and f_z <= 0.05
            ew = "ok" if exec_ else (f"open(xy={o_xy * 100:.1f}cm,z={o_z * 100:.1f}cm), "
                                     f"final(xy={f_xy * 100:.1f}cm,z={f_z * 100:.1f}cm)")
        what = "stack" if stack else "slot"
        iw = "ok" if intent else f"best {what} pose xy={best_xy * 100:.1f}cm z_err={best_z * 100:.1f}cm"
        return PhaseResult(name, 0.4 if intent else 0.0, iw, 0.4 if exec_ else 0.0, ew, 0.4)

    def completion_t(self, ctx: dict) -> int:
        for key in ("open_t", "stage2_intent_t", "pickup_t", "close_t"):
            if ctx.get(key) is not None:
                return int(ctx[key])
        return max(0, self.traj.n_steps - 1)

    def stage3(self, ctx: dict) -> PhaseResult:
        c = self.completion_t(ctx) if self.traj.n_steps > 0 else 0
        return finish_stage(self.traj, self.task.arm, self.other_arm, c, 0.10, 0.14)

    def evaluate(self) -> list[PhaseResult]:
        if self.task.action == "pickup":
            s1, ctx = self.stage1(0.8)
            phases = apply_gates_pickup(s1, self.stage3(ctx))
            support, lift = ctx.get("support"), float(ctx.get("support_lift", 0.0))
            if support is None or lift < 0.01:
                return phases
            phases = [copy.deepcopy(p) for p in phases]
            s = phases[0]
            s.exec_score = max(0.0, s.exec_score - 0.3)
            note = f"support-lift penalty: support={support}, lift={lift * 100:.1f}cm >= {0.01 * 100:.1f}cm, -{0.3:.2f}"
            s.exec_reason = note if s.exec_reason == "ok" else f"{s.exec_reason}; {note}"
            return phases
        s1, ctx = self.stage1(0.4)
        s2 = self.stage2(ctx)
        return apply_gates(s1, s2, self.stage3(ctx))


def is_conditional(task) -> bool:  # type: ignore[no-untyped-def]
    base = (task.base_task_type or "").lower()
    return "_if_" in base or base.startswith("if_") or (task.instruction or "").strip().lower().startswith("if ")


def result_entry(task, traj) -> dict:  # type: ignore[no-untyped-def]
    if task.action == "sequence_pickups" and task.second_source and task.second_arm:
        from official_reference.scene4_sequence import SequenceEvaluator

        phases = SequenceEvaluator(task, traj).evaluate()
    else:
        phases = Scene4Evaluator(task, traj).evaluate()
    intent = sum(p.intent_score for p in phases)
    exec_ = sum(p.exec_score for p in phases)
    max_total = sum(p.max_score for p in phases)
    intent_ok, exec_ok, imsg, emsg = messages(intent, exec_, max_total)
    return {"task": task.name, "instruction": task.instruction, "intent_ok": intent_ok, "intent_msg": imsg,
            "exec_ok": exec_ok, "completion_ok": is_complete(phases, intent, exec_, task.action),
            "conditional_full_success": is_full_success(phases, intent, exec_) if is_conditional(task) else None,
            "exec_msg": emsg, "intent_score": float(intent), "exec_score": float(exec_),
            "phases": [p.as_dict() for p in phases]}
