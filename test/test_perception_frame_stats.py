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


def test_a_consumer_that_only_ever_sees_every_third_picture_counts_the_rest_against_the_nominal_rate() -> None:
    """Three 30 Hz cameras on one core: a stream processed at 10 Hz from its first picture on never shows a
    regular interval, so a rate learned from its stamps is 10 Hz with nothing dropped — silent. Told the camera's
    nominal rate (the rig profile's ``camera_hz``), the two pictures lost in every interval are counted."""
    stamps = [i * 3 * PERIOD_NS for i in range(11)]
    learned, told = FrameStats(), FrameStats(nominal_hz=30.0)
    for stamp in stamps:
        for stats in (learned, told):
            stats.on_picture(stamp)
            stats.on_processed(stamp, stamp)
    assert learned.as_dict()["dropped"] == 0 and learned.as_dict()["camera_hz"] == pytest.approx(10.0, abs=0.1)
    out = told.as_dict()
    assert out["dropped_by_cause"]["gap"] == 20 and out["camera_hz"] == pytest.approx(30.0)
    assert out["camera_hz_source"] == "nominal" and out["processed_hz"] == pytest.approx(10.0, rel=1e-3)
    with pytest.raises(ValueError, match="nominal_hz"):
        FrameStats(nominal_hz=0.0)


def test_a_rate_first_learned_from_a_gap_is_corrected_by_the_first_regular_interval() -> None:
    stats = FrameStats()
    stamps = [0, 3 * PERIOD_NS, 4 * PERIOD_NS, 5 * PERIOD_NS, 8 * PERIOD_NS]  # first interval a gap, then regular
    for stamp in stamps:
        stats.on_picture(stamp)
    out = stats.as_dict()
    assert out["camera_hz"] == pytest.approx(30.0, abs=0.1) and out["camera_hz_source"] == "stamps"
    assert out["dropped_by_cause"]["gap"] == 2  # the later gap; the first could not be known when it came
