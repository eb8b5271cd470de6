"""``robofollow serve``: expose any policy SPEC over RoboFollow's TCP protocol or openpi's websocket.

Prints ``Policy server: HOST:PORT`` once listening (scripts wait for that line; with ``--port 0``
it names the port chosen), serves until SIGINT or SIGTERM, then closes the policy.
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
import threading
from types import FrameType
from typing import Any

from robofollow_ros.cli._common import EXIT_PORT_IN_USE, CliError

PROTOCOLS = ("robofollow", "openpi")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="serve a policy over the RoboFollow TCP or the openpi websocket protocol",
                              description="Expose a policy SPEC over RoboFollow's TCP protocol or openpi's "
                                          "websocket protocol. Prints 'Policy server: HOST:PORT' once listening; "
                                          "SIGINT or SIGTERM stops it and closes the policy.")
    p.add_argument("--policy", required=True, metavar="SPEC",
                   help="hold, module:function, tcp://HOST:PORT, openpi://HOST:PORT or another built-in")
    p.add_argument("--kwargs", default="{}", metavar="JSON", help="keyword arguments for the policy factory")
    p.add_argument("--protocol", choices=PROTOCOLS, default="robofollow")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8999, help="port to bind; 0 picks a free one (default 8999)")
    p.add_argument("--policy-timeout", type=float, default=300.0, metavar="S",
                   help="seconds a policy call may take before the caller gets an error (default 300)")
    p.add_argument("--debug", action="store_true", help="include full server tracebacks in error replies")
    p.set_defaults(func=_serve)


def _parse_kwargs(text: str) -> dict[str, Any]:
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--kwargs: {text!r} is not valid JSON ({exc.msg})") from exc
    if not isinstance(kwargs, dict):
        raise CliError(f"--kwargs: {text!r} must be a JSON object")
    return kwargs


def _serve(args: argparse.Namespace) -> int:
    from robofollow_ros.policy.guard import TimeoutGuardedPolicy
    from robofollow_ros.policy.spec import PolicySpecError, load_policy

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port: {args.port} is outside 0..65535")
    if not args.policy_timeout > 0:
        raise CliError(f"--policy-timeout: {args.policy_timeout} must be positive")
    kwargs = _parse_kwargs(args.kwargs)
    try:
        policy = load_policy(args.policy, kwargs)
    except PolicySpecError as exc:
        raise CliError(str(exc)) from exc
    guarded = TimeoutGuardedPolicy(policy, args.policy_timeout)
    server: Any
    try:
        if args.protocol == "openpi":
            from robofollow_ros.policy.openpi_server import OpenpiPolicyServer

            server = OpenpiPolicyServer(guarded, args.host, args.port, debug=args.debug,
                                        metadata={"policy": args.policy})
        else:
            from robofollow_ros.policy.tcp_server import RoboFollowTcpServer

            server = RoboFollowTcpServer(guarded, args.host, args.port, debug=args.debug)
    except OSError as exc:
        guarded.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {args.port} on {args.host} is in use; stop what holds it or choose another with "
                           "--port (0 picks a free port)", EXIT_PORT_IN_USE) from None
        raise CliError(f"--host/--port: cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from exc

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        host, port = server.address
        print(f"Policy server: {host}:{port}", flush=True)
        print(f"protocol {args.protocol}, policy {args.policy}; Ctrl-C stops", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        guarded.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("policy server stopped, policy closed", file=sys.stderr, flush=True)
    return 0
