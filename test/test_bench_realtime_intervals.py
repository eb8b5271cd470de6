"""bench/realtime.py's table (docs/benchmarks.md, "realtime") gives IS/ES the package's intervals: never a point for
n > 0, whether the cell is measured now (``intervals.mean_interval``) or read from a cache written before (a normal
interval whose width was 0 when every score was equal: then the Wilson bound at the mean)."""

from __future__ import annotations

import re

import pytest

from robofollow_ros.evaluation.intervals import wilson_at

realtime = pytest.importorskip("bench.realtime")


@pytest.mark.parametrize("scores", [[1.0] * 4, [0.0] * 4, [0.3] * 3, [1.0], [0.0, 1.0, 0.5, 0.25]])
def test_a_measured_cell_never_prints_a_point(scores: list[float]) -> None:
    cell = realtime.mean_ci(scores, [f"t{i}" for i in range(len(scores))])
    text = realtime.score_text(cell, len(scores))
    lo, hi = map(float, re.search(r"\[([\d.]+), ([\d.]+)\]", text).groups())  # type: ignore[union-attr]
    assert hi - lo >= 0.01, text
    if len(set(scores)) == 1:
        assert text.endswith("*")


def test_a_cached_cell_of_equal_scores_gets_the_wilson_bound() -> None:
    bound = wilson_at(1.0, 4)
    assert realtime.score_text([1.0, 0.0], 4) == f"1.00 [{bound.lo:.2f}, {bound.hi:.2f}]*"
    assert realtime.score_text([0.5, 0.2], 4) == "0.50 [0.30, 0.70]"


def test_the_table_names_its_methods() -> None:
    text = realtime.table({})
    assert "IS [95% CI]" in text and "Wilson" in text and "bootstrap" in text
