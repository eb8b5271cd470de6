"""``robofollow compare``: two policies on paired trials, stopped as soon as the sequential test decides.

A pair is one (task, seed) run once by A and once by B, in a coin-flipped order; the pairs are drawn
in a random order (``--seed``) from the selected tasks × the protocol's 10 seeded rounds, so a test
stopped early has seen a random sample of the pool, not its first scene. After every pair the
anytime-valid test of ``sequential`` is updated and its e-value printed; the run stops the moment
K ≥ 1/α, or at the budget, or when the pool is used up (then: undecided).

Run directories stay honest: A's trials go to ``DIR/A`` and B's to ``DIR/B``, each an ordinary run
directory (run.json, results.json, summary.json, SQLite: ``report``, ``--compare-runs`` read them)
written by the evaluator's own ``RunWriter`` and trial workers; ``DIR/compare.json`` records both
specs, the test's settings, the e-value after every pair, the decision and the fixed design it is
compared against. Everything that reads only is checked before either policy is built.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.run_record import utc_now
from robofollow_ros.evaluation.runner import Backend, EvalConfig, check_output, make_backend, open_writer
from robofollow_ros.evaluation.selection import TrialKey, select_tasks, trial_keys
from robofollow_ros.evaluation.sequential import (
    BETS,
    DEFAULT_POWER,
    METRICS,
    Decision,
    SequentialTest,
    fixed_design_from_pairs,
)

#: Seeded rounds per task the pool draws from (the protocol has seeds for 10).
POOL_ROUNDS = 10
COMPARE_FILE = "compare.json"
#: results.json field each --metric reads.
METRIC_FIELD = {"completion": "completion_ok", "is": "intent_score", "es": "exec_score"}


@dataclass(frozen=True)
class CompareConfig:
    """``robofollow compare``'s arguments; ``base`` carries everything a trial needs (policy replaced per side)."""

    base: EvalConfig
    policy_a: str
    policy_b: str
    kwargs_a: dict[str, Any]
    kwargs_b: dict[str, Any]
    output: Path
    alpha: float = 0.05
    budget: int | None = None
    metric: str = "completion"
    seed: int = 0
    bet: str = "mixture"

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"--metric: {self.metric!r} is not one of {', '.join(METRICS)}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"--alpha: must be in (0, 1), got {self.alpha}")
        if self.bet not in BETS:
            raise ValueError(f"--bet: {self.bet!r} is not one of {', '.join(BETS)}")
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"--budget: must be >= 1 pair, got {self.budget}")

    def side(self, name: str) -> EvalConfig:
        policy, kwargs = (self.policy_a, self.kwargs_a) if name == "A" else (self.policy_b, self.kwargs_b)
        return dataclasses.replace(self.base, policy=policy, policy_kwargs=dict(kwargs), rounds=POOL_ROUNDS,
                                   output=self.output / name, resume=False)

    def settings(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "budget_pairs": self.budget, "metric": self.metric, "seed": self.seed,
                "bet": self.bet,
                "test": ("mixture of 19 constant bets" if self.bet == "mixture" else "hedged aGRAPA bet")
                        + " betting e-process (Waudby-Smith & Ramdas 2023), two-sided; "
                        + ("discordant completions (McNemar null)" if self.metric == "completion"
                           else f"paired {self.metric.upper()} differences in [-1, 1], mean 0"),
                "fixed_design": (f"two-sided {'McNemar' if self.metric == 'completion' else 'paired z'} test "
                                 f"at level alpha, power {DEFAULT_POWER}, at the observed effect (plug-in)")}


@dataclass
class CompareOutcome:
    decision: Decision
    pool: int
    budget: int
    fixed_pairs: float
    failed_trials: list[tuple[str, str]]
    stop_reason: str


def check_compare_output(output: Path) -> None:
    """DIR must be new or empty (the two runs and compare.json go inside); one line otherwise."""
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ValueError(f"--output: {output} is not a new or empty directory")


def run_compare(config: CompareConfig,
                say: Callable[[str], None] = print) -> CompareOutcome:
    """Run pairs until the test decides or the budget is spent; see the module docstring."""
    registry = default_registry()
    base = config.base
    tasks = select_tasks(registry, base.scenes, base.levels, base.limit, base.tasks or None)
    pool: list[TrialKey] = trial_keys(tasks, POOL_ROUNDS)
    random.Random(config.seed).shuffle(pool)
    budget = min(config.budget or len(pool), len(pool))
    check_compare_output(config.output)
    sides = {name: config.side(name) for name in ("A", "B")}
    for side in sides.values():
        check_output(side, tasks, budget)
    backends: dict[str, Backend] = {}
    try:
        infos = {}
        for name, side in sides.items():
            backends[name] = make_backend(side)
            infos[name] = backends[name].start(budget)
        config.output.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:  # each run ends as eval's does: complete, failed, or resumable
            writers = {name: stack.enter_context(
                open_writer(side, tasks, budget, infos[name].get("server_metadata"),
                            policy_privileged=infos[name].get("privileged"),
                            renderer_startup_s=infos[name].get("renderer_startup_s")))
                       for name, side in sides.items()}
            return _pairs(config, registry, pool[:budget], len(pool), backends, writers, say)
    finally:
        for backend in backends.values():
            backend.close()


