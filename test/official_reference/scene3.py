"""Scene 3: the official ``Scene3ThreeStageEvaluator`` (source, route, orientation) and its ``run_once`` tail."""

from __future__ import annotations

import numpy as np

from official_reference.common import (
    PhaseResult,
    apply_gates,
    closes,
    dist_xy,
    failed,
    is_complete,
    messages,
    source_select,
    wrong_arm_penalised,
)

PAIR = {"red_bar_2": "green_bar_3", "green_bar_3": "red_bar_2", "yellow_bar_4": "blue_bar_5",
        "blue_bar_5": "yellow_bar_4"}
TARGET_YAW = {"short_front": 0.0, "long_right": 0.0, "long_front": np.pi / 2, "short_right": np.pi / 2}



class Scene3Evaluator:
    def __init__(self, task, traj) -> None:  # type: ignore[no-untyped-def]
        self.task, self.traj = task, traj
        self.other_arm = "right" if task.arm == "left" else "left"
        self.yaw_intent, self.yaw_exec = np.deg2rad(40.0), np.deg2rad(20.0)
        self.wrong_arm = False

    @staticmethod
    def wrap(angle: float) -> float:
        return float((angle + np.pi) % (2 * np.pi) - np.pi)

    @staticmethod
    def yaw(q) -> float:  # type: ignore[no-untyped-def]
        w, x, y, z = (float(v) for v in q)
        return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))

    def axis_error(self, yaw: float, target: float) -> float:
        return min(abs(self.wrap(yaw - c)) for c in (target, target + np.pi, target - np.pi))

    def label_edge(self) -> float | None:
        half = self.traj.label_half_size.get(self.task.target)
        if half is None:
            half = self.traj.config_label_half_size.get(self.task.target)
        if half is None:
            return None
        return 2.0 * float(max(half[0], half[1]))

    def stage1(self) -> tuple[PhaseResult, dict]:
        ctx: dict = {"close_t": None}
        task, traj = self.task, self.traj
        if traj.n_steps <= 0 or task.source not in traj.obj_pos:
            return failed("stage1_source_select", "trajectory/source missing", 0.3), ctx
        close, other, first_arm = closes(traj, task.arm, self.other_arm)
        ctx["close_t"] = close
        self.wrong_arm = other is not None or first_arm != task.arm
        if close is None:
            return failed("stage1_source_select", "operating arm never closed gripper", 0.3), ctx
        names = [n for n in traj.obj_pos if n not in traj.labels]
        return source_select(traj, task, close, names, 0.3, 0.01, self.wrong_arm), ctx

    def stage2(self, ctx: dict) -> PhaseResult:
        close = ctx["close_t"]
        if close is None:
            return failed("stage2_route", "no grasp close event", 0.3)
        if self.task.route_mode == "via":
            correct, wrong = self.task.via, PAIR.get(self.task.via, self.task.via)
        else:
            correct, wrong = PAIR.get(self.task.via, self.task.via), self.task.via
        pos = self.traj.obj_pos[self.task.source]
        z0 = float(pos[0][2])
        lifted, best, found = False, None, False
        for t in range(close + 1, self.traj.n_steps):
            src, c, w = pos[t], self.traj.obj_pos[correct][t], self.traj.obj_pos[wrong][t]
            if float(src[2]) - z0 >= 0.01:
                lifted = True
            if not lifted:
                continue
            x = abs(float(src[0]) - float(c[0]))
            yc = abs(float(src[1]) - float(c[1]))
            yw = abs(float(src[1]) - float(w[1]))
            if x < 0.01 and yc < 0.06 and yw > 0.04 and yc < yw:
                found, best = True, (x, yc, yw)
                break
            if best is None or (x + yc - yw) < (best[0] + best[1] - best[2]):
                best = (x, yc, yw)
        if found:
            assert best is not None
            why = (f"ok: |x-src-correct|={best[0] * 100:.1f}cm, |y-src-correct|={best[1] * 100:.1f}cm, "
                   f"|y-src-wrong|={best[2] * 100:.1f}cm")
            return PhaseResult("stage2_route", 0.3, why, 0.3, why, 0.3)
        if best is None:
            return failed("stage2_route", "no post-grasp lifted trajectory", 0.3)
        return failed("stage2_route", "need |x-src-correct|<1.0cm, |y-src-correct|<6.0cm, |y-src-wrong|>4.0cm, and "
                     f"|y-src-correct|<|y-src-wrong|; best={best[0] * 100:.1f}/{best[1] * 100:.1f}/"
                     f"{best[2] * 100:.1f}cm", 0.3)

    def stage3(self, ctx: dict) -> PhaseResult:
        if ctx["close_t"] is None:
            return failed("stage3_orientation", "no grasp close event", 0.4)
        edge = self.label_edge()
        if edge is None:
            return failed("stage3_orientation", "target label size missing", 0.4)
        last = self.traj.n_steps - 1
        target_yaw = float(TARGET_YAW[self.task.place_mode])
        err = self.axis_error(self.yaw(self.traj.obj_quat[self.task.source][last]), target_yaw)
        dist = dist_xy(self.traj.obj_pos[self.task.source][last], self.traj.obj_pos[self.task.target][last])
        place_ok = dist < edge
        verdicts = []
        for limit in (self.yaw_intent, self.yaw_exec):
            yaw_ok = err <= limit
            if yaw_ok and place_ok:
                verdicts.append((True, "ok"))
                continue
            reasons = []
            if not yaw_ok:
                reasons.append(f"final yaw error={np.rad2deg(err):.1f}deg (need <= {np.rad2deg(limit):.1f}deg)")
            if not place_ok:
                reasons.append(f"final center distance={dist * 100:.1f}cm (need < {edge * 100:.1f}cm)")
            verdicts.append((False, "; ".join(reasons)))
        (i_ok, iw), (e_ok, ew) = verdicts
        return PhaseResult("stage3_orientation", 0.4 if i_ok else 0.0, iw, 0.4 if e_ok else 0.0, ew, 0.4)

    def evaluate(self) -> list[PhaseResult]:
        self.wrong_arm = False
        s1, ctx = self.stage1()
        return apply_gates(s1, self.stage2(ctx), self.stage3(ctx))


def result_entry(task, traj) -> dict:  # type: ignore[no-untyped-def]
    ev = Scene3Evaluator(task, traj)
    phases = ev.evaluate()
    intent = sum(p.intent_score for p in phases)
    exec_ = sum(p.exec_score for p in phases)
    max_total = sum(p.max_score for p in phases)
    intent, exec_, ip, ep = wrong_arm_penalised(phases, intent, exec_, ev.wrong_arm)
    intent_ok, exec_ok, imsg, emsg = messages(intent, exec_, max_total)
    if ip > 0.0:
        imsg += f" (-{ip:.1f} wrong-arm penalty)"
    if ep > 0.0:
        emsg += f" (-{ep:.1f} wrong-arm penalty)"
    return {"task": task.name, "instruction": task.instruction, "intent_ok": intent_ok, "intent_msg": imsg,
            "exec_ok": exec_ok, "completion_ok": is_complete(phases, intent, exec_, task.action), "exec_msg": emsg,
            "intent_score": float(intent), "exec_score": float(exec_), "wrong_arm_intervened": ev.wrong_arm,
            "wrong_arm_intent_penalty": float(ip), "wrong_arm_exec_penalty": float(ep),
            "phases": [p.as_dict() for p in phases]}
