"""The action families of the threshold-edge strategies (see ``scoring_edges``): one scripted attempt per kind of task.

``FAMILIES`` maps a family name ("scene1/place_behind", "scene4/sequence_pickups", ...) to a strategy of
``Case``. Each family uses the shared skeleton (approach, close, lift, release, return) and draws the
numbers its own rules compare -- relation distance and angle, stack gap, bowl radius, push direction
and length, route offsets, label distance and yaw, slot and stack errors -- on and around their
thresholds.
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from robofollow_ros.benchmark import EvalTask
from robofollow_ros.scoring.synthetic import HOME
from scoring_edges import (
    ANGLES,
    ARMS,
    CLOSE_VALUES,
    OPEN_VALUES,
    REG,
    Builder,
    Case,
    around,
    drift,
    finish_limits,
    lift,
    mostly,
    opening,
    polar,
    release,
    return_home,
    tasks_where,
    z0_of,
)

RELATION_ANGLE = {"place_left_of": math.pi, "place_beside": 0.0, "place_behind": math.pi / 2,
                  "place_in_front": -math.pi / 2}
DEVIATIONS = st.sampled_from([0.0, 0.0, math.radians(44.9), math.radians(45.0), math.radians(45.1),
                              -math.radians(45.1), math.pi / 2])


@st.composite
def scene1_case(draw, action: str) -> Case:  # type: ignore[no-untyped-def]
    task = draw(st.sampled_from(tasks_where(lambda t: t.scene == "scene1" and t.action == action)))
    b, arm, obj = draw(opening(task))
    draw(lift(b, arm, mostly(st.just(0.05), st.one_of(around(0.01, 0.02), st.just(0.0)), 1)))
    if action != "pickup":
        tgt = b.pos[task.target]
        d = draw(mostly(st.sampled_from([0.05, 0.08]), st.one_of(around(0.12), st.just(5e-7))))
        dx, dy = polar(d, RELATION_ANGLE[action] + draw(mostly(st.just(0.0), DEVIATIONS)))
        z = z0_of(b, task.source) + draw(mostly(st.just(0.0), st.one_of(around(0.02), st.just(0.01))))
        b.carry_object_to(arm, obj, [tgt[0] + dx, tgt[1] + dy, z], draw(st.integers(1, 3)))
    elif draw(st.booleans()):
        b.carry_object_to(arm, obj, [b.pos[obj][0], b.pos[obj][1], z0_of(b, obj)], 1)
    draw(release(b, arm))
    drift(draw, b, obj)
    draw(return_home(b, arm, *finish_limits(task)))
    return b.case()


@st.composite
def scene2_case(draw, action: str) -> Case:  # type: ignore[no-untyped-def]
    task = draw(st.sampled_from(tasks_where(lambda t: t.scene == "scene2" and t.action == action)))
    if action == "push":
        return draw(push_case(task))
    b, arm, obj = draw(opening(task))
    heights = (mostly(st.just(0.05), around(0.03, 0.01), 1) if action == "pickup"
               else mostly(st.sampled_from([0.05, 0.08]), around(0.01), 1))
    draw(lift(b, arm, heights))
    if action == "stack":
        tgt = b.pos[task.target]
        dx, dy = polar(draw(mostly(st.just(0.0), st.one_of(around(0.03), st.just(0.05)))), draw(ANGLES))
        layout = REG.layout_of(task)
        resting = layout.object(obj).half_height + layout.object(task.target).half_height + 0.001
        gap = draw(mostly(st.just(resting), st.one_of(around(0.005, 0.002), st.sampled_from([0.06, 0.07]))))
        b.carry_object_to(arm, obj, [tgt[0] + dx, tgt[1] + dy, tgt[2] + gap], draw(st.integers(1, 3)))
    elif action == "place_bowl":
        bowl = b.pos[task.target]
        dx, dy = polar(draw(mostly(st.sampled_from([0.0, 0.02]), around(0.04))), draw(ANGLES))
        edges = st.one_of(st.builds(lambda d: bowl[2] + d, around(0.06)),
                          st.builds(lambda d: z0_of(b, task.source) + d, around(0.06)))
        z = draw(mostly(st.just(bowl[2] + 0.02), edges))
        b.carry_object_to(arm, obj, [bowl[0] + dx, bowl[1] + dy, z], draw(st.integers(1, 3)))
    draw(release(b, arm))
    if action == "stack" and draw(st.integers(0, 4)) == 0:
        b.pos[obj][2] = b.pos[task.target][2] + draw(around(0.002))
        b.hold(draw(st.integers(1, 3)))
    drift(draw, b, obj)
    draw(return_home(b, arm, *finish_limits(task)))
    return b.case()


@st.composite
def push_case(draw, task: EvalTask) -> Case:  # type: ignore[no-untyped-def]
    """Get behind the source, close (0.25 edges), push it toward the target at the 45-degree and cm edges."""
    other = "right" if task.arm == "left" else "left"
    b = Builder.start(task, {task.arm: draw(mostly(st.just(1.0), st.sampled_from([0.2, 0.3]), 6)),
                             other: draw(mostly(st.just(1.0), st.sampled_from([0.2, 0.3]), 6))})
    src, tgt = b.pos[task.source], b.pos[task.target]
    ux, uy = tgt[0] - src[0], tgt[1] - src[1]
    norm = math.hypot(ux, uy)
    ux, uy = ux / norm, uy / norm
    if draw(st.integers(0, 5)) == 0:  # the source moves before any close (retry bonus without a push)
        d = draw(around(0.005))
        b.pos[task.source] = [src[0] + ux * d, src[1] + uy * d, src[2]]
        b.snap()
    arm = draw(mostly(st.just(task.arm), st.just(other), 8))
    back = draw(mostly(st.sampled_from([0.03, 0.05]), around(0.0, 0.07, 0.08)))
    side = draw(mostly(st.just(0.0), st.sampled_from([0.01, -0.02])))
    s = b.pos[task.source]
    ee_z = z0_of(b, task.source) + 0.12 + draw(mostly(st.sampled_from([0.0, 0.05]), around(0.12)))
    b.move(arm, [s[0] - ux * back - uy * side, s[1] - uy * back + ux * side, ee_z], draw(st.integers(1, 2)))
    if draw(st.integers(0, 6)) == 0:
        b.grip(other, draw(CLOSE_VALUES))
    b.grip(arm, draw(CLOSE_VALUES))
    b.attach(arm, task.source)
    dev = draw(mostly(st.just(0.0), DEVIATIONS))
    total = draw(mostly(st.just(0.04), around(0.005, 0.01, 0.02)))
    steps = draw(st.integers(1, 4))
    lift_z = draw(mostly(st.just(0.0), st.sampled_from([0.0199, 0.02, 0.0201, 0.03]), 5))
    c, sn = math.cos(dev), math.sin(dev)
    dx, dy = (ux * c - uy * sn) * total, (ux * sn + uy * c) * total
    e = list(b.ee[arm])
    for k in range(1, steps + 1):
        a = k / steps
        b.move(arm, [e[0] + dx * a, e[1] + dy * a, e[2] + (lift_z if k == steps else 0.0)], 1)
    b.anchor = b.t
    b.detach(arm)
    if draw(st.booleans()):
        b.grip(arm, draw(OPEN_VALUES))
    if draw(st.integers(0, 5)) == 0:  # pushed back afterwards
        b.pos[task.source][0] -= dx
        b.snap()
    draw(return_home(b, arm, *finish_limits(task)))
    return b.case()


YAW_ERRORS = st.sampled_from([0.0, 0.0] + [s * math.radians(v) for v in (19.9, 20.0, 20.1, 39.9, 40.0, 40.1, 90.0)
                                           for s in (1, -1)] + [math.pi, math.radians(179.9), math.radians(200.0)])


@st.composite
def scene3_case(draw, route_mode: str, place_mode: str) -> Case:  # type: ignore[no-untyped-def]
    task = draw(st.sampled_from(tasks_where(
        lambda t: t.scene == "scene3" and t.route_mode == route_mode and t.place_mode == place_mode)))
    b, arm, obj = draw(opening(task))
    draw(lift(b, arm, mostly(st.just(0.05), st.one_of(around(0.01), st.just(0.0)), 1)))
    good, bad = b.pos[task.scored_pass_over_object], b.pos[task.scored_avoid_object]
    for _ in range(draw(mostly(st.just(1), st.sampled_from([0, 2])))):
        x = good[0] + draw(mostly(st.just(0.0), st.one_of(around(0.01), st.just(0.03))))
        toward = 1.0 if bad[1] > good[1] else -1.0
        y = good[1] + draw(st.sampled_from([-1.0, 1.0])) * toward * draw(
            mostly(st.sampled_from([0.0, 0.02]), around(0.06, 0.04)))
        b.carry_object_to(arm, obj, [x, y, b.pos[obj][2]], draw(st.integers(1, 2)))
    label = b.pos[task.target]
    dx, dy = polar(draw(mostly(st.sampled_from([0.0, 0.03]), around(0.0695))), draw(ANGLES))
    yaw = float(task.target_yaw_rad or 0.0) + draw(mostly(st.sampled_from([0.0, math.pi]), YAW_ERRORS))
    b.carry_object_to(arm, obj, [label[0] + dx, label[1] + dy, label[2] + 0.014], draw(st.integers(1, 2)))
    if obj in b.quat:
        b.quat[obj] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        b.snap()
    draw(release(b, arm))
    draw(return_home(b, arm, 0.10, 0.14))
    return b.case()


@st.composite
def scene4_case(draw, pick) -> Case:  # type: ignore[no-untyped-def]
    """Pickups, stacks and unstacks of Scene 4 (``pick`` selects the tasks)."""
    task = draw(st.sampled_from(tasks_where(lambda t: t.scene == "scene4" and t.action != "sequence_pickups"
                                            and pick(t))))
    b, arm, obj = draw(opening(task))
    layout = REG.layout_of(task)
    support = layout.object(obj).on_top_of
    rise_at = draw(mostly(st.just("never"), st.sampled_from(["before", "close", "after"]))) if support else "never"
    if rise_at == "close":
        b.pos[support][2] += draw(around(0.01))
        b.frames[-1]["objects"][support] = list(b.pos[support])
    draw(lift(b, arm, mostly(st.just(0.05), st.one_of(around(0.01), st.just(0.0)), 1)))
    if rise_at == "after":
        b.pos[support][2] += draw(around(0.01))
        b.snap()
    if task.action == "stack_on_target":
        tgt = b.pos[task.target]
        expected = tgt[2] + layout.object(task.source).half_height + layout.object(task.target).half_height + 0.002
        dx, dy = polar(draw(mostly(st.just(0.0), around(0.05, 0.07))), draw(ANGLES))
        dz = draw(st.sampled_from([1.0, -1.0])) * draw(mostly(st.just(0.0), around(0.05, 0.06)))
        b.carry_object_to(arm, obj, [tgt[0] + dx, tgt[1] + dy, expected + dz], draw(st.integers(1, 3)))
    elif task.action == "unstack_to_slot":
        sx, sy = REG.slot_xy[task.place_slot]  # type: ignore[index]
        dx, dy = polar(draw(mostly(st.just(0.0), around(0.05, 0.07))), draw(ANGLES))
        dz = draw(st.sampled_from([1.0, -1.0])) * draw(mostly(st.just(0.0), around(0.05, 0.07)))
        z = 0.74 + layout.object(task.source).half_height + 0.001 + dz
        b.carry_object_to(arm, obj, [sx + dx, sy + dy, z], draw(st.integers(1, 3)))
    if task.action != "pickup" or draw(st.integers(0, 3)) == 0:
        draw(release(b, arm))
    if rise_at == "before":  # the support was already up at frame 0: nothing rose after the close
        for f in b.frames:
            f["objects"][support][2] += 0.02
    drift(draw, b, obj)
    draw(return_home(b, arm, 0.10, 0.14))
    return b.case()


@st.composite
def sequence_case(draw) -> Case:  # type: ignore[no-untyped-def]
    """Two pickups in either order, overlapping, wrong object first, or one missing; both arms go home."""
    task = draw(st.sampled_from(tasks_where(lambda t: t.action == "sequence_pickups")))
    a_arm, a_src, b_arm, b_src = task.arm, task.source, task.second_arm, task.second_source
    assert b_arm is not None and b_src is not None
    b = Builder.start(task, {a_arm: draw(mostly(st.just(1.0), st.just(0.3), 5)),
                             b_arm: draw(mostly(st.just(1.0), st.just(0.3), 5))})
    layout = REG.layout_of(task)
    names = [o.name for o in layout.objects if o.is_candidate]
    if draw(st.integers(0, 5)) == 0:  # B already at its object and closed at frame 0
        p = b.pos[b_src]
        b.ee[b_arm] = [p[0] + 0.01, p[1], p[2]]
        b.g[b_arm] = 0.3
        b.frames = []
        b.snap()

    def approach(arm: str, obj: str) -> None:
        dx, dy = polar(draw(mostly(st.sampled_from([0.0, 0.03]), around(0.07))), draw(ANGLES))
        p = b.pos[obj]
        if b.g[arm] <= 0.35:
            b.grip(arm, 1.0)
        b.move(arm, [p[0] + dx, p[1] + dy, p[2]], draw(st.integers(1, 2)))

    def close(arm: str, obj: str) -> None:
        b.grip(arm, draw(CLOSE_VALUES))
        b.attach(arm, obj)

    def raise_(arm: str) -> None:
        e = b.ee[arm]
        b.move(arm, [e[0], e[1], e[2] + draw(mostly(st.just(0.05), around(0.01)))], 1)

    order = draw(mostly(st.just("AB"), st.sampled_from(["BA", "wrong_first", "A_only", "B_only", "overlap"])))
    if order == "wrong_first":
        wrong = draw(st.sampled_from([n for n in names if n != a_src]))
        approach(a_arm, wrong), close(a_arm, wrong), raise_(a_arm)
        b.detach(a_arm)
        b.grip(a_arm, 1.0)
    if order in ("AB", "wrong_first", "A_only"):
        approach(a_arm, a_src), close(a_arm, a_src), raise_(a_arm)
        if order != "A_only":
            approach(b_arm, b_src), close(b_arm, b_src), raise_(b_arm)
    elif order in ("BA", "B_only"):
        approach(b_arm, b_src), close(b_arm, b_src), raise_(b_arm)
        if order == "BA":
            approach(a_arm, a_src), close(a_arm, a_src), raise_(a_arm)
    else:  # A closes, B approaches, then A lifts while B closes in the same frame
        approach(a_arm, a_src), close(a_arm, a_src)
        approach(b_arm, b_src)
        b.ee[a_arm][2] += draw(around(0.01))
        b._carry(a_arm)
        b.g[b_arm] = draw(CLOSE_VALUES)
        b.snap()
        b.attach(b_arm, b_src)
        raise_(b_arm)
    for arm in draw(st.sampled_from([ARMS, ARMS[::-1], (a_arm,)])):
        draw(return_home(b, arm, 0.10, 0.14))
    return b.case()


@st.composite
def timing_case(draw) -> Case:  # type: ignore[no-untyped-def]
    """A clean trial whose arm reaches home 178-182 frames after the anchor and stays 19-21 frames."""
    kind = draw(st.sampled_from(["relation", "pickup", "push"]))
    if kind == "push":
        task = draw(st.sampled_from(tasks_where(lambda t: t.action == "push")))
    elif kind == "pickup":
        task = draw(st.sampled_from(tasks_where(lambda t: t.scene == "scene4" and t.action == "pickup")))
    else:
        task = draw(st.sampled_from(tasks_where(lambda t: t.scene == "scene1" and t.action != "pickup")))
    b = Builder.start(task, {"left": 1.0, "right": 1.0})
    arm, src = task.arm, task.source
    p = b.pos[src]
    if kind == "push":
        tgt = b.pos[task.target]
        ux, uy = tgt[0] - p[0], tgt[1] - p[1]
        n = math.hypot(ux, uy)
        ux, uy = ux / n, uy / n
        b.move(arm, [p[0] - ux * 0.03, p[1] - uy * 0.03, p[2] + 0.12], 2).grip(arm, 0.0)
        b.attach(arm, src)
        e = b.ee[arm]
        b.move(arm, [e[0] + ux * 0.03, e[1] + uy * 0.03, e[2]], 1)
    else:
        b.move(arm, [p[0], p[1], p[2]], 2).grip(arm, 0.0)
        b.attach(arm, src)
        b.move(arm, [p[0], p[1], p[2] + 0.05], 1)
        if kind == "relation":
            tgt = b.pos[task.target]
            dx, dy = polar(0.08, RELATION_ANGLE[task.action])
            b.carry_object_to(arm, src, [tgt[0] + dx, tgt[1] + dy, z0_of(b, src)], 2)
            b.grip(arm, 1.0)
            b.detach(arm)
    anchor = b.t
    gap = draw(st.sampled_from([178, 179, 180, 181, 182]))
    e = b.ee[arm]
    b.move(arm, [e[0], e[1], e[2] + 0.08], 1)
    b.hold(anchor + gap - 1 - b.t)
    b.detach(arm)
    b.move(arm, list(HOME[arm]), 1)
    b.hold(draw(st.sampled_from([18, 19, 20, 21])) - 1)
    if draw(st.booleans()):
        leave = finish_limits(task)[1]
        b.move(arm, [HOME[arm][0] + draw(around(leave)), HOME[arm][1], HOME[arm][2]], 1)
    n = len(b.frames)
    prefixes = sorted({anchor + 1, anchor + 2, *range(anchor + gap - 1, n + 1)})
    return b.case([k for k in prefixes if 1 <= k <= n])


#: Every action family: name -> strategy of Case.
FAMILIES: dict[str, st.SearchStrategy[Case]] = {
    **{f"scene1/{a}": scene1_case(a) for a in ("pickup", "place_behind", "place_in_front", "place_left_of",
                                               "place_beside")},
    **{f"scene2/{a}": scene2_case(a) for a in ("pickup", "stack", "place_bowl", "push")},
    # The scored route fixes the orientation family (via: *_front, around: *_right); L2/L3 phrase each
    # the other way round ("avoid X" for "via pair(X)"), so all four phrasings are among these tasks.
    **{f"scene3/{r}/{o}": scene3_case(r, o) for r, o in (("via", "short_front"), ("via", "long_front"),
                                                          ("around", "short_right"), ("around", "long_right"))},
    "scene4/pickup": scene4_case(lambda t: t.action == "pickup"),
    "scene4/stack_on_target": scene4_case(lambda t: t.action == "stack_on_target"),
    "scene4/unstack_to_slot": scene4_case(lambda t: t.action == "unstack_to_slot"),
    "scene4/conditional": scene4_case(lambda t: t.is_conditional),
    "scene4/negation": scene4_case(lambda t: "_not_" in t.base_task_type),
    "scene4/sequence_pickups": sequence_case(),
    "finish/return_timing": timing_case(),
}

# The scripted families above, scrambled (``scoring_mutations``): where no script goes.
from scoring_mutations import mutated  # noqa: E402

FAMILIES["mutated"] = mutated({k: v for k, v in FAMILIES.items() if k != "finish/return_timing"})
