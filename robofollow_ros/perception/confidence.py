"""What a published pose's confidence means, and the one threshold below which nobody scores it.

Perception publishes a confidence per tracked object (``/robofollow/objects``: marker ``text`` JSON and
``color.a``); the stage monitor (and ``perception eval``'s oracle agreement) ignores any pose below
``MIN_POSE_CONFIDENCE`` and keeps the last pose that reached it. The confidence is built from the
evidence of the frame, so a pose the camera does not support cannot stay confident:

    measured pose:      c = p_identity · q_fit · s_support
    kept resting pose:  c = p_identity                    (seen cut or as a sliver where it rests)
    not seen:           c = c_last · 0.5 ** (age_s / h),  h = half_life_s resting, LIFTED_HALF_LIFE_S lifted

``p_identity``: grounding's softmax probability of the name; ``q_fit`` (``fit_quality``): how much of the
segment's points the final pose explains (1 − the truncated loss, mapped from ``LOSS_GOOD`` … ``LOSS_BAD``
onto 1 … 0: flying depth pixels that drag a fit away leave most points unexplained); ``s_support``
(``support``): the share of the object's reference pixel count seen, ``shown / FULL_SUPPORT_SHARE``
capped at 1 (a sliver is weak evidence of where the rest is). A lifted pose left without evidence (the
object hidden in the hand, or put down where the camera cannot see it) halves every
``LIFTED_HALF_LIFE_S``: a carried object does not stay where it was last seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robofollow_ros.contract import MIN_POSE_CONFIDENCE as MIN_POSE_CONFIDENCE  # the readers' threshold

#: Truncated loss (units of τ², ``primitives.Fit.robust_loss``) of a fit that explains its points well / not at all.
LOSS_GOOD = 0.55
LOSS_BAD = 0.8
#: Seeing this share of an object's reference pixel count is full support.
FULL_SUPPORT_SHARE = 0.6
#: An unseen lifted pose's confidence halves this often (s).
LIFTED_HALF_LIFE_S = 0.25


def fit_quality(loss: float) -> float:
    """1 for a fit explaining its points (loss ≤ LOSS_GOOD), 0 at LOSS_BAD and above, linear between."""
    return float(min(1.0, max(0.0, (LOSS_BAD - loss) / (LOSS_BAD - LOSS_GOOD))))


def support(shown: float) -> float:
    """Evidence from the share ``shown`` of the object's reference pixel count that is visible."""
    return float(min(1.0, max(0.0, shown / FULL_SUPPORT_SHARE)))


def decayed(confidence: float, age_s: float, half_life_s: float) -> float:
    return float(confidence * 0.5 ** (max(0.0, age_s) / half_life_s))


Pose = tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]


class PoseGate:
    """Per object, the newest pose whose confidence reached ``MIN_POSE_CONFIDENCE``; lower ones are ignored.

    An object that never reached it has no pose (like an object perception never saw).
    """

    def __init__(self, threshold: float = MIN_POSE_CONFIDENCE) -> None:
        self.threshold = threshold
        self.poses: dict[str, tuple[list[float], list[float]]] = {}
        self.ignored = 0
        #: The objects whose pose the last update ignored (the stage monitor holds its verdict on them).
        self.doubtful: frozenset[str] = frozenset()

    def update(self, poses: Mapping[str, Pose], confidences: Mapping[str, float]
               ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Fold one frame's poses in; returns (positions, quaternions) to score."""
        doubtful = set()
        for name, (position, quat) in poses.items():
            if confidences.get(name, 1.0) >= self.threshold:
                self.poses[name] = ([float(v) for v in position], [float(v) for v in quat])
            else:
                self.ignored += 1
                doubtful.add(name)
        self.doubtful = frozenset(doubtful)
        return ({n: list(p) for n, (p, _) in self.poses.items()}, {n: list(q) for n, (_, q) in self.poses.items()})
