"""Hypothesis building blocks for trial trajectories that land on the scoring thresholds.

Shared by ``test_scoring_parity.py`` (a few hundred examples per family) and
``bench/scoring_parity.py`` (thousands); the families themselves are in ``scoring_families.py``.
Each family scripts a plausible attempt at one kind of task -- approach, close, lift, carry,
release, return home, with the skeleton here -- and draws every number that a rule
compares from a small set around its threshold (the threshold itself and +-0.1 mm / +-1 mm),
plus the awkward timings: closes at frame 0 or 1, objects popping up at the close frame, wrong
objects grasped first, late releases, gripper dips between 0.25 and 0.35, returns home 179, 180
or 181 frames after the anchor, either arm closed at frame 0.

A drawn case is ``Case(task, frames, prefixes)``: frames in the trajectory-file form and the
prefix lengths at which the online scorer must equal the reference (every prefix, except in the
long return-timing family where the interesting ones are listed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from official_reference import score_prefixes
from robofollow_ros.benchmark import EvalTask, Registry, default_registry
from robofollow_ros.scoring import StageMonitor, frame_from_dict
from robofollow_ros.scoring.synthetic import HOME, initial_positions

REG: Registry = default_registry()
ARMS = ("left", "right")


def around(*values: float) -> st.SearchStrategy[float]:
    """Each value, and each value +-0.1 mm and +-1 mm."""
    return st.sampled_from(sorted({v + d for v in values for d in (-1e-3, -1e-4, 0.0, 1e-4, 1e-3)}))


def mostly(good: st.SearchStrategy[Any], edge: st.SearchStrategy[Any], weight: int = 2) -> st.SearchStrategy[Any]:
    """``good`` about weight/(weight+1) of the time, else ``edge``: trials get far enough to reach later stages.

    (A percentage draw, not ``one_of`` with repeated branches: hypothesis spreads its examples over
    distinct choices, which would make every branch about equally likely.)
    """
    cut = 100 * weight // (weight + 1)
    return st.integers(0, 99).flatmap(lambda k: good if k < cut else edge)


CLOSE_VALUES = st.sampled_from([0.0, 0.2, 0.2499, 0.25, 0.2501, 0.3, 0.3499, 0.35, 0.3501])
OPEN_VALUES = st.sampled_from([0.6999, 0.7, 0.7001, 1.0])
DIP_VALUES = st.sampled_from([0.26, 0.3, 0.34, 0.36, 0.5])
ANGLES = st.sampled_from([0.0, math.pi / 2, math.pi, -math.pi / 2, math.pi / 4, 2.0])


@dataclass
class Case:
    task: EvalTask
    frames: list[dict[str, Any]]
    prefixes: list[int] | None = None  # None: every prefix

    def __repr__(self) -> str:  # hypothesis prints this for a failing example
        return f"Case({self.task.task_id!r}, {len(self.frames)} frames, prefixes={self.prefixes})"


@dataclass
class Builder:
    """Scripts both arms frame by frame; a held object keeps its offset from the EE."""

    task: EvalTask
    pos: dict[str, list[float]] = field(default_factory=dict)
    quat: dict[str, list[float]] = field(default_factory=dict)
    ee: dict[str, list[float]] = field(default_factory=dict)
    g: dict[str, float] = field(default_factory=dict)
    held: dict[str, tuple[str, list[float]] | None] = field(default_factory=dict)
    frames: list[dict[str, Any]] = field(default_factory=list)
    anchor: int | None = None

    @classmethod
    def start(cls, task: EvalTask, g0: dict[str, float]) -> Builder:
        layout = REG.layout_of(task)
        b = cls(task)
        b.pos = {n: list(p) for n, p in initial_positions(layout).items()}
        b.quat = {o.name: [1.0, 0.0, 0.0, 0.0] for o in layout.objects if o.shape == "box"}
        b.ee = {arm: list(HOME[arm]) for arm in ARMS}
        b.g = dict(g0)
        b.held = {arm: None for arm in ARMS}
        return b.snap()

    @property
    def t(self) -> int:
        return len(self.frames) - 1

    def snap(self) -> Builder:
        self.frames.append({
            "ee_left": list(self.ee["left"]), "ee_right": list(self.ee["right"]),
            "gripper_left": self.g["left"], "gripper_right": self.g["right"],
            "objects": {n: list(p) for n, p in self.pos.items()},
            "object_quats": {n: list(q) for n, q in self.quat.items()}})
        return self

    def hold(self, frames: int) -> Builder:
        for _ in range(frames):
            self.snap()
        return self

    def grip(self, arm: str, value: float) -> Builder:
        self.g[arm] = value
        return self.snap()

    def _carry(self, arm: str) -> None:
        held = self.held[arm]
        if held is not None:
            name, off = held
            self.pos[name] = [self.ee[arm][i] + off[i] for i in range(3)]

    def move(self, arm: str, to: list[float], steps: int = 1) -> Builder:
        start = list(self.ee[arm])
        for k in range(1, steps + 1):
            a = k / steps
            self.ee[arm] = list(to) if k == steps else [s + (e - s) * a for s, e in zip(start, to, strict=True)]
            self._carry(arm)
            self.snap()
        return self

    def attach(self, arm: str, name: str) -> None:
        self.held[arm] = (name, [self.pos[name][i] - self.ee[arm][i] for i in range(3)])

    def detach(self, arm: str) -> None:
        self.held[arm] = None

    def carry_object_to(self, arm: str, name: str, xyz: list[float], steps: int = 1) -> Builder:
        """Move the EE so that the held object ends exactly at ``xyz``."""
        held = self.held[arm]
        off = held[1] if held is not None and held[0] == name else [0.0, 0.0, 0.0]
        self.move(arm, [xyz[i] - off[i] for i in range(3)], steps)
        self.pos[name] = list(xyz)
        self.frames[-1]["objects"][name] = list(xyz)
        return self

    def case(self, prefixes: list[int] | None = None) -> Case:
        return Case(self.task, self.frames, prefixes)


def tasks_where(pred) -> list[EvalTask]:  # type: ignore[no-untyped-def]
    return [t for t in REG.evaluation if pred(t)]


def polar(r: float, angle: float) -> tuple[float, float]:
    return r * math.cos(angle), r * math.sin(angle)


# --- the common skeleton: approach, close, lift ---------------------------------------------------------
@st.composite
def opening(draw, task: EvalTask, close_values=CLOSE_VALUES) -> tuple[Builder, str, str]:  # type: ignore[no-untyped-def]
    """Frame 0 (either gripper possibly closed), an optional other-arm act, the approach and the close.

    Returns the builder, the arm that grasps and the object it grasps.
    """
    other = "right" if task.arm == "left" else "left"
    g0 = {task.arm: draw(mostly(st.just(1.0), st.sampled_from([0.3, 0.35, 0.0]), 6)),
          other: draw(mostly(st.just(1.0), st.sampled_from([0.3, 0.2]), 6))}
    b = Builder.start(task, g0)
    if g0[task.arm] < 1.0 and draw(st.booleans()):
        b.grip(task.arm, 1.0)
    layout = REG.layout_of(task)
    names = [o.name for o in layout.objects if o.is_candidate]
    arm = draw(mostly(st.just(task.arm), st.just(other), 8))
    obj = draw(mostly(st.just(task.source), st.sampled_from(names), 3))
    acts = st.sampled_from(["close_early", "close_same", "close_late", "area", "dip"])
    other_act = draw(mostly(st.just("none"), acts, 3))
    if other_act.startswith("close") and b.g[other] <= 0.35:
        b.grip(other, 1.0)  # closed at frame 0, closes again later: the later closing counts
    if other_act == "close_early":
        b.grip(other, draw(CLOSE_VALUES))
    elif other_act == "area":
        b.move(other, [0.1, 0.0, 0.8], draw(st.integers(1, 2)))
    r = draw(mostly(st.sampled_from([0.0, 0.02, 0.05]), around(0.07)))
    dx, dy = polar(r, draw(ANGLES))
    p = b.pos[obj]
    b.move(arm, [p[0] + dx, p[1] + dy, p[2] + draw(st.sampled_from([0.0, 0.12, 0.05]))], draw(st.integers(1, 3)))
    pop = draw(mostly(st.just(0.0), st.sampled_from([0.0099, 0.01, 0.0101]), 6))
    b.g[arm] = draw(close_values)
    if other_act == "close_same":
        b.g[other] = draw(CLOSE_VALUES)
    if pop:
        b.pos[obj][2] += pop
    b.snap()
    b.attach(arm, obj)
    if other_act == "close_late":
        b.grip(other, draw(CLOSE_VALUES))
    elif other_act == "dip":
        b.grip(other, draw(DIP_VALUES)).grip(other, 1.0)
    return b, arm, obj


@st.composite
def lift(draw, b: Builder, arm: str, heights=None) -> None:  # type: ignore[no-untyped-def]
    h = draw(heights if heights is not None else mostly(st.just(0.05), st.one_of(around(0.01), st.just(0.005)), 1))
    e = b.ee[arm]
    b.move(arm, [e[0], e[1], e[2] + h], draw(st.integers(1, 2)))
    b.anchor = b.anchor if b.anchor is not None else b.t


@st.composite
def release(draw, b: Builder, arm: str) -> None:  # type: ignore[no-untyped-def]
    """Open (maybe late, maybe not at all), maybe re-close, maybe drift the object afterwards."""
    if draw(st.integers(0, 9)) < 9:
        b.hold(draw(st.sampled_from([0, 0, 1, 3])))
        if draw(st.integers(0, 5)) == 0:
            b.grip(arm, draw(DIP_VALUES))
        b.grip(arm, draw(OPEN_VALUES))
        b.anchor = b.t
        b.detach(arm)
        if draw(st.integers(0, 6)) == 0:
            b.grip(arm, draw(CLOSE_VALUES)).grip(arm, 1.0)


@st.composite
def return_home(draw, b: Builder, arm: str, reset: float, leave: float) -> None:  # type: ignore[no-untyped-def]
    """Go back to (near) home and stay, or not; maybe leave again; then a few final frames."""
    if draw(st.integers(0, 7)) > 0:
        e = b.ee[arm]
        b.move(arm, [e[0], e[1], e[2] + 0.08], 1)
        b.detach(arm)
        rho = draw(mostly(st.sampled_from([0.0, 0.05]), st.sampled_from([reset - 1e-3, reset, reset + 1e-3])))
        dx, dy = polar(rho, draw(ANGLES))
        h = HOME[arm]
        b.move(arm, [h[0] + dx, h[1] + dy, h[2]], draw(st.integers(1, 3)))
        b.hold(draw(mostly(st.sampled_from([19, 20, 21, 25]), st.sampled_from([0, 5, 17, 18]))))
        if draw(st.integers(0, 6)) == 0:
            dx, dy = polar(draw(st.sampled_from([leave - 1e-3, leave, leave + 1e-3])), draw(ANGLES))
            b.move(arm, [h[0] + dx, h[1] + dy, h[2]], 1).move(arm, list(h), 1)
    b.hold(draw(st.sampled_from([0, 1, 3, 9, 10, 11])))


def finish_limits(task: EvalTask) -> tuple[float, float]:
    return (0.12, 0.16) if task.scene == "scene1" else (0.10, 0.14)


def z0_of(b: Builder, name: str) -> float:
    return float(b.frames[0]["objects"][name][2])


def drift(draw, b: Builder, name: str) -> None:  # type: ignore[no-untyped-def]
    """Sometimes nudge the released object (fails a final-window or last-frame check)."""
    kind = draw(mostly(st.just("none"), st.sampled_from(["z", "xy"]), 5))
    if kind == "z":
        b.pos[name][2] = z0_of(b, name) + draw(around(0.02))
    elif kind == "xy":
        b.pos[name][0] += draw(st.sampled_from([0.005, 0.02, 0.05]))
    if kind != "none":
        b.hold(draw(st.sampled_from([1, 5, 9, 10, 11])))


@dataclass
class Comparison:
    #: The first prefix where the online scorer and the reference differ, described; None if none.
    problem: str | None
    #: Prefix lengths compared.
    prefixes: int
    #: The reference entry for the whole trajectory.
    final: dict[str, Any]


def compare(case: Case) -> Comparison:
    """Feed the frames to a StageMonitor and compare its result with the reference at the case's prefixes."""
    monitor = StageMonitor(case.task, REG)
    n = len(case.frames)
    lengths = list(range(n + 1)) if case.prefixes is None else sorted(set(case.prefixes) | {n})
    wanted = score_prefixes(case.task, case.frames, REG, lengths)
    for k in range(n + 1):
        if k:
            monitor.update(frame_from_dict(case.frames[k - 1], k - 1, monitor.required_objects, monitor.required_quats))
        if k not in wanted:
            continue
        got, want = monitor.result(), wanted[k]
        if got.pop("frames") != k:
            return Comparison(f"prefix {k}: frames field {k} expected", len(lengths), wanted[n])
        if got != want:
            keys = sorted(key for key in set(got) | set(want) if got.get(key) != want.get(key))
            why = "; ".join(f"{key}: online {got.get(key)!r} != reference {want.get(key)!r}" for key in keys)
            return Comparison(f"prefix {k}: {why}", len(lengths), wanted[n])
    return Comparison(None, len(lengths), wanted[n])
