"""Scene 4 ``sequence_pickups``: the official ``Scene4SequenceEvaluator``."""

from __future__ import annotations

from official_reference.common import (
    PhaseResult,
    close_events,
    dist_xy,
    failed,
    first_home_frame,
    home_dist,
    reclosed_after,
)
from official_reference.scene4 import Scene4Base


class SequenceEvaluator(Scene4Base):
    def closest(self, arm: str, t: int, source: str) -> tuple[str | None, float]:
        ee = self.traj.ee[arm][t]
        support = self.support_under(source, t)
        best, best_d = None, float("inf")
        for name in self.sources():
            if name == support:
                continue
            d = dist_xy(ee, self.traj.obj_pos[name][t])
            if d < best_d:
                best, best_d = name, d
        return best, best_d

    def matching_start(self, arm: str, source: str, start_t: int = 0) -> int | None:
        for t in close_events(self.traj.grip[arm], 0.35, start_t):
            chosen, d = self.closest(arm, t, source)
            if chosen == source and d <= 0.07:
                return t
        return None

    def pickup_from(self, arm: str, source: str, start: int) -> tuple[float, float, int | None, str, str]:
        chosen, d = self.closest(arm, start, source)
        intent = chosen == source and d <= 0.07
        z0 = float(self.traj.obj_pos[source][0][2])
        lift_t, max_lift = None, 0.0
        for t in range(start, self.traj.n_steps):
            lift = float(self.traj.obj_pos[source][t][2]) - z0
            max_lift = max(max_lift, lift)
            if lift_t is None and lift >= 0.01:
                lift_t = t
        exec_ = intent and lift_t is not None
        iw = "ok" if intent else f"closest={chosen}, dist={d * 100:.1f}cm"
        if exec_:
            ew = "ok"
        else:
            ew = f"lift={max_lift * 100:.1f}cm (<{0.01 * 100:.1f}cm)" if intent else "intent not satisfied"
        return float(intent), float(exec_), lift_t, iw, ew

    def finish(self, anchor: int) -> PhaseResult:
        """Both arms home (0.10 / 0.14 / 20 frames / 180 frames), neither re-closes; no area check."""
        problems = []
        for arm in ("left", "right"):
            arm_traj = self.traj.ee[arm]
            first_home_t = first_home_frame(arm_traj, anchor, 0.10)
            if first_home_t is None:
                problems.append(f"{arm} arm not home (final={home_dist(arm_traj, -1) * 100:.1f}cm)")
                continue
            if first_home_t - anchor > 180:
                problems.append(f"{arm} arm home too late ({first_home_t - anchor} steps)")
            for t in range(first_home_t + 1, len(arm_traj)):
                d = home_dist(arm_traj, t)
                if d > 0.14:
                    problems.append(f"{arm} arm left home again ({d * 100:.1f}cm)")
                    break
            if reclosed_after(self.traj.grip[arm], anchor):
                problems.append(f"{arm} gripper re-closed after completion")
        if problems:
            return failed("stage3_finish", "; ".join(problems), 0.2)
        return PhaseResult("stage3_finish", 0.2, "ok", 0.2, "ok", 0.2)

    def evaluate(self) -> list[PhaseResult]:
        task = self.task
        a_start = self.matching_start(task.arm, task.source)
        b_any = self.matching_start(task.second_arm, task.second_source)
        if a_start is not None and b_any is not None and b_any < a_start:
            why = f"reverse order detected: B@{b_any} < A@{a_start}"
            return [failed("stage1_action_a", why), failed("stage2_action_b", why), failed("stage3_finish", why, 0.2)]
        gated = "gated: A score is zero"
        if a_start is None:
            return [failed("stage1_action_a", "A action never started"), failed("stage2_action_b", gated),
                    failed("stage3_finish", gated, 0.2)]
        ai, ae, a_done, aiw, aew = self.pickup_from(task.arm, task.source, a_start)
        p1 = PhaseResult("stage1_action_a", 0.4 * ai, aiw, 0.4 * ae, aew, 0.4)
        if ai <= 0.0:
            return [failed("stage1_action_a", "A score is zero"), failed("stage2_action_b", gated),
                    failed("stage3_finish", gated, 0.2)]
        b_start = self.matching_start(task.second_arm, task.second_source, a_done if a_done is not None else a_start)
        if b_start is None:
            p2 = failed("stage2_action_b", "B action never started after A completion")
            b_done = a_done if a_done is not None else a_start
        else:
            bi, be, b_done, biw, bew = self.pickup_from(task.second_arm, task.second_source, b_start)
            p2 = PhaseResult("stage2_action_b", 0.4 * bi, biw, 0.4 * be, bew, 0.4)
        anchor = b_done if b_done is not None else (a_done if a_done is not None else a_start)
        return [p1, p2, self.finish(anchor)]