def _pairs(config: CompareConfig, registry: Any, keys: list[TrialKey], pool: int, backends: dict[str, Backend],
           writers: dict[str, Any], say: Callable[[str], None]) -> CompareOutcome:
    binary = config.metric == "completion"
    test = SequentialTest(alpha=config.alpha, binary=binary, bet=config.bet)
    order_rng = random.Random(config.seed + 1)
    field_name = METRIC_FIELD[config.metric]
    observed: list[tuple[float, float]] = []
    trace: list[dict[str, Any]] = []
    failed: list[tuple[str, str]] = []
    decision = test.decision()
    say(f"sequential A/B on {config.metric}: A = {config.policy_a}, B = {config.policy_b}; alpha {config.alpha} "
        f"(decides when the e-value reaches {1 / config.alpha:g}); budget {len(keys)} pairs of a pool of {pool}")
    for index, key in enumerate(keys, 1):
        first = order_rng.choice(("A", "B"))
        results: dict[str, dict[str, Any]] = {}
        for name in (first, "B" if first == "A" else "A"):
            (outcome,) = list(backends[name].results([key]))  # run the generator to its end
            result = outcome.result
            writers[name].record_trial(result, task=registry.eval_task(key.task_id), round_index=key.round,
                                       seed=key.seed)
            if "policy_error" in result:
                failed.append((f"{name}:{key.trial_id}", str(result["policy_error"]).splitlines()[0]))
            results[name] = result
        a, b = float(results["A"][field_name]), float(results["B"][field_name])
        observed.append((a, b))
        decision = test.update(a, b)
        trace.append({"pair": index, "task": key.task_id, "seed": key.seed, "first": first, "a": a, "b": b,
                      "e_value": decision.e_value})
        say(f"pair {index:>4}  {key.task_id[:44]:<44} seed {key.seed:<6} A {a:.2f}  B {b:.2f}  "
            f"e-value {decision.e_value:9.3f}")
        if test.decided:
            break
    reason = "decided" if test.decided else ("budget" if len(keys) < pool else "pool exhausted")
    if len(observed) < len(keys):  # each side's run.json says why it holds fewer trials than it planned
        for writer in writers.values():
            writer.stop_early("robofollow compare", f"the sequential test decided after {len(observed)} pairs "
                                                   f"(see ../{COMPARE_FILE})")
    fixed = fixed_design_from_pairs(observed, binary=binary, alpha=config.alpha)
    compared = CompareOutcome(decision, pool, len(keys), fixed, failed, reason)
    _write_compare(config, compared, trace)
    return compared


def _write_compare(config: CompareConfig, outcome: CompareOutcome, trace: list[dict[str, Any]]) -> None:
    d = outcome.decision
    record = {"policy_a": config.policy_a, "policy_b": config.policy_b, "kwargs_a": config.kwargs_a,
              "kwargs_b": config.kwargs_b, "runs": {"A": "A", "B": "B"}, "settings": config.settings(),
              "pool_pairs": outcome.pool, "budget_pairs": outcome.budget, "finished_utc": utc_now(),
              "decision": dataclasses.asdict(d), "stop_reason": outcome.stop_reason,
              "fixed_design_pairs": None if math.isinf(outcome.fixed_pairs) else outcome.fixed_pairs,
              "failed_trials": [list(f) for f in outcome.failed_trials], "trace": trace}
    path = config.output / COMPARE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def saving_line(outcome: CompareOutcome, alpha: float) -> str:
    """The trials saved against the fixed design at the observed effect, or why there is no such number."""
    used = outcome.decision.pairs
    if math.isinf(outcome.fixed_pairs):
        return (f"{used} pairs ({2 * used} trials) used; no difference observed, so no fixed design "
                f"(alpha {alpha}, power {DEFAULT_POWER}) can be sized for comparison")
    fixed = int(outcome.fixed_pairs)
    head = (f"{used} pairs ({2 * used} trials) used; a fixed design (two-sided, alpha {alpha}, power "
            f"{DEFAULT_POWER}, at the observed effect) needs {fixed} pairs ({2 * fixed} trials)")
    if outcome.decision.verdict == "undecided":  # nothing was decided, so nothing was saved
        return f"{head}; the sequential test has not decided, so no saving is claimed"
    saved = 1.0 - used / fixed
    return f"{head}: " + (f"{100 * saved:.0f} % saved" if saved >= 0 else f"{-100 * saved:.0f} % more")
