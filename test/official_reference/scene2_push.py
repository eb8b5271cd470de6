"""Scene 2 push stages of the official ``Scene2ThreeStageEvaluator``: push setup, the push, the push retry bonus."""

from __future__ import annotations

import numpy as np

from official_reference.common import PhaseResult, cos_similarity_2d, dist_xy, failed, nearest_name


class PushStages:
    """Mixed into the Scene 2 evaluator; both grippers' closes use 0.25 in push tasks."""

    def stage1_push(self, top: float) -> tuple[PhaseResult, dict]:
        ctx = {"close_t": None, "open_t": None, "stage2_intent_t": None}
        task, traj = self.task, self.traj
        if traj.n_steps <= 0 or task.source not in traj.obj_pos:
            return failed("stage1_push_setup", "trajectory/source missing", top), ctx
        close, wrong = self.closes(0.25)
        ctx["close_t"] = close
        if close is None:
            return failed("stage1_push_setup", "operating arm never fully closed gripper", top), ctx
        pos = traj.obj_pos[task.source]
        z0 = float(pos[0][2])
        ref = np.asarray(pos[close][:2])
        pushed, on_move, max_leave = False, 0.0, 0.0
        best_xy = float("inf")
        move_eval_t = move_offset = near_table = None
        intent = exec_ = False
        for t in range(close + 1, traj.n_steps):
            src, ee = pos[t], traj.ee[task.arm][t]
            move = float(np.linalg.norm(np.asarray(src[:2]) - ref))
            lift = max(0.0, float(src[2]) - z0)
            max_leave = max(max_leave, lift)
            on_table = lift <= 0.02
            if on_table:
                on_move = max(on_move, move)
            if not on_table or move < 0.005:
                continue
            pushed = True
            src_xy = dist_xy(ee, src)
            offset = abs(float(ee[2]) - 0.12 - z0)
            if move_eval_t is None:
                move_eval_t, move_offset, near_table = t, offset, offset <= 0.12
            chosen, _ = nearest_name(ee, traj, self.sources(), t)
            closest = chosen == task.source
            if closest and src_xy < best_xy:
                best_xy = src_xy
            if closest and src_xy < 0.07:
                intent = True
            if near_table is True and closest and src_xy < 0.08:
                exec_ = True
        not_pushed = (f"source not pushed on-table (on_table_move={on_move * 100:.1f}cm, "
                      f"max_lift={max_leave * 100:.1f}cm)")
        never = "on-table push detected but source was never nearest to gripper"
        if intent:
            iw = "ok"
        elif not pushed:
            iw = not_pushed
        elif np.isfinite(best_xy):
            iw = (f"on-table push detected with source-nearest frame, best source_xy={best_xy * 100:.1f}cm "
                  f"(need < {0.07 * 100:.0f}cm)")
        else:
            iw = never
        if exec_:
            ew = "ok"
        elif not pushed:
            ew = not_pushed
        elif move_eval_t is None or move_offset is None or near_table is None:
            ew = "no valid 0.5cm push-move event found"
        elif not near_table:
            ew = (f"at first 0.5cm source move, contact point not near table enough: offset={move_offset * 100:.1f}cm "
                  f"(need < {0.12 * 100:.0f}cm)")
        elif np.isfinite(best_xy):
            ew = f"need source_xy<{0.08 * 100:.0f}cm after 0.5cm move event; got {best_xy * 100:.1f}cm"
        else:
            ew = never
        if wrong:
            iw, ew = f"{iw}; wrong arm participated", f"{ew}; wrong arm participated"
        return PhaseResult("stage1_push_setup", top if intent else 0.0, iw, top if exec_ else 0.0, ew, top), ctx

    def stage2_push(self, ctx: dict) -> PhaseResult:
        close = ctx["close_t"]
        ctx["open_t"] = None
        task, traj = self.task, self.traj
        if task.source not in traj.obj_pos or task.target not in traj.obj_pos:
            return failed("stage2_push", "source/target trajectory missing")
        if close is None:
            return failed("stage2_push", "no push-setup close event")
        pos = traj.obj_pos[task.source]
        ref = pos[close][:2]
        desired = traj.obj_pos[task.target][0][:2] - pos[0][:2]
        dn = float(np.linalg.norm(desired))
        if dn < 1e-8:
            return failed("stage2_push", "target/source overlap in initial layout")
        u = desired / dn
        best, best_cos, best_t, best_back, directional = 0.0, -1.0, None, float("inf"), False
        for t in range(close + 1, traj.n_steps):
            disp = pos[t][:2] - ref
            if float(np.linalg.norm(disp)) < 1e-6:
                continue
            cos = cos_similarity_2d(disp, desired)
            if cos < self.cos_threshold:
                continue
            directional = True
            ee_xy = np.asarray(traj.ee[task.arm][t][:2], dtype=float)
            back = float(np.dot(ee_xy - np.asarray(pos[t][:2], dtype=float), u))
            best_back = min(best_back, back)
            if back > -0.0:
                continue
            projected = float(np.dot(disp, u))
            if projected > best:
                best, best_cos, best_t = projected, cos, t
        intent, exec_ = best >= 0.01, best >= 0.02
        if intent and best_t is not None:
            ctx["stage2_intent_t"] = best_t
        if best_t is None:
            if not directional:
                iw = f"never moved in target direction (<=45deg); need >= {0.01 * 100:.0f}cm"
                ew = f"never moved in target direction (<=45deg); need >= {0.02 * 100:.0f}cm"
            else:
                iw = ew = ("directional push observed but gripper not on source back-side: best backside_proj="
                           f"{best_back * 100:.1f}cm (need <= 0.0cm, i.e., on source back-side)")
        else:
            angle = float(np.rad2deg(np.arccos(np.clip(best_cos, -1.0, 1.0))))
            iw = "ok" if intent else f"direction ok (angle={angle:.1f}deg) but moved {best * 100:.1f}cm < 1cm"
            ew = "ok" if exec_ else f"direction ok (angle={angle:.1f}deg) but moved {best * 100:.1f}cm < 2cm"
        return PhaseResult("stage2_push", 0.4 if intent else 0.0, iw, 0.4 if exec_ else 0.0, ew, 0.4)

    def push_bonus(self) -> tuple[bool, str]:
        """``_final_target_ok_for_bonus`` of a push: the best projection toward the target from frame 0."""
        task, traj = self.task, self.traj
        s0 = np.asarray(traj.obj_pos[task.source][0][:2], dtype=float)
        desired = np.asarray(traj.obj_pos[task.target][0][:2], dtype=float) - s0
        dn = float(np.linalg.norm(desired))
        if dn < 1e-8:
            return False, "target/source overlap in initial layout"
        u = desired / dn
        best = 0.0
        for t in range(traj.n_steps):
            projected = float(np.dot(np.asarray(traj.obj_pos[task.source][t][:2], dtype=float) - s0, u))
            if projected > best:
                best = projected
        ok = best >= 0.005
        return ok, "ok" if ok else f"best projected move={best * 100:.1f}cm (need >= {0.005 * 100:.1f}cm)"
