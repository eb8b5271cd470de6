"""Hold Ctrl-C and SIGTERM for the few lines that start worker processes, then deliver them.

``multiprocessing.Pool`` starts its workers in its constructor and cleans up after an ``Exception`` there,
not after ``KeyboardInterrupt``. An interrupt that lands while the second worker starts leaves the first
running with nothing to stop it, and once the parent has exited that worker cannot open the pool's
semaphores and prints a traceback (``SemLock._rebuild``: ``FileNotFoundError``). Inside :func:`held` the
signal is recorded, and it is raised again as the block ends, where the caller has the pool in hand
and its ``with`` stops the workers. Outside the main thread, where Python cannot set handlers, nothing
is held.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Record SIGINT and SIGTERM during the block (where a Python handler takes them); re-raise them after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {s: signal.getsignal(s) for s in HELD_SIGNALS}
    ours = [s for s, handler in previous.items() if callable(handler)]  # SIG_DFL / SIG_IGN are left alone
    for s in ours:
        signal.signal(s, record)
    try:
        yield
    finally:
        for s in ours:
            signal.signal(s, previous[s])
        if pending:
            signal.raise_signal(pending[0])
