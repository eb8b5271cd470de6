"""Properties: incremental trackers agree with direct transcriptions of the rules; online == offline.

The references below rescan the whole history the way the spec words each rule; the trackers
keep running facts instead. Hypothesis searches for sequences where the two disagree.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robofollow_ros.benchmark import default_registry
from robofollow_ros.scoring import StageMonitor, score_trajectory
from robofollow_ros.scoring.events import FinishTracker, GripperTrack
from robofollow_ros.scoring.synthetic import Puppet
from robofollow_ros.scoring.thresholds import CLOSE_THRESHOLD, FinishRule

SMALL_RULE = FinishRule(reset_dist=0.10, leave_home=0.14, stable_window=4, max_return_frames=6)
REAL_RULE = FinishRule(reset_dist=0.10, leave_home=0.14)


def reference_finish(dists: list[float], grips: list[float], c: int, rule: FinishRule) -> list[str]:
    """The finish problems as the evaluator words its loop: a home frame, then late / left / re-closed."""
    n = len(dists)
    w = min(rule.stable_window, max(1, n - c))
    home = next((t for t in range(c, n) if all(d <= rule.reset_dist for d in dists[t:min(t + w, n)])), None)
    out = []
    if home is None:
        out.append("not home")
    else:
        if home - c > rule.max_return_frames:
            out.append("late")
        if any(d > rule.leave_home for d in dists[home + 1:]):
            out.append("left")
    if any(grips[t - 1] > CLOSE_THRESHOLD >= grips[t] for t in range(max(1, c + 1), n)):
        out.append("reclosed")
    return out


def tracker_finish(dists: list[float], grips: list[float], c: int, rule: FinishRule) -> list[str]:
    tracker = FinishTracker(rule, c)
    for t in range(c, len(dists)):
        tracker.update(t, dists[t], grips[t])
    kinds = (("did not return", "not home"), ("too late", "late"), ("left home", "left"), ("re-closed", "reclosed"))
    return [word for problem in tracker.problems("left") for key, word in kinds if key in problem]


distances = st.sampled_from([0.0, 0.05, 0.10, 0.11, 0.14, 0.15, 0.3])
grippers = st.sampled_from([0.0, 0.3, 0.35, 0.36, 0.7, 1.0])


@given(st.lists(st.tuples(distances, grippers), min_size=1, max_size=40), st.data())
@settings(max_examples=400, deadline=None)
def test_finish_tracker_matches_the_rule_as_worded(rows, data):
    dists, grips = [r[0] for r in rows], [r[1] for r in rows]
    c = data.draw(st.integers(0, len(rows) - 1))
    for rule in (SMALL_RULE, REAL_RULE):
        assert tracker_finish(dists, grips, c, rule) == reference_finish(dists, grips, c, rule)


@given(st.lists(grippers, min_size=1, max_size=30))
@settings(max_examples=300, deadline=None)
def test_first_close_matches_the_rule_as_worded(gs):
    track = GripperTrack()
    for t, g in enumerate(gs):
        track.update(t, g)
    c = CLOSE_THRESHOLD
    crossing = next((t for t in range(1, len(gs)) if gs[t - 1] > c >= gs[t]), None)
    fallback = next((t for t in range(len(gs)) if gs[t] <= c), None)
    assert track.first_close == (crossing if crossing is not None else fallback)


# --- online == offline on random scripted trials ------------------------------------------------------------
_REG = default_registry()
_TASKS = [_REG.eval_task(t) for t in (
    "L0_place_yellow_block_1_behind_red_cylinder", "L0_pickup_yellow_block_1_left",
    "L0_stack_left_cube_on_red_cylinder", "L0_place_right_cube_in_green_bowl", "L0_push_left_cube_to_red_cylinder",
    "L0_r_pick2_via4_to6_short_front", "L0_s41_r_pick_green_cylinder_top", "L0_s41_r_stack_green_cylinder_on_yellow",
    "L0_s41_r_unstack_green_cylinder_to_slot6", "L0_s41_seq_l_bowl_then_r_green_cylinder")]

coord = st.floats(-0.25, 0.25, allow_nan=False)
step = st.one_of(
    st.tuples(st.just("move"), st.sampled_from(["left", "right"]), coord, coord, st.floats(0.74, 1.0)),
    st.tuples(st.just("pick"), st.sampled_from(["left", "right"]), st.integers(0, 10)),
    st.tuples(st.just("close"), st.sampled_from(["left", "right"]), st.sampled_from([0.0, 0.2, 0.3])),
    st.tuples(st.just("open"), st.sampled_from(["left", "right"])),
    st.tuples(st.just("home"), st.sampled_from(["left", "right"]), st.integers(1, 25)),
)


def scripted(task_index: int, steps: list[tuple]) -> Puppet:
    p = Puppet(_TASKS[task_index], _REG)
    names = [o.name for o in p.layout.objects if o.is_candidate]
    for s in steps:
        if s[0] == "move":
            p.move(s[1], (s[2], s[3], s[4]), steps=3)
        elif s[0] == "pick":
            p.pick(s[1], names[s[2] % len(names)], lift=0.05)
        elif s[0] == "close":
            p.close(s[1], value=s[2])
        elif s[0] == "open":
            p.open(s[1])
        else:
            p.home(s[1], steps=2, stay=s[2])
    return p


@given(st.integers(0, len(_TASKS) - 1), st.lists(step, min_size=1, max_size=8))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_online_result_equals_fresh_offline_score_at_every_frame(task_index, steps):
    p = scripted(task_index, steps)
    monitor = StageMonitor(p.task, _REG)
    for k, frame in enumerate(p.frames):
        monitor.update(frame)
        if k % 7 == 0 or k == len(p.frames) - 1:
            assert monitor.result() == score_trajectory(p.task, p.frames[:k + 1], _REG)
            monitor.live()  # reading live state must not disturb the running facts
    assert monitor.result() == score_trajectory(p.task, p.frames, _REG)
