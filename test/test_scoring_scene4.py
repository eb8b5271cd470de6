"""Scene 4 rules: pickup (support-lift penalty), stack/unstack, grasp-stage wrong arm, conditionals, sequences."""

from __future__ import annotations

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.scoring import score_trajectory, score_view
from robofollow_ros.scoring.synthetic import Puppet

PICK_TOP = "L0_s41_r_pick_green_cylinder_top"  # right arm; green_cylinder_top sits on blue_cube_right
STACK = "L0_s41_r_stack_green_cylinder_on_yellow"
UNSTACK = "L0_s41_r_unstack_green_cylinder_to_slot6"
COND = "L0_s41_if_blue_right_of_red_then_l_pick_else_r_stack"  # expected branch: right-arm stack
SEQ = "L0_s41_seq_l_bowl_then_r_green_cylinder"  # A: left red_cube_in_bowl, B: right green_cylinder_top


def view(p: Puppet) -> dict:
    return score_view(score_trajectory(p.task, p.frames))


def stages(v: dict) -> list[tuple[float, float]]:
    return [(s["intent"], s["exec"]) for s in v["stages"].values()]


def stack_on_yellow(p: Puppet, dz: float = 0.052) -> Puppet:
    tg = p.objects["yellow_cylinder"]
    spot = (tg[0], tg[1], tg[2] + dz)
    return p.pick("right", "green_cylinder_top").place("right", spot)


def test_pickup_success_excludes_the_support_from_the_nearest_test():
    v = view(Puppet(PICK_TOP).pick("right", "green_cylinder_top").home("right"))
    assert stages(v) == [(0.8, 0.8), (0.2, 0.2)]
    assert (v["intent"], v["exec"], v["complete"], v["conditional_full_success"]) == (1.0, 1.0, True, None)


def test_pickup_support_lift_penalty():
    p = Puppet(PICK_TOP).pick("right", "green_cylinder_top")
    base = p.objects["blue_cube_right"]
    p.set_object("blue_cube_right", (base[0], base[1], base[2] + 0.02)).home("right")  # the support came along
    v = view(p)
    assert stages(v)[0] == (0.8, pytest.approx(0.5))
    assert "support-lift penalty: support=blue_cube_right" in v["stages"]["stage1_source_select"]["exec_reason"]
    assert (v["intent"], v["exec"], v["complete"]) == (1.0, pytest.approx(0.7), False)


def test_pickup_other_arm_closing_before_the_grasp_zeroes_stage1():
    p = Puppet(PICK_TOP).close("left").open("left").pick("right", "green_cylinder_top").home("right")
    v = view(p)
    assert v["stages"]["stage1_source_select"]["intent_reason"] == "wrong arm participated in grasp stage"
    assert (v["intent"], v["exec"], v["complete"]) == (0.0, 0.0, False)


def test_pickup_other_arm_closing_after_the_grasp_is_not_wrong_arm():
    p = Puppet(PICK_TOP).pick("right", "green_cylinder_top").home("right").close("left").open("left")
    v = view(p)
    assert v["stages"]["stage1_source_select"]["intent_reason"] == "ok"
    assert (v["intent"], v["exec"]) == (1.0, 1.0)  # Scene 4 has no numeric penalty
    assert "wrong_arm_intervened" not in v  # nor the Scenes 1-3 fields


def test_stack_success_and_other_arm_closing_any_time_zeroes_it():
    assert stages(view(stack_on_yellow(Puppet(STACK)).home("right"))) == [(0.4, 0.4)] * 2 + [(0.2, 0.2)]
    p = stack_on_yellow(Puppet(STACK)).home("right").close("left").open("left")
    v = view(p)
    assert v["stages"]["stage1_source_select"]["intent_reason"] == "wrong arm participated in grasp stage"
    assert v["stages"]["stage2_stack"]["intent_reason"] == "gated: stage1 intent not full"
    assert (v["intent"], v["exec"], v["complete"]) == (0.0, 0.0, False)


def test_stack_released_too_high_keeps_intent_only():
    v = view(stack_on_yellow(Puppet(STACK), dz=0.11).home("right"))  # z error 0.058: > 0.05, <= 0.06
    assert stages(v)[1] == (0.4, 0.0)
    assert v["complete"] is False  # stage2_stack exec decides completion


def test_unstack_to_slot_success_and_wrong_slot():
    reg = default_registry()
    p = Puppet(UNSTACK)
    x, y = reg.slot_xy[6]
    v = view(p.pick("right", "green_cylinder_top").place("right", (x, y, 0.766)).home("right"))
    assert (v["intent"], v["exec"], v["complete"]) == (1.0, 1.0, True)
    q = Puppet(UNSTACK)
    x, y = reg.slot_xy[5]
    w = view(q.pick("right", "green_cylinder_top").place("right", (x, y, 0.766)).home("right"))
    assert stages(w)[1] == (0.0, 0.0)
    assert (w["intent"], w["exec"], w["complete"]) == (0.4, 0.4, False)


def test_conditional_full_success():
    full = view(stack_on_yellow(Puppet(COND)).home("right"))
    assert full["conditional_full_success"] is True
    partial = view(stack_on_yellow(Puppet(COND)).hold(3))  # never returns home
    assert partial["conditional_full_success"] is False
    assert (partial["intent"], partial["exec"], partial["complete"]) == (0.8, 0.8, True)


def seq(p: Puppet, first: str = "A", b: bool = True) -> Puppet:
    order = [("left", "red_cube_in_bowl"), ("right", "green_cylinder_top")]
    if first == "B":
        order.reverse()
    if not b:
        order = order[:1]
    for arm, name in order:
        p.pick(arm, name)
    for arm, _ in order:
        p.home(arm)
    return p


def test_sequence_success():
    v = view(seq(Puppet(SEQ)))
    assert stages(v) == [(0.4, 0.4), (0.4, 0.4), (0.2, 0.2)]
    assert v["complete"] is True


def test_sequence_reverse_order_scores_zero():
    v = view(seq(Puppet(SEQ), first="B"))
    assert stages(v) == [(0.0, 0.0)] * 3
    assert "reverse order" in v["stages"]["stage1_action_a"]["intent_reason"]


def test_sequence_without_b():
    v = view(seq(Puppet(SEQ), b=False))
    assert stages(v) == [(0.4, 0.4), (0.0, 0.0), (0.2, 0.2)]
    assert (v["intent"], v["exec"], v["complete"]) == (pytest.approx(0.6), pytest.approx(0.6), False)


def test_sequence_without_a_scores_zero():
    p = Puppet(SEQ).pick("right", "green_cylinder_top").home("right")
    v = view(p)
    assert stages(v) == [(0.0, 0.0)] * 3
    assert v["stages"]["stage1_action_a"]["intent_reason"] == "A action never started"
    assert (v["intent"], v["exec"]) == (0.0, 0.0)


def test_sequence_finish_needs_both_arms_home():
    p = Puppet(SEQ).pick("left", "red_cube_in_bowl").pick("right", "green_cylinder_top").home("left").hold(5)
    v = view(p)
    assert stages(v)[2] == (0.0, 0.0)
    assert "right arm not home" in v["stages"]["stage3_finish"]["exec_reason"]
