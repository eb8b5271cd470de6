"""``python -m robofollow_model_server --policy module:function [--kwargs JSON] [--protocol robofollow|openpi]``

Prints ``Policy server: HOST:PORT`` once listening (``--port 0`` names the port chosen), serves until
SIGINT or SIGTERM, then stops cleanly and exits 0 (``serving.run_until_signal``).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from robofollow_model_server.bounds import DEFAULT_MAX_PENDING_BYTES
from robofollow_model_server.serving import (
    DEFAULT_BUSY_WAIT_S,
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_GRACE_S,
    DEFAULT_IDLE_TIMEOUT_S,
    PolicyHost,
    load_policy,
    run_until_signal,
)

PROTOCOLS = {"robofollow": "RoboFollow TCP (robofollow eval --policy tcp://HOST:PORT)",
             "openpi": "openpi websocket (robofollow eval --policy openpi://HOST:PORT, openpi-client)"}


def _number(low: float, *, low_open: bool, integer: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number above ``low`` (or at least it); argparse names the flag and the value."""
    bound = f"> {low:g}" if low_open else f">= {low:g}"

    def parse(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if integer else 'a number'}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number {bound}")
        return value

    return parse


SECONDS = _number(0, low_open=True)  # a timeout: positive
WAIT = _number(0, low_open=False)  # how long to wait: zero is no wait
CONNECTIONS = _number(1, low_open=False, integer=True)
MEBIBYTES = _number(1, low_open=False, integer=True)


class _OneLineParser(argparse.ArgumentParser):
    """Bad input is one line naming the flag and the value (as this module's own errors), without the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m robofollow_model_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", required=True, metavar="MODULE:FUNCTION",
                   help="a callable returning the policy (reset, set_instruction, predict -> [T, 14]), e.g. "
                        "robofollow_model_server.lerobot:load")
    p.add_argument("--kwargs", default="{}", metavar="JSON", help="keyword arguments for it (a JSON object)")
    p.add_argument("--protocol", choices=tuple(PROTOCOLS), default="robofollow",
                   help="; ".join(f"{k}: {v}" for k, v in PROTOCOLS.items()))
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=None, help="port; 0 picks a free one (default 8999 TCP, 8000 openpi)")
    p.add_argument("--max-connections", type=CONNECTIONS, default=8, metavar="N")
    p.add_argument("--idle-timeout", type=SECONDS, default=DEFAULT_IDLE_TIMEOUT_S, metavar="S")
    p.add_argument("--frame-timeout", type=SECONDS, default=DEFAULT_FRAME_TIMEOUT_S, metavar="S",
                   help="deadline for a request once its first byte came")
    p.add_argument("--max-pending-mib", type=MEBIBYTES, default=DEFAULT_MAX_PENDING_BYTES >> 20, metavar="MIB",
                   help="memory budget of the requests of all connections together (default 512)")
    p.add_argument("--busy-wait", type=WAIT, default=DEFAULT_BUSY_WAIT_S, metavar="S",
                   help="how long a connection waits for the previous one to give the policy back")
    p.add_argument("--grace", type=WAIT, default=DEFAULT_GRACE_S, metavar="S",
                   help="at shutdown, how long to wait for a policy call in progress")
    p.add_argument("--debug", action="store_true", help="full tracebacks in error replies")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        kwargs: Any = json.loads(args.kwargs)
    except json.JSONDecodeError as exc:
        print(f"error: --kwargs: {args.kwargs!r} is not valid JSON ({exc.msg})", file=sys.stderr)
        return 2
    if not isinstance(kwargs, dict):
        print(f"error: --kwargs: {args.kwargs!r} must be a JSON object", file=sys.stderr)
        return 2
    if args.port is not None and not 0 <= args.port < 65536:
        print(f"error: --port: {args.port} is not a TCP port", file=sys.stderr)
        return 2
    try:
        host = PolicyHost(load_policy(args.policy, kwargs), busy_wait_s=args.busy_wait)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        print(f"error: --policy {args.policy}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    limits = {"debug": args.debug, "idle_timeout_s": args.idle_timeout, "max_connections": args.max_connections,
              "frame_timeout_s": args.frame_timeout, "max_pending_bytes": int(args.max_pending_mib) << 20}
    try:
        if args.protocol == "openpi":
            from robofollow_model_server.openpi import OpenpiServer
            server: Any = OpenpiServer(host, args.host, 8000 if args.port is None else args.port,
                                       metadata={"policy": args.policy, "server": "robofollow-model-server"}, **limits)
        else:
            from robofollow_model_server.tcp import TcpServer
            server = TcpServer(host, args.host, 8999 if args.port is None else args.port, **limits)
    except OSError as exc:
        host.close()
        what = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
        print(f"error: --host/--port: {args.host}:{args.port} {what}", file=sys.stderr)
        return 3
    return run_until_signal(server, host, protocol=args.protocol, spec=args.policy, grace_s=args.grace)


if __name__ == "__main__":
    sys.exit(main())
