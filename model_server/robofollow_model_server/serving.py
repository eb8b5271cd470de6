"""What both servers share: loading the policy, handing it to one connection at a time, error
replies, and a shutdown that leaves no thread inside the policy when the interpreter exits.

Why the shutdown is careful (issue 25): ``robofollow serve`` hosting a torch policy aborted at exit
with "terminate called without an active exception" (exit 134). A policy call still running in a
daemon thread when the interpreter finalizes returns from torch's C++ code, tries to take the GIL
back, and CPython ends such threads with ``pthread_exit``; its forced unwind through a C++
``noexcept`` frame (a GIL guard's destructor) calls ``std::terminate``. So :func:`run_until_signal`
stops accepting, closes every connection, waits (at most ``grace_s``) for the threads that are
inside the policy, closes the policy, and only then lets Python exit. A call still running after
the grace period (a hung model) cannot be joined: then the process leaves with ``os._exit`` after
flushing its output, before finalization can touch that thread. The policy's ``close()`` runs in a
thread of its own under the same grace deadline (a ``close`` that blocks, such as a client retrying a
vanished server, is left behind the same way) and behind an exception guard (a ``close`` that raises
is one line on stderr, not a traceback). A second SIGINT/SIGTERM skips the wait at once, in either
phase. The exit status is 0 in every case.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any, Protocol

import numpy as np

from robofollow_model_server.contract import check_actions, check_instruction

#: Seconds a new connection waits for the connection before it to give the policy back.
DEFAULT_BUSY_WAIT_S = 10.0
#: Seconds a server waits for the next request on an idle connection.
DEFAULT_IDLE_TIMEOUT_S = 1800.0
#: Seconds a request may take to arrive once its first byte came (a deadline for the whole frame).
DEFAULT_FRAME_TIMEOUT_S = 60.0
#: Seconds shutdown waits for a policy call in progress before leaving without it.
DEFAULT_GRACE_S = 30.0
#: The names of the threads that may be inside the policy (connections, the stopper): shutdown joins them.
THREAD_PREFIX = "model-server-"
DEBUG_HINT = "full traceback withheld; start the server with --debug to include it"


class ServerBusyError(RuntimeError):
    """Another connection holds the policy (one policy object serves one connection at a time)."""


def load_policy(spec: str, kwargs: dict[str, Any] | None = None) -> Any:
    """``module:function`` (or ``module:Class``) called with ``kwargs``; the policy it returns."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--policy: {spec!r} is not module:function")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # module:function from the current directory, as `python -m` does
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    policy = target(**(kwargs or {}))
    missing = [name for name in ("reset", "set_instruction", "predict") if not callable(getattr(policy, name, None))]
    if missing:
        raise TypeError(f"--policy: {spec} returned a {type(policy).__name__} without {', '.join(missing)}")
    return policy


class PolicyHost:
    """The one policy object, lent to one connection at a time; every call checked on the way out."""

    def __init__(self, policy: Any, busy_wait_s: float = DEFAULT_BUSY_WAIT_S) -> None:
        self.policy = policy
        self.busy_wait_s = busy_wait_s
        self._free = threading.Condition()
        self._owner: object | None = None
        self._closed = False

    def acquire(self, owner: object) -> None:
        with self._free:
            if not self._free.wait_for(lambda: self._owner is None or self._closed, self.busy_wait_s):
                raise ServerBusyError(f"server busy: another connection holds the policy (one at a time) and did "
                                      f"not give it back within {self.busy_wait_s:g} s")
            if self._closed:
                raise ServerBusyError("server shutting down")
            self._owner = owner

    def release(self, owner: object) -> None:
        with self._free:
            if self._owner is owner:
                self._owner = None
                self._free.notify_all()

    def reset(self) -> None:
        self.policy.reset()

    def set_instruction(self, text: Any) -> None:
        self.policy.set_instruction(check_instruction(text))

    def predict(self, obs: dict[str, Any]) -> np.ndarray:
        return check_actions(self.policy.predict(obs))

    def info(self) -> dict[str, Any]:
        """The policy's own ``server_info()`` (what it is, for run.json), where it has one."""
        info = getattr(self.policy, "server_info", None)
        return dict(info()) if callable(info) else {}

    def close(self) -> None:
        with self._free:
            self._closed = True
            self._free.notify_all()
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()


def describe_error(exc: BaseException, debug: bool) -> tuple[str, str]:
    """``(error, traceback)`` of an error reply; the traceback is one line unless ``debug``."""
    error = str(exc) or type(exc).__name__
    if debug:
        return error, "".join(traceback.format_exception(exc))
    return error, f"{type(exc).__name__}: {error} ({DEBUG_HINT})"


class Server(Protocol):
    address: tuple[str, int]

    def start(self) -> Any: ...

    def stop(self, grace_s: float) -> None: ...


def _wait(thread: threading.Thread, deadline: float, hurry: threading.Event) -> None:
    """Join ``thread`` until it ends, the grace ``deadline`` passes or a second signal (``hurry``) comes."""
    while thread.is_alive() and not hurry.is_set() and time.monotonic() < deadline:
        thread.join(0.2)


def _close_guarded(host: PolicyHost) -> None:
    """``host.close()``; a policy whose ``close()`` raises is said in one line (the exit status stays 0:
    the server did stop, and nothing a client was promised is lost)."""
    try:
        host.close()
    except Exception as exc:  # the policy's own close: any failure is reported, never a traceback
        text = (str(exc) or type(exc).__name__).splitlines()[0][:300]
        print(f"policy close() failed: {type(exc).__name__}: {text}", file=sys.stderr, flush=True)


def run_until_signal(server: Server, host: PolicyHost, *, protocol: str, spec: str,
                     grace_s: float = DEFAULT_GRACE_S) -> int:
    """Serve until SIGINT/SIGTERM, then shut down cleanly (module docstring); returns the exit status."""
    stop = threading.Event()
    hurry = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            hurry.set()
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        address, port = server.address
        print(f"Policy server: {address}:{port}", flush=True)
        print(f"protocol {protocol}, policy {spec}; SIGINT/SIGTERM stops it", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
        print("stopping: closing connections, waiting for a policy call in progress (a second signal stops "
              "waiting)", file=sys.stderr, flush=True)
        deadline = time.monotonic() + grace_s  # one grace for stopping and closing together
        stopper = threading.Thread(target=server.stop, args=(grace_s,), name=f"{THREAD_PREFIX}stop",
                                   daemon=True)
        stopper.start()
        _wait(stopper, deadline, hurry)
        if not stopper.is_alive():
            closer = threading.Thread(target=_close_guarded, args=(host,), name=f"{THREAD_PREFIX}close", daemon=True)
            closer.start()
            _wait(closer, deadline, hurry)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    busy = [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]
    if busy:
        print(f"policy server stopped; leaving without waiting for {', '.join(busy)} (still inside the policy "
              "after the grace period)", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(0)  # never finalize the interpreter under a thread inside native code
    print("policy server stopped, policy closed", file=sys.stderr, flush=True)
    return 0

