"""Child processes that end with the process that started them, even when it is killed with SIGKILL.

``robofollow bringup`` runs one process per node and ``robofollow demo`` runs a policy server and a
bringup. A supervisor killed with ``kill -9`` runs no cleanup: its children used to live on (the
trial manager ran the remaining trials alone, the arm bridge and the policy node stayed on DDS, the
demo's policy server kept its port).

Linux's ``PR_SET_PDEATHSIG`` asks the kernel to signal a process when its parent dies. Supervisors
start their children through this module (:func:`child_command`: ``python -m
robofollow_ros.child_process MODULE ARGS...``), which sets it as the child's very first act, before
the child's own imports (rclpy, SAPIEN) take seconds on a loaded machine, then runs ``MODULE`` as
``python -m MODULE`` would. Nothing runs between fork and exec, because ``preexec_fn`` is unsafe in a
process with threads. The parent's pid travels in :data:`PARENT_PID_ENV`, so a parent that died
before the child got that far is caught by comparing ``getppid()`` with it. The signal is SIGHUP:
its default action ends a child at once (during its imports, or a ``robofollow`` command), and a
node that is spinning turns it into a clean stop bounded by a short grace
(``nodes._main.stop_on_signals``), so no node outlives its supervisor by more than about a second.

Caveat of the kernel feature: the signal follows the *thread* that started the child, so
supervisors start children from their main thread (bringup and demo do).
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys
from collections.abc import Mapping, Sequence

#: Environment variable naming the pid of the parent a child must not outlive.
PARENT_PID_ENV = "ROBOFOLLOW_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_command(module: str, args: Sequence[str] = ()) -> list[str]:
    """The command line that runs ``python -m module args...`` as a child that ends with this process."""
    return [sys.executable, "-m", __name__, module, *args]


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) plus the variable that ties a child's life to this process."""
    out = dict(os.environ if env is None else env)
    out[PARENT_PID_ENV] = str(os.getpid())
    return out


def follow_parent(sig: int = signal.SIGHUP) -> bool:
    """If started by :func:`child_env`, receive ``sig`` when that parent dies; True when armed.

    The variable is removed from this process's environment so that its own children, started with
    :func:`child_env`, follow this process and not the grandparent.
    """
    raw = os.environ.pop(PARENT_PID_ENV, None)
    if raw is None or not raw.isdigit():
        return False
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    if os.getppid() != int(raw):  # the parent died before we armed: we were handed to another reaper
        os.kill(os.getpid(), sig)
    return True


def main(argv: Sequence[str]) -> None:
    """``python -m robofollow_ros.child_process MODULE ARGS...``: arm, then run MODULE as ``-m`` would."""
    if not argv:
        sys.exit(f"usage: python -m {__name__} MODULE [ARGS...]")
    follow_parent()
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
