"""Checks before the first trial, so a run fails in seconds with one line instead of after a reset.

``reach_policy``: the policy can be built, its server (if any) accepts a connection, and ``reset``
answers — what the first trial would do first. ``port_free``: a server this run must start can
bind its port. Both are used by ``robofollow bringup`` before anything starts, and the policy
check by ``trial_manager_node`` (through ``policy_node``) before its first trial, so
``ros2 launch`` fails as fast. ``reach_address``: the server accepts a connection (``robofollow eval``,
before its first worker).
"""

from __future__ import annotations

import errno
import socket
from typing import Any

#: A policy server must accept a TCP connection within this long to count as reachable.
CONNECT_TIMEOUT_S = 5.0
#: ... and answer ``reset`` within this long.
RESET_TIMEOUT_S = 15.0


class PolicyUnreachable(RuntimeError):
    """The policy could not be reached; the message names the address and the reason."""


class PortInUse(RuntimeError):
    """A port this run must listen on is taken; the message names the port and the flag."""


def remote_address(spec: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a remote SPEC (``policy.remote``); None for a local policy or a bad SPEC
    (loading it names what is wrong)."""
    from robofollow_ros.policy.remote import RemoteSpecError, parse_remote

    try:
        remote = parse_remote(spec)
    except RemoteSpecError:
        return None
    return None if remote is None else (remote.scheme, remote.host, remote.port)


def reach_address(spec: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[str, str, int] | None:
    """A remote SPEC's server accepts a TCP connection (:class:`PolicyUnreachable` naming the address once if
    not); its (scheme, host, port), or None for a local SPEC. ``robofollow eval`` checks this much before it
    starts a worker, whose client would retry for most of a minute."""
    address = remote_address(spec)
    if address is not None:
        scheme, host, port = address
        try:
            with socket.create_connection((host, port), timeout=connect_timeout_s):
                pass
        except OSError as exc:
            raise PolicyUnreachable(f"policy {scheme}://{host}:{port} is unreachable: {_reason(exc)}") from None
    return address


def reach_policy(spec: str, kwargs: dict[str, Any] | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 reset_timeout_s: float = RESET_TIMEOUT_S, *, privileged: bool = False) -> None:
    """Connect to the policy and ``reset`` it once; :class:`PolicyUnreachable` naming the address if not.

    A bad SPEC raises the SPEC's own error (``PolicySpecError``) — that is bad input, not an
    unreachable policy; so does a policy that ``privileged`` (the run's ``--privileged``) does not allow.
    """
    from robofollow_ros.policy.interface import close_policy
    from robofollow_ros.policy.spec import load_policy

    kwargs = dict(kwargs or {})
    address = reach_address(spec, connect_timeout_s)
    if address is not None:
        # One attempt, bounded waits: the check must fail in seconds, not after the client's retries.
        kwargs = {**kwargs, "connect_attempts": 1, "timeout_s": min(float(kwargs.get("timeout_s", reset_timeout_s)),
                                                                   reset_timeout_s)}
    policy = load_policy(spec, kwargs, privileged=privileged)
    try:
        policy.reset()
    except Exception as exc:  # any failure of the first call means the trials cannot run
        where = f"{address[0]}://{address[1]}:{address[2]}" if address else spec
        raise PolicyUnreachable(f"policy {where}: reset failed: {type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    finally:
        close_policy(policy)


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "no answer (timed out)"
    if exc.errno == errno.ECONNREFUSED:
        return "connection refused (is the server running on that port?)"
    return exc.strerror or str(exc)


def port_free(host: str, port: int, what: str, flag: str) -> None:
    """Raise :class:`PortInUse` when ``host:port`` cannot be bound; port 0 (any free port) always passes."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(f"port {port} on {host} ({what}) is in use; stop what holds it or choose another "
                                f"with {flag} (0 picks a free port)") from None
            raise PortInUse(f"cannot listen on {host}:{port} ({what}): {exc.strerror or exc}; "
                            f"choose another with {flag}") from None
