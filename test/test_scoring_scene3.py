"""Scene 3 rules: source select 0.3, route 0.3 (intent = exec), orientation 0.4 from the last frame."""

from __future__ import annotations

import math

import pytest

from robofollow_ros.scoring import score_trajectory, score_view
from robofollow_ros.scoring.synthetic import Puppet

# right arm: red_bar_2 (-0.09,-0.17), pass over yellow_bar_4 (0.01,-0.17), avoid blue_bar_5 (0.01,-0.09),
# place on blue_label_6 (0.11,-0.13) with yaw 0 (short side front)
TASK = "L0_r_pick2_via4_to6_short_front"


def yaw_quat(deg: float) -> tuple[float, float, float, float]:
    half = math.radians(deg) / 2
    return (math.cos(half), 0.0, 0.0, math.sin(half))


def run(via: str = "yellow_bar_4", yaw_deg: float = 0.0, on_label: bool = True, other_arm_closes: bool = False):
    p = Puppet(TASK)
    over, label = p.objects[via], p.objects["blue_label_6"]
    p.pick("right", "red_bar_2").move("right", (over[0], over[1], 0.9))
    p.set_object("red_bar_2", quat=yaw_quat(yaw_deg))
    spot = (label[0], label[1], 0.76) if on_label else (label[0] + 0.08, label[1], 0.76)
    p.place("right", spot).home("right")
    if other_arm_closes:
        p.close("left").open("left")
    return score_view(score_trajectory(p.task, p.frames))


def stages(v: dict) -> list[tuple[float, float]]:
    return [(s["intent"], s["exec"]) for s in v["stages"].values()]


def test_success():
    v = run()
    assert stages(v) == [(0.3, 0.3), (0.3, 0.3), (0.4, 0.4)]
    assert (v["intent"], v["exec"], v["complete"]) == (1.0, 1.0, True)
    assert "stage3_finish" not in v["stages"]


def test_wrong_route_fails_route_and_gates_orientation():
    v = run(via="blue_bar_5")
    assert stages(v) == [(0.3, 0.3), (0.0, 0.0), (0.0, 0.0)]
    assert v["stages"]["stage3_orientation"]["intent_reason"].startswith("gated:")
    assert (v["intent"], v["exec"], v["complete"]) == (0.3, 0.3, False)


@pytest.mark.parametrize(("yaw", "expected"), [(30.0, (0.4, 0.0)), (-15.0, (0.4, 0.4)), (90.0, (0.0, 0.0)),
                                               (175.0, (0.4, 0.4)), (145.0, (0.4, 0.0)), (135.0, (0.0, 0.0))])
def test_orientation_error_modulo_180(yaw, expected):
    v = run(yaw_deg=yaw)
    assert stages(v)[2] == expected
    assert v["complete"] is (expected[1] > 0)


def test_off_the_label_fails_orientation():
    v = run(on_label=False)
    assert stages(v)[2] == (0.0, 0.0)
    assert "final center distance" in v["stages"]["stage3_orientation"]["intent_reason"]


def test_wrong_arm_penalty_uses_the_orientation_stage():
    v = run(other_arm_closes=True)
    assert (v["intent"], v["exec"]) == pytest.approx((0.8, 0.8))
    assert v["complete"] is True  # completion reads stage3_orientation exec, not the totals
