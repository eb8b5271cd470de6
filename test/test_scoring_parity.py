"""The online scorer equals our reading of the official evaluator, at every prefix, at the thresholds.

``official_reference`` rescans the whole trajectory the way the official evaluator classes do;
``StageMonitor`` keeps running facts. For every action family, hypothesis builds trajectories
whose numbers sit on, just under and just over each threshold (``scoring_edges``) and the two
must produce the same results.json entry -- IS, ES, completion, every stage's scores and reasons,
every extra field -- after every frame. ``bench/scoring_parity.py`` runs thousands per family.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from official_reference import score as reference_score
from scoring_edges import REG, Case, compare
from scoring_families import FAMILIES

#: Examples per family in the suite; the timing family builds ~200-frame trials, so fewer.
EXAMPLES = {"finish/return_timing": 25}
DEFAULT_EXAMPLES = 150


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_online_scorer_equals_official_reference_at_every_prefix(family):
    @settings(max_examples=EXAMPLES.get(family, DEFAULT_EXAMPLES), deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(FAMILIES[family])
    def run(case: Case) -> None:
        problem = compare(case).problem
        assert problem is None, f"{case.task.task_id}: {problem}"

    run()


def test_families_reach_both_sides_of_the_verdicts():
    """The strategies are not vacuous: across a family, stages pass and fail, trials complete and not."""
    from hypothesis import find

    for family in ("scene1/place_behind", "scene2/push", "scene4/stack_on_target"):
        for wanted in (True, False):
            find(FAMILIES[family], lambda c, w=wanted: reference_score(c.task, c.frames, REG)["completion_ok"] is w,
                 settings=settings(max_examples=400, deadline=None, derandomize=True, database=None))
