"""``robofollow serve``: expose any policy SPEC over one of the wire protocols in :data:`SERVERS`
(RoboFollow TCP, openpi websocket, GR00T ZMQ, json_numpy ``/act``, vla-eval websocket).

Prints ``Policy server: HOST:PORT`` once listening (scripts wait for that line; with ``--port 0``
it names the port chosen), serves until SIGINT or SIGTERM, then closes the policies and exits 0.

Shutdown leaves no thread inside a policy when the interpreter exits (issue 25: a torch policy
aborted ``robofollow serve`` at exit with "terminate called without an active exception", exit
134). A policy call still running in its daemon worker thread when Python finalizes comes back from
torch's C++ code, tries to retake the GIL, and CPython ends such a thread with ``pthread_exit``,
whose forced unwind through a C++ ``noexcept`` frame calls ``std::terminate``. So the server is
stopped, the policies closed, and the policy workers joined, all within ``SHUTDOWN_GRACE_S`` (a
second signal cuts the wait short); a worker still inside the policy after that (a hung model) is
not joined but outrun: the process flushes its output and leaves with ``os._exit(0)`` before
finalization can reach that thread.

Many clients at once: the SPEC is a factory, so every connection gets its own policy (built on
demand, reused by later connections after ``reset``), unless the policy declares itself
``shareable``; then one object serves everyone and ``--batch-size`` batches concurrent requests
through its ``predict_batch``.

The policy is handed each request's observation as the server's contract check leaves it: the three
RGB images, the joint vector, the instruction, and ``privileged`` only when the client sent it (ours
does only in a run started with ``--privileged``; ``spec.load_served_policy``).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from robofollow_ros.cli._common import PORT, CliError, integer, number, seconds
from robofollow_ros.exit_status import EXIT_PORT_IN_USE

#: --protocol → (the server class, ``module:Class``; what clients speak it). A server is built as
#: ``Server(sessions, host, port, metadata=..., **limits)``; a new protocol adds a row.
SERVERS: dict[str, tuple[str, str]] = {
    "robofollow": ("robofollow_ros.policy.wire.robofollow.server:RoboFollowTcpServer",
                   "RoboFollow TCP: tcp:// clients, the official remote_policy.py"),
    "openpi": ("robofollow_ros.policy.wire.openpi.server:OpenpiPolicyServer",
               "openpi websocket: openpi:// clients, openpi-client"),
    "act": ("robofollow_ros.policy.wire.act.server:ActPolicyServer",
            "json_numpy POST /act (openvla-oft ALOHA keys): act+http:// clients, openvla-oft's run_aloha_eval"),
    "vla-eval": ("robofollow_ros.policy.wire.vlaeval.server:VlaEvalPolicyServer",
                 "vla-eval model server: vla-eval:// clients, vla-evaluation-harness"),
    "gr00t": ("robofollow_ros.policy.wire.gr00t.server:Gr00tPolicyServer",
              "GR00T ZMQ: gr00t:// clients, Isaac-GR00T's PolicyClient (token from GR00T_API_TOKEN)"),
}
PROTOCOLS = tuple(SERVERS)
#: Seconds shutdown waits for a policy call in progress (and the server's threads) before leaving without it.
SHUTDOWN_GRACE_S = 30.0


def register(subparsers: Any) -> None:
    from robofollow_ros.policy.spec import spec_forms

    p = subparsers.add_parser("serve", help=f"serve a policy over a wire protocol ({', '.join(SERVERS)})",
                              description="Expose a policy SPEC over a wire protocol, so that other harnesses' "
                                          "clients can run it. Prints 'Policy server: HOST:PORT' once listening; "
                                          "SIGINT or SIGTERM stops it and closes the policy.")
    p.add_argument("--policy", required=True, metavar="SPEC",
                   help=f"the policy to serve, one of: {spec_forms()}")
    p.add_argument("--kwargs", default="{}", metavar="JSON", help="keyword arguments for the policy factory")
    p.add_argument("--protocol", choices=PROTOCOLS, default="robofollow",
                   help="; ".join(f"{name}: {what}" for name, (_, what) in SERVERS.items())
                   + " (default robofollow)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=PORT, default=8999, help="port to bind; 0 picks a free one (default 8999)")
    p.add_argument("--policy-timeout", type=seconds(), default=300.0, metavar="S",
                   help="seconds a policy call may take before the caller gets an error (default 300)")
    p.add_argument("--max-connections", type=integer(1, 10_000), default=64, metavar="N",
                   help="connections served at once; the next one is refused with a message (default 64)")
    p.add_argument("--idle-timeout", type=seconds(), default=1800.0, metavar="S",
                   help="seconds a connection may wait between requests before it is closed (default 1800)")
    p.add_argument("--frame-timeout", type=seconds(), default=60.0, metavar="S",
                   help="seconds a request may take to arrive once it started (a deadline; default 60)")
    p.add_argument("--batch-size", type=integer(1, 1024), default=1, metavar="N",
                   help="batch up to N concurrent predicts into one predict_batch call; needs a shareable "
                        "policy with predict_batch (default 1: no batching)")
    p.add_argument("--batch-wait-ms", type=number(0, 10_000, unit="ms"), default=5.0, metavar="MS",
                   help="longest a request waits for others to join its batch (default 5)")
    p.add_argument("--episode-per", choices=("auto", "signals"),
                   help="openpi and act, whose clients send no episode message: when a connection's (or session's) "
                        "episode starts. auto (default): its first request, a new instruction, /reset (act), or the "
                        "joints back at the episode's start pose; signals: all but the start-pose rule")
    p.add_argument("--debug", action="store_true", help="include full server tracebacks in error replies")
    p.set_defaults(func=_serve)


#: Protocols whose clients send no episode message: ``--episode-per`` says when their episodes start.
EPISODE_RULE_PROTOCOLS = ("openpi", "act")


def _episode_rule(args: argparse.Namespace) -> dict[str, Any]:
    """``{"episode_per": ...}`` for openpi and act; ``--episode-per`` elsewhere is refused (their clients say
    when an episode starts: robofollow ``reset``, vla-eval ``episode_start``, GR00T ``reset``)."""
    rule = getattr(args, "episode_per", None)
    if args.protocol in EPISODE_RULE_PROTOCOLS:
        return {"episode_per": rule or "auto"}
    if rule is not None:
        raise CliError(f"--episode-per: only with --protocol {' or '.join(EPISODE_RULE_PROTOCOLS)} "
                       f"({args.protocol} clients say when an episode starts)")
    return {}


def _parse_kwargs(text: str) -> dict[str, Any]:
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--kwargs: {text!r} is not valid JSON ({exc.msg})") from exc
    if not isinstance(kwargs, dict):
        raise CliError(f"--kwargs: {text!r} must be a JSON object")
    return kwargs


def _sessions(args: argparse.Namespace, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(PolicySessions, the shared policy the caller must close or None)."""
    from robofollow_ros.policy.guard import TimeoutGuardedPolicy
    from robofollow_ros.policy.interface import close_policy
    from robofollow_ros.policy.spec import PolicySpecError, load_served_policy
    from robofollow_ros.policy.wire.batching import BatchSettings, DynamicBatcher
    from robofollow_ros.policy.wire.sessions import PolicySessions, declares_shareable

    try:
        first = load_served_policy(args.policy, kwargs)  # bad SPECs fail here, before listening
    except PolicySpecError as exc:
        raise CliError(str(exc)) from exc
    shareable = declares_shareable(first)
    if args.batch_size > 1:
        predict_batch = getattr(first, "predict_batch", None)
        if not shareable or not callable(predict_batch):
            close_policy(first)
            raise CliError(f"--batch-size: {args.batch_size} needs a policy with shareable = True and a "
                           f"predict_batch method; {args.policy!r} has "
                           f"{'no predict_batch' if shareable else 'no shareable = True'}")
        try:
            settings = BatchSettings(args.batch_size, args.batch_wait_ms)
        except ValueError as exc:
            close_policy(first)
            raise CliError(str(exc)) from exc
    if shareable:
        shared = TimeoutGuardedPolicy(first, args.policy_timeout)
        batcher = (DynamicBatcher(first.predict_batch, settings, args.policy_timeout)  # type: ignore[attr-defined]
                   if args.batch_size > 1 else None)
        return PolicySessions(shared=shared, batcher=batcher), shared

    def build() -> Any:
        return TimeoutGuardedPolicy(load_served_policy(args.policy, kwargs), args.policy_timeout)

    return PolicySessions(factory=build, first=TimeoutGuardedPolicy(first, args.policy_timeout)), None


