"""Test-wide set-up: an isolated DDS domain per test session, and the shared registry."""

from __future__ import annotations

import os
import time

import pytest


def _own_domain() -> str:
    """A DDS domain of this process's own: parallel test runs on one machine must not hear each other's topics.
    pytest-xdist's workers share one run id, so they take neighbouring domains (gw0, gw1, …) of one base."""
    run_id, worker = os.environ.get("PYTEST_XDIST_TESTRUNUID"), os.environ.get("PYTEST_XDIST_WORKER", "")
    if run_id and worker.startswith("gw") and worker[2:].isdigit():
        return str(1 + (int(run_id[:8], 16) % 50) * 4 + int(worker[2:]) % 4)
    return str(1 + (os.getpid() * 7919 + time.time_ns() // 1000) % 200)


# Set before any test imports rclpy. A pytest-xdist worker always takes its own (it inherits the controller's
# environment, where this file already set one: without this the two workers' graphs heard each other);
# otherwise the caller's choice stands.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["ROS_DOMAIN_ID"] = _own_domain()
else:
    os.environ.setdefault("ROS_DOMAIN_ID", _own_domain())


@pytest.fixture(scope="session")
def registry():  # type: ignore[no-untyped-def]
    from robofollow_ros.benchmark import default_registry

    return default_registry()


@pytest.fixture(scope="session")
def owda_suite_seed0():  # type: ignore[no-untyped-def]
    """The OWDA suite of seed 0, generated once per session (~15 s on CI's machine) for every test module that
    reads it; test_owda_suite also generates seed 0 through the CLI and compares the two. Read it, never change it."""
    from robofollow_ros.decisions.generator import generate_suite

    return generate_suite(0)


#: The longest modules (measured with --junitxml on the 2-core machine), in make test's parallel phase scheduled
#: first: pytest-xdist hands whole files out in collection order, so a long file collected last would run on one
#: worker while the other sits idle. Longest first keeps the two workers' ends within a minute of each other.
SLOW_FIRST = (
    "test_dry_run", "test_node_verdicts", "test_eval_ray", "test_scoring_parity", "test_lichtblick_layout",
    "test_learning_pipeline", "test_serving_eval", "test_owda_suite", "test_rundir_safety", "test_bringup_cli",
    "test_testbed_ray", "test_testbed_ros", "test_testbed_policy_host", "test_eval_workers", "test_owda_execute",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: the rest keep their order
