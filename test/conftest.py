"""Test-wide set-up: an isolated DDS domain per test session, and the shared registry."""

from __future__ import annotations

import os
import time

import pytest

# A domain of our own, unless the caller (make test) chose one: parallel test runs on one machine
# must not hear each other's topics. Set before any test imports rclpy.
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + (os.getpid() * 7919 + time.time_ns() // 1000) % 200))


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
