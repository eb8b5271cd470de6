"""interrupts.held: Ctrl-C and SIGTERM during a block (workers starting) are raised again after it."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from robofollow_ros import interrupts


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@pytest.fixture()
def raising_handlers() -> Iterator[None]:
    previous = {s: signal.signal(s, _raise_interrupt) for s in interrupts.HELD_SIGNALS}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("signum", interrupts.HELD_SIGNALS)
def test_a_signal_inside_the_block_is_raised_when_it_ends(raising_handlers: None, signum: int) -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupts.held():
        signal.raise_signal(signum)  # the handler runs before this returns: it must only record
        reached.append("the rest of the block")
    assert reached == ["the rest of the block"]
    assert signal.getsignal(signum) is _raise_interrupt  # the caller's handler is back


def test_no_signal_no_interrupt_and_handlers_restored(raising_handlers: None) -> None:
    with interrupts.held():
        assert signal.getsignal(signal.SIGINT) is not _raise_interrupt
    assert all(signal.getsignal(s) is _raise_interrupt for s in interrupts.HELD_SIGNALS)


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with interrupts.held():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)  # ignored, as before the block
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
