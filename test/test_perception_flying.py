"""Issue 37, flying depth pixels: the segmenter's edge filter and the look-alike veto's share of tall points.

Synthetic pictures (no simulator): a far surface of one colour beside a nearer one of another, with and without
``perturb.flying_pixels``; and ``doubt.refuses_name`` on a segment whose fitted top a thin band of lifted points
raised, against one whose whole top stands taller.
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.perception import doubt, perturb
from robofollow_ros.perception.segmenter import FLYING_PX, GeometrySegmenter
from robofollow_ros.perception.silhouette import Evidence

H, W = 40, 60


def _scene() -> tuple[np.ndarray, np.ndarray]:
    """Depth: a far surface (0.70 m, class 3) with a nearer block (0.66 m, class 1) in columns 30..; and classes."""
    depth = np.full((H, W), 0.70, dtype=np.float32)
    depth[:, 30:] = 0.66
    classes = np.full((H, W), 3, dtype=np.uint8)
    classes[:, 30:] = 1
    return depth, classes


def test_clean_edges_are_not_flying() -> None:
    depth, classes = _scene()
    valid = np.ones(H * W, dtype=bool)
    everything = np.arange(H * W)
    assert not GeometrySegmenter._flying(depth, valid, classes.reshape(-1), everything).any()


def test_flying_pixels_far_from_their_own_colour_are_dropped() -> None:
    depth, classes = _scene()
    noisy = perturb.flying_pixels(depth, np.random.default_rng(3), width_px=FLYING_PX)
    valid = noisy.reshape(-1) > 0
    flying = GeometrySegmenter._flying(noisy, valid, classes.reshape(-1), np.arange(H * W)).reshape(H, W)
    band = np.abs(noisy - depth) > 0.01  # lifted by more than 1 cm off their surface
    # Only band pixels (the far side, within FLYING_PX of the edge) are ever flagged, and most of the badly lifted are.
    assert not flying[:, :30 - FLYING_PX].any() and not flying[:, 30:].any()
    assert flying[band].mean() > 0.5


def test_a_thin_band_of_tall_points_does_not_refuse_a_name() -> None:
    ev = Evidence(expected=400, seen=380, occluded=0, contradicted=10, excess=20, segment=400)
    rim = np.concatenate([np.full(90, 0.035), np.linspace(0.036, 0.052, 10)])  # 10 % lifted towards a taller neighbour
    look_alike = np.concatenate([np.full(60, 0.040), np.linspace(0.0, 0.039, 40)])  # a whole top 5 mm too tall
    assert doubt.tall_share(rim, 0.035, 0.007) < doubt.TALL_MIN_SHARE
    assert doubt.refuses_name(ev, False, False, 0.047, (0.035,), 0.0, True, rim) is None
    assert doubt.refuses_name(ev, False, False, 0.047, (0.035,), 0.0, True) is not None  # heights unknown: as before
    assert doubt.refuses_name(ev, False, False, 0.047, (0.035,), 0.0, False, look_alike + 0.007) is not None
