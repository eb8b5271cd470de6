"""Is the rig fit to run a trial? Health checks before and after each trial, and what each failure means.

A trial scored on a rig whose driver stopped reporting, whose camera froze or whose arm sits outside
its limits is not the policy's result, and some of these need a person before anything moves again.
So every failure has a **class**: ``record_and_continue`` (this trial fails with the reason and the
run goes on: the next trial may well be fine) or ``halt`` (the run pauses and the arm bridge holds the
arms until the operator has done what the one-line ``action`` says and calls ``/robofollow/trial/start``).

| check | when | fails when | class |
|---|---|---|---|
| ``limits`` | before, after | a joint measured beyond its URDF limit by more than the tolerance | halt |
| ``home`` | before | an arm joint farther than ``home_tolerance_rad`` from the home pose | halt |
| ``drivers`` | before, after | no ``/joint_states`` yet, or the last one older than ``driver_max_age_s`` | halt |
| ``cameras`` | before, after | a camera sent no frame within the window | halt |
|  |  | a camera below ``camera_min_hz`` | record_and_continue |
| ``calibration`` | before | the camera calibration cannot be read | halt |

ROS-free: the trial manager measures (``nodes/health_watch.py``) and this judges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robofollow_ros.contract import ARM_SLICE, ARMS, JOINT_NAMES

RECORD_AND_CONTINUE = "record_and_continue"
HALT = "halt"
FAILURE_CLASSES = (RECORD_AND_CONTINUE, HALT)
CHECKS = ("limits", "home", "drivers", "cameras", "calibration")
#: Checks that make sense after a trial too (the arm is wherever the policy left it; the calibration is a file).
AFTER_CHECKS = ("limits", "drivers", "cameras")
RESUME = "then call /robofollow/trial/start"


@dataclass(frozen=True)
class HealthFailure:
    check: str  # one of CHECKS
    failure_class: str  # one of FAILURE_CLASSES
    reason: str  # what is wrong, one line
    action: str  # what the operator must do, one line

    def line(self) -> str:
        return f"{self.check}: {self.reason}" + (f" -> {self.action}" if self.failure_class == HALT else "")

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "class": self.failure_class, "reason": self.reason, "action": self.action}


@dataclass(frozen=True)
class HealthSettings:
    checks: tuple[str, ...]
    lower: Mapping[str, float]  # URDF limits of the arm joints, by contract name
    upper: Mapping[str, float]
    home: Sequence[float]  # the 14-vector of the home pose
    limit_tolerance_rad: float = 0.01
    home_tolerance_rad: float = 0.1
    driver_max_age_s: float = 0.5
    camera_min_hz: float = 5.0

    def __post_init__(self) -> None:
        unknown = [c for c in self.checks if c not in CHECKS]
        if unknown:
            raise ValueError(f"health_checks: {unknown[0]!r} is not one of {', '.join(CHECKS)}")


@dataclass(frozen=True)
class HealthInputs:
    """What the trial manager measured: the last ``/joint_states`` (14-vector) and its age (s; None: never),
    each camera's frame rate over the window (None: no frame in it), and the calibration's loader."""

    joints: Sequence[float] | None
    joints_age_s: float | None
    camera_hz: Mapping[str, float | None]
    calibration: Callable[[], str | None] = lambda: None  # None when readable, else why not


def check_health(settings: HealthSettings, inputs: HealthInputs, after: bool = False) -> list[HealthFailure]:
    """Every failure, in the order of ``CHECKS`` (empty: fit to run)."""
    active = [c for c in settings.checks if not after or c in AFTER_CHECKS]
    failures: list[HealthFailure] = []
    joints = None if inputs.joints is None else np.asarray(inputs.joints, dtype=float)
    fresh = joints is not None and inputs.joints_age_s is not None and inputs.joints_age_s <= settings.driver_max_age_s
    if "drivers" in active and not fresh:
        why = ("no /joint_states from the arm bridge yet" if inputs.joints_age_s is None else
               f"the last /joint_states is {inputs.joints_age_s:.1f} s old (limit {settings.driver_max_age_s:g} s)")
        failures.append(HealthFailure("drivers", HALT, why,
                                      f"check that both arms' drivers run and publish their states, {RESUME}"))
    if joints is not None and "limits" in active:
        for i, name in enumerate(JOINT_NAMES):
            if name not in settings.lower or name.endswith("_gripper"):  # grippers: normalised, not the URDF's
                continue
            lo, hi, q = settings.lower[name], settings.upper[name], float(joints[i])
            if q < lo - settings.limit_tolerance_rad or q > hi + settings.limit_tolerance_rad:
                failures.append(HealthFailure(
                    "limits", HALT, f"{name} is at {q:+.3f} rad, outside its limits [{lo:+.3f}, {hi:+.3f}]",
                    f"move {name} back within its limits (by hand, or recalibrate the arm), {RESUME}"))
    if joints is not None and "home" in active:
        home = np.asarray(settings.home, dtype=float)
        for arm in ARMS:
            off = np.abs(joints[ARM_SLICE[arm]] - home[ARM_SLICE[arm]])
            worst = int(np.argmax(off))
            if off[worst] > settings.home_tolerance_rad:
                name = JOINT_NAMES[ARM_SLICE[arm]][worst]
                failures.append(HealthFailure(
                    "home", HALT, f"the {arm} arm is not at home: {name} is {off[worst]:.3f} rad from it "
                                  f"(tolerance {settings.home_tolerance_rad:g} rad)",
                    f"move the {arm} arm to its home pose, {RESUME}"))
    if "cameras" in active:
        for camera, hz in sorted(inputs.camera_hz.items()):
            if hz is None:
                failures.append(HealthFailure("cameras", HALT, f"the {camera} camera sent no picture",
                                              f"check the {camera} camera's driver and cable, {RESUME}"))
            elif hz < settings.camera_min_hz:
                failures.append(HealthFailure(
                    "cameras", RECORD_AND_CONTINUE,
                    f"the {camera} camera runs at {hz:.1f} Hz (at least {settings.camera_min_hz:g} Hz)",
                    f"check the {camera} camera's load and bandwidth"))
    if "calibration" in active:
        problem = inputs.calibration()
        if problem is not None:
            failures.append(HealthFailure("calibration", HALT, problem,
                                          f"put the rig's camera calibration in place (docs/perception.md), {RESUME}"))
    return failures


def worst_class(failures: Sequence[HealthFailure]) -> str | None:
    """``halt`` if any failure halts, else ``record_and_continue``; None without failures."""
    if not failures:
        return None
    return HALT if any(f.failure_class == HALT for f in failures) else RECORD_AND_CONTINUE
