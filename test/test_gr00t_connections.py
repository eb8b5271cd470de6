"""The GR00T server's hold on accepted connections (``wire/gr00t/connections.py``) on plain loopback sockets:
the accepted descriptor stands in for libzmq's, which the test closes as libzmq would."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from robofollow_ros.policy.wire.gr00t.connections import GREETING_BYTES, HeldConnections, zmtp_reply

REFUSAL = b"\x81\xa5error\xa4nope"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the peer, the accepted end standing for libzmq's descriptor)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname(), timeout=10)
        accepted, _ = listener.accept()
    yield peer, accepted
    peer.close()
    accepted.close()


def holding(accepted: socket.socket) -> tuple[HeldConnections, tuple[int, int]]:
    """A hold on ``accepted`` as the server takes one when libzmq reports its accept."""
    held = HeldConnections()
    key = (accepted.fileno(), 1)
    held.hold(key, accepted.fileno())
    return held, key


def read_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(4096):
        out += chunk
    return out


def test_zmtp_frames_short_and_long() -> None:
    assert zmtp_reply(b"ab") == b"\x01\x00\x00\x02ab"
    long = zmtp_reply(b"x" * 300)
    assert long[:3] == b"\x01\x00\x02" and int.from_bytes(long[3:11], "big") == 300 and len(long) == 311


def test_a_live_peer_dropped_mid_message_reads_the_refusal_found_by_the_sweep(
        pair: tuple[socket.socket, socket.socket]) -> None:
    peer, accepted = pair
    held = HeldConnections(drain_s=5)
    held.hold((accepted.fileno(), 1), accepted.fileno())
    peer.sendall(b"g" * (GREETING_BYTES + 1) + b"m" * 100_000)  # a greeting, then a message still arriving
    assert held.handshaken((accepted.fileno(), 1))
    accepted.close()  # what libzmq does to a peer over ZMQ_MAXMSGSIZE
    ended = held.sweep(REFUSAL)
    assert [refused for _, refused in ended] == [True] and len(held) == 0
    peer.shutdown(socket.SHUT_WR)  # done sending: the drain sees its end and closes
    assert read_all(peer) == zmtp_reply(REFUSAL)


def test_a_peer_that_never_greeted_is_let_go_without_a_word(pair: tuple[socket.socket, socket.socket]) -> None:
    peer, accepted = pair
    held, key = holding(accepted)
    peer.sendall(b"g" * 10)  # short of a greeting: a silent socket libzmq's handshake timer drops
    assert not held.handshaken(key)
    assert accepted.recv(64) == b"g" * 10  # read by libzmq, which then times the handshake out
    assert held.ended(key, REFUSAL) is False
    accepted.close()
    assert read_all(peer) == b""


def test_a_peer_that_closed_is_not_written_to(pair: tuple[socket.socket, socket.socket]) -> None:
    peer, accepted = pair
    held, key = holding(accepted)
    peer.sendall(b"g" * 200)
    peer.shutdown(socket.SHUT_WR)
    assert read_all(accepted) == b"g" * 200  # libzmq reads to the end of stream, then closes its descriptor
    accepted.close()
    assert held.ended(key, REFUSAL) is False
    assert read_all(peer) == b""


def test_a_connection_this_server_shut_is_not_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    peer, accepted = pair
    held, key = holding(accepted)
    peer.sendall(b"g" * 200)
    assert held.shut(key)
    assert accepted.recv(4096) == b"g" * 200 and accepted.recv(1) == b""  # the shutdown reaches libzmq's end
    assert held.ended(key, REFUSAL) is False
    assert read_all(peer) == b""