def _serve(args: argparse.Namespace) -> int:
    kwargs = _parse_kwargs(args.kwargs)
    episode_rule = _episode_rule(args)  # refused before the policy is built
    sessions, shared = _sessions(args, kwargs)
    limits = {"debug": args.debug, "idle_timeout_s": args.idle_timeout, "frame_timeout_s": args.frame_timeout,
              "max_connections": args.max_connections}
    server: Any
    try:
        module, _, name = SERVERS[args.protocol][0].partition(":")
        server_class = getattr(importlib.import_module(module), name)
        server = server_class(sessions, args.host, args.port, metadata={"policy": args.policy}, **limits,
                              **episode_rule)
    except OSError as exc:
        sessions.close()
        if shared is not None:
            shared.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {args.port} on {args.host} is in use; stop what holds it or choose another with "
                           "--port (0 picks a free port)", EXIT_PORT_IN_USE) from None
        raise CliError(f"--host/--port: cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from exc

    stop = threading.Event()
    hurry = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            hurry.set()  # a second signal: stop waiting for a policy call in progress
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        host, port = server.address
        print(f"Policy server: {host}:{port}", flush=True)
        batching = (f", batches of up to {args.batch_size} within {args.batch_wait_ms:g} ms"
                    if sessions.batcher is not None else "")
        print(f"protocol {args.protocol}, policy {args.policy}, {sessions.kind} sessions{batching}, "
              f"up to {args.max_connections} connections; Ctrl-C stops", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        print("stopping: closing connections and policies (a second Ctrl-C stops waiting for a policy call)",
              file=sys.stderr, flush=True)
        stuck = _shut_down(server, shared, time.monotonic() + SHUTDOWN_GRACE_S, hurry)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stuck:
        print(f"policy server stopped; leaving without waiting for {len(stuck)} policy call(s) still running "
              f"(timed out, or past the {SHUTDOWN_GRACE_S:g} s grace)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)  # finalizing the interpreter under a thread inside native code aborts (module docstring)
    print("policy server stopped, policies closed", file=sys.stderr, flush=True)
    return 0


def _shut_down(server: Any, shared: Any, deadline: float, hurry: threading.Event) -> list[threading.Thread]:
    """Stop the server and close the policies (in a helper thread, so that a policy call in progress
    cannot hold this one past ``deadline``), then join the policies' worker threads; returns those
    still running at the deadline (or at a second signal), and those of calls that had already timed
    out, which are not waited for."""
    from robofollow_ros.policy.guard import STUCK_SUFFIX, WORKER_THREAD_PREFIX

    def stop() -> None:
        server.stop()  # closes the policies the sessions built
        if shared is not None:
            shared.close()

    def workers(stuck: bool) -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith(WORKER_THREAD_PREFIX) and t.is_alive()
                and t.name.endswith(STUCK_SUFFIX) == stuck]

    stopper = threading.Thread(target=stop, name="policy-server-stop", daemon=True)
    stopper.start()
    pending = [stopper]
    while pending and not hurry.is_set() and time.monotonic() < deadline:
        pending[0].join(0.2)
        pending = [t for t in [stopper, *workers(stuck=False)] if t.is_alive()]
    return [t for t in [*pending, *workers(stuck=True)] if t.is_alive()]
