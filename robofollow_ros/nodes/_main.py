"""The body of every node executable's ``main()``: run one node until Ctrl-C, SIGTERM or a ROS shutdown.

A node that refuses its parameters (``ros2 run ... --ros-args -p x:=bad``) says so in one line on stderr,
naming the parameter and the value, and exits with ``EXIT_BAD_INPUT``: its constructor's exception, not
rclpy's traceback from inside ``declare_parameter``."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from robofollow_ros.exit_status import EXIT_BAD_INPUT
from robofollow_ros.nodes.rclpy_compat import ros_init

N = TypeVar("N", bound=Node)

#: How long a node whose supervisor died may take to stop cleanly before it exits hard (s).
ORPHAN_GRACE_S = 1.0
#: How long after SIGINT / SIGTERM a node may stay inside one callback (a sim reset builds its world for
#: 30-45 s on two CPU cores) before it exits hard: launch gives a node 5 s before SIGTERM, and every
#: node stops within 2 s. A node whose spin loop saw the signal in time stops cleanly instead.
STOP_GRACE_S = 1.0
#: How much later than the Python watchdog the lock-free one exits, should the first be kept waiting (s). The
#: lock-free one stays armed through the teardown too: a node is gone STOP_GRACE_S + BACKSTOP_S after the signal.
BACKSTOP_S = 0.5


class StopEvent(threading.Event):
    """Set by a stop signal; :meth:`noticed` tells the hard-exit watchdog that the node is stopping cleanly.

    Two watchdogs bound a stop. The first, a Python timer, exits with one line and ``128 + signal`` after
    the grace. It needs the interpreter lock to run, and any call in C that does not release the lock keeps
    it waiting: measured with a backtracking regex in the main thread, a timer of 1 s fired after 9 s. So
    the second is faulthandler's watchdog, a C thread that needs no lock: it dumps
    the threads' stacks to stderr (where the node was stuck) and exits with status 1, :data:`BACKSTOP_S`
    after the first had its chance.

    :meth:`noticed` ends the first watchdog only: the second stays armed through the teardown (a join, a file
    closed, rclpy's shutdown) until the process has left, so nothing after the signal waits without a bound.
    A clean teardown takes tens of milliseconds and then leaves at once (:func:`leave_after_stop`)."""

    def __init__(self) -> None:
        super().__init__()
        self._watchdog: threading.Timer | None = None
        self._noticed = False
        self._orphaned = False

    def signalled(self, signum: int, grace_s: float) -> None:
        self.set()
        if self._watchdog is None and not self._noticed:
            self._watchdog = threading.Timer(grace_s, self._exit_hard, args=(signum,))
            self._watchdog.daemon = True
            self._watchdog.start()
            if not self._orphaned:  # an orphan's own, shorter bound stays armed
                faulthandler.dump_traceback_later(grace_s + BACKSTOP_S, exit=True)

    def orphaned(self, grace_s: float) -> None:
        """The supervisor died: stop, and exit hard after ``grace_s`` even if the clean stop has not ended,
        whoever holds the interpreter lock, because nobody is left to wait for this process or to kill it."""
        self._orphaned = True
        self.set()
        faulthandler.dump_traceback_later(grace_s, exit=True)

    def noticed(self) -> None:
        """The spin loop saw the stop: the node tears down cleanly (its files closed), without the hard exit of a
        busy callback. The lock-free watchdog stays armed: it bounds the teardown too (the class's doc)."""
        self._noticed = True
        if self._watchdog is not None:
            self._watchdog.cancel()

    def _exit_hard(self, signum: int) -> None:
        if not self._noticed:
            os.write(2, f"stopping: still busy {STOP_GRACE_S} s after signal {signum}; exiting now\n".encode())
            os._exit(128 + signum)


@contextlib.contextmanager
def stop_on_signals(grace_s: float = STOP_GRACE_S) -> Iterator[StopEvent]:
    """An event set by SIGINT or SIGTERM, instead of a ``KeyboardInterrupt`` raised wherever the process is.

    Raised inside rclpy's C++ (taking a message), the interrupt came out as "RuntimeError: Unable to
    convert call argument '0' to Python object" with a traceback from deep inside the executor, seen
    when bringup stopped a graph of node processes. A handler that only sets a flag cannot break a
    call half-way; the spin loops look at it every 0.1 s and call ``noticed()``. A callback that keeps
    the loop from looking for ``grace_s`` (:data:`STOP_GRACE_S`) ends with a hard exit, so a node never
    outlives launch's grace. (rclpy's own handlers are off: they would chain to Python's default one,
    which raises.)

    SIGHUP is what the kernel sends a node whose supervisor died (``child_process``): it stops the same
    way, but an orphan gets :data:`ORPHAN_GRACE_S` to do so before it exits hard (status 1, by the lock-free
    watchdog of :class:`StopEvent`), because nobody is left to wait for it and its peers must not find it on
    DDS."""
    stop = StopEvent()
    previous = {s: signal.signal(s, lambda signum, _frame: stop.signalled(signum, grace_s))
                for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda _signum, _frame: stop.orphaned(ORPHAN_GRACE_S))
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_node(make_node: Callable[[], Node], args: list[str] | None = None,
             make_executor: Callable[[], Executor] | None = None) -> None:
    """Init rclpy with ``args`` (``--ros-args`` included), spin the node, tear it down on any exit; after a stop
    signal, leave as soon as the teardown has ended (:func:`leave_after_stop`)."""
    stopped = False
    try:
        with stop_on_signals() as stop, ros_init(args=args, signal_handler_options=SignalHandlerOptions.NO):
            node = build_node(make_node)
            executor = make_executor() if make_executor is not None else SingleThreadedExecutor()
            try:
                executor.add_node(node)
                while rclpy.ok() and not stop.is_set():
                    executor.spin_once(timeout_sec=0.1)
            finally:
                stop.noticed()
                shutdown_executor(executor, timeout_sec=STOP_GRACE_S)
                node.destroy_node()
            stopped = stop.is_set()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    if stopped:  # rclpy is shut down (the node's DDS participant has said goodbye): nothing is left to do
        leave_after_stop(0)


def leave_after_stop(code: int) -> NoReturn:
    """Exit with ``code`` now that a stopped node has torn down: stdout and stderr flushed, the ``atexit`` handlers
    run (logging's), and no interpreter finalization.

    Finalizing the interpreter (every module torn down, the garbage collected) took 0.5–1.5 s in a node process
    after its teardown had ended (stage_monitor_node on 2 cores beside two CPU burners; 0.1 s without it), and a
    graph of seven nodes stopped at once, each paying it, took up to 3.9 s (``test_graph_stop``). Whatever the
    node had to close it closed in ``destroy_node``; a thread still running (a policy call abandoned, a daemon)
    ends with the process, as it would at the end of finalization."""
    atexit._run_exitfuncs()  # what finalization would run first: logging's flush, and any other handler
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or a pipe nobody reads any more
            stream.flush()
    os._exit(code)


def build_node(make_node: Callable[[], N]) -> N:
    """``make_node()``; a bad parameter (a rejected value, a wrong type, a bad SPEC in one) is one line on
    stderr and exit status ``EXIT_BAD_INPUT``. The constructor reads only its parameters and the files they
    name, so a ``ValueError`` there is bad input, not a bug."""
    try:
        return make_node()
    except (ValueError, ParameterException) as exc:
        line = " ".join(str(exc).split())  # one line, whatever the message held
        print(f"{os.path.basename(sys.argv[0]).removesuffix('.py')}: {line}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None


def shutdown_executor(executor: Executor, timeout_sec: float) -> None:
    """Shut a (multi-threaded) executor down after the callbacks it handed to its threads finished.

    rclpy's ``Executor.shutdown`` destroys its guard condition without waiting for in-flight
    callbacks (its wait is guarded by the flag it has just set), so a callback still running in the
    thread pool fails on that guard and rclpy prints "The following exception was never retrieved"
    at exit. Draining the pool first (``MultiThreadedExecutor`` keeps it in ``_executor``) avoids it.
    """
    pool = getattr(executor, "_executor", None)
    if pool is not None:
        pool.shutdown(wait=True)
    executor.shutdown(timeout_sec=timeout_sec)
