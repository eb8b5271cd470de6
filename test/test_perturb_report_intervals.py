"""The perception bench's tables (``perturb_report``: docs/perception.md, docs/benchmarks.md) give every share with n
and its Wilson 95 % interval, never a point (issue 38 item 1), and name the method under the table."""

from __future__ import annotations

import re

from robofollow_ros.evaluation.intervals import wilson
from robofollow_ros.perception.perturb_report import INTERVALS_NOTE, doubt_table, markdown_table, share_ci

ITEM = {"name": "clean", "median_error_m": 0.0001, "p95_error_m": 0.004, "max_error_m": 0.025,
        "identity_accuracy": 1.0, "identity_checks": 1125, "misses": 0, "false_detections": 0,
        "unexplained_segments": 2, "drift_reported_share": 0.0, "goal_level": None, "poses_published": 40,
        "confident_wrong_2cm_09": 0, "confident_wrong_3cm_05": 0,
        "reliability": [{"bin": "0.00–0.50", "n": 10, "share_over_2cm": 0.3},
                        {"bin": "0.50–1.00", "n": 30, "share_over_2cm": 0.0},
                        {"bin": "unused", "n": 0, "share_over_2cm": None}]}


def test_every_share_carries_n_and_a_wilson_interval() -> None:
    full = wilson(1125, 1125)
    assert share_ci(1.0, 1125, 2) == f"100.00 % [{100 * full.lo:.2f}, 100.00] (1125)"
    zero = share_ci(0.0, 30)
    lo, hi = map(float, re.search(r"\[([\d.]+), ([\d.]+)\]", zero).groups())  # type: ignore[union-attr]
    assert lo == 0 and hi > 5  # 0 of 30: an upper bound, not a point
    assert share_ci(None, 0) == "— (0)"
    report = {"items": [ITEM]}
    for table in (markdown_table(report), doubt_table(report)):
        assert table.endswith(INTERVALS_NOTE)
        assert "100.00 % [" in table and "(1125)" in table
    assert "0 % [0, 11] (30)" in doubt_table(report)
