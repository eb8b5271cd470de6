"""Dropped frames are counted, never silent (issue 37, item 5): ``perception.frame_stats.FrameStats``."""

from __future__ import annotations

import pytest

from robofollow_ros.perception.frame_stats import FrameStats

PERIOD_NS = 33_333_333  # 30 Hz


def test_a_gap_in_the_stamps_counts_the_pictures_lost_and_does_not_slow_the_rate() -> None:
    stats = FrameStats()
    stamps = [i * PERIOD_NS for i in range(10)] + [i * PERIOD_NS for i in range(14, 20)]  # 10..13 never came
    for stamp in stamps:
        stats.on_picture(stamp)
        stats.on_processed(stamp, stamp - 200_000_000)
    out = stats.as_dict()
    assert out["dropped_by_cause"]["gap"] == 4 and out["dropped"] == 4
    assert out["camera_hz"] == pytest.approx(30.0, abs=0.1)
    assert out["received"] == out["processed"] == 16
    assert out["processed_hz"] == pytest.approx(15 / (19 * PERIOD_NS / 1e9), rel=1e-3)
    assert out["depth_age_s"] == pytest.approx(0.2)


def test_unpaired_frames_are_dropped_frames_and_no_depth_has_no_age() -> None:
    stats = FrameStats()
    stats.on_picture(0)
    stats.on_unpaired(2)
    stats.on_processed(0, None)
    out = stats.as_dict()
    assert out["dropped"] == 2 and out["dropped_by_cause"] == {"gap": 0, "unpaired": 2}
    assert out["depth_age_s"] is None and out["camera_hz"] is None and out["processed_hz"] is None
