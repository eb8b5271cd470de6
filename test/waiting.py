"""One way for tests to wait on state that sends no notification: files another process writes, a
process's liveness, a server's counters. Polled with a deadline; never a bare sleep as synchronisation.
(Nodes on DDS have ``RosHarness.wait_for``, woken by the callbacks themselves.)"""

from __future__ import annotations

import time
from collections.abc import Callable


def poll_until(condition: Callable[[], object], timeout_s: float, interval_s: float = 0.05) -> bool:
    """True as soon as ``condition()`` is truthy, False if it still is not after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(interval_s)
    return True
