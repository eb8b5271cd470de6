"""Test-wide set-up: an isolated DDS domain per test session, and the shared registry."""

from __future__ import annotations

import os
import re
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


#: Modules that start ROS graphs (several node processes, SAPIEN, real-time waits): make test runs them in its
#: second phase, alone, like the tests marked ``exclusive`` (pyproject.toml). Beside a second worker's graph the
#: two cores starve them: 23 of them timed out or missed a stamp at -n 2 and pass alone.
ROS_GRAPH_MODULES = re.compile(
    r"test_(node_\w+|foxglove_node|foxglove_robot_graph|bringup_(faults|linger|run_json)|mock_verdicts|dry_run"
    r"|lichtblick_layout|rig_without_simulator|ros_smoke|perception_sim|graph_stop)\.py")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if ROS_GRAPH_MODULES.fullmatch(item.path.name):
            item.add_marker(pytest.mark.exclusive)
