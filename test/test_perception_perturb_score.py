"""The perturbation benchmark's scorer (``perturb_score.score``): which published pose an error is taken from.

A name grounding gave to the right segment while the tracker kept an earlier pose (a carried cylinder seen as a
lifted sliver: not believed, its resting pose kept at confidence 0.02) is correct identity but no measurement:
scored as one it was a 364.5 mm "error" in every row of the standard suite.
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.grounding import Grounding
from robofollow_ros.perception.perturb_score import CapturedFrame, ItemStats, score
from robofollow_ros.perception.perturb_suite import Perturbation
from robofollow_ros.perception.sim_eval import MIN_VISIBLE_PIXELS
from robofollow_ros.perception.tracker import PerceptionResult, Track

TRUTH = [0.0, 0.0, 1.0]


def _frame_and_segment() -> tuple[CapturedFrame, np.ndarray, dict[str, int]]:
    """A 10 × 10 frame whose object ``cyl`` (segmentation id 1) covers 48 pixels (≥ ``MIN_VISIBLE_PIXELS``)."""
    segmentation = np.zeros((10, 10), dtype=np.int32)
    segmentation[2:8, 1:9] = 1
    ids = {"cyl": 1}
    frame = CapturedFrame(np.zeros((10, 10, 3), np.uint8), np.ones((10, 10), np.float32), segmentation, ids,
                          {"cyl": TRUTH}, 0.0, np.zeros(1), {})
    return frame, np.flatnonzero(segmentation.reshape(-1) == 1), ids


def _result(pixels: np.ndarray, position: list[float], visible: bool, confidence: float) -> PerceptionResult:
    detection = Detection("red", len(pixels), pixels, (4.0, 4.0), kind="solid")
    track = Track("cyl", np.asarray(position), 0.0, confidence, 0.0, confidence, visible=visible)
    return PerceptionResult(0.0, {"cyl": track}, [], [], [Grounding(detection, "cyl", 0.8, 0.0)])


def test_a_named_object_whose_pose_was_kept_is_not_scored_as_measured() -> None:
    frame, pixels, ids = _frame_and_segment()
    assert len(pixels) >= MIN_VISIBLE_PIXELS
    stats = ItemStats()
    score(_result(pixels, [0.3, 0.0, 0.8], visible=False, confidence=0.02), frame, ids, frame.segmentation, stats, "")
    assert stats.checks == 1 and stats.correct == 1 and stats.misses == 0  # the name was right ...
    assert stats.not_located == 1 and stats.errors == []                   # ... the kept pose is no measurement
    assert stats.published and stats.published[0][1] == 0.02                # still in the reliability diagram
    assert "named but not located (kept pose at confidence 0.02)" in stats.examples[0]
    assert stats.summary(Perturbation("x", "x"))["max_error_m"] is None


def test_a_located_object_is_scored_with_the_confidence_of_its_largest_error() -> None:
    frame, pixels, ids = _frame_and_segment()
    stats = ItemStats()
    score(_result(pixels, [0.004, 0.0, 1.0], visible=True, confidence=0.97), frame, ids, frame.segmentation, stats, "")
    score(_result(pixels, [0.015, 0.0, 1.0], visible=True, confidence=0.40), frame, ids, frame.segmentation, stats, "")
    summary = stats.summary(Perturbation("x", "x"))
    assert stats.not_located == 0 and len(stats.errors) == 2
    assert abs(summary["max_error_m"] - 0.015) < 1e-9 and summary["max_error_confidence"] == 0.4
