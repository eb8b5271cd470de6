"""What the five servers ``robofollow serve --protocol`` offers share (``policy/wire/serving.py``): a bad bound
is refused naming the argument and the value before a port is taken; ``start()`` serves in a thread named after
the protocol; leaving the ``with`` block stops serving (the port refuses connections) and closes the policies
built for the server."""

from __future__ import annotations

import importlib
import socket
import threading

import pytest

from robofollow_ros.cli.serve import PROTOCOLS, SERVERS
from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.wire.serving import PolicyServer
from robofollow_ros.policy.wire.sessions import PolicySessions


def server_class(protocol: str) -> type[PolicyServer]:
    module, _, name = SERVERS[protocol][0].partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, PolicyServer)
    return cls  # type: ignore[no-any-return]


@pytest.fixture
def taken_port():  # type: ignore[no-untyped-def]
    """A port another socket listens on: a server that binds before checking its settings fails with OSError."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        yield held.getsockname()[1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_taken_port_is_refused_with_good_settings(protocol: str, taken_port: int) -> None:
    with pytest.raises(OSError):
        server_class(protocol)(HoldPolicy(), "127.0.0.1", taken_port)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("max_connections", 0, ">= 1"), ("budget_wait_s", -1.0, ">= 0 seconds"),
    ("idle_timeout_s", 0.0, "> 0 seconds"), ("frame_timeout_s", -5.0, "> 0 seconds")])
def test_a_bad_bound_is_refused_naming_it_before_the_port_is_taken(protocol: str, setting: str, value: float,
                                                                   expected: str, taken_port: int) -> None:
    with pytest.raises(ValueError) as refused:
        server_class(protocol)(HoldPolicy(), "127.0.0.1", taken_port, **{setting: value})
    assert str(refused.value) == f"{setting}: expected {expected}, got {value!r}"


class ClosingHold(HoldPolicy):
    def __init__(self, closed: list[object]) -> None:
        super().__init__()
        self.closed = closed

    def close(self) -> None:
        self.closed.append(self)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_start_serves_in_a_named_thread_and_the_with_block_stops_it(protocol: str) -> None:
    closed: list[object] = []
    first = ClosingHold(closed)
    sessions = PolicySessions(factory=lambda: ClosingHold(closed), first=first)
    with server_class(protocol)(sessions, "127.0.0.1", 0).start() as server:
        host, port = server.address
        assert (host, server.stats) == ("127.0.0.1", dict.fromkeys(server.stats, 0))
        serving = [t for t in threading.enumerate() if t.name == server.thread_name and t.is_alive()]
        assert serving and all(t.daemon for t in serving)
        socket.create_connection((host, port), timeout=5).close()  # listening
        assert not closed
    assert closed == [first]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=5).close()
