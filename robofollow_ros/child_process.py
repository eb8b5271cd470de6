"""Child processes that end with the process that started them, even when it is killed with SIGKILL.

``robofollow bringup`` runs one process per node and ``robofollow demo`` runs a policy server and a
bringup. A supervisor killed with ``kill -9`` runs no cleanup: its children used to live on (the
trial manager ran the remaining trials alone, the arm bridge and the policy node stayed on DDS, the
demo's policy server kept its port).

Linux's ``PR_SET_PDEATHSIG`` asks the kernel to signal a process when its parent dies. The child
sets it for itself as it starts (:func:`follow_parent`, called by every node executable and by the
``robofollow`` command), told by :data:`PARENT_PID_ENV` which parent to follow; the parent only puts
that variable in the child's environment (:func:`child_env`). Nothing runs between fork and exec,
because ``preexec_fn`` is unsafe in a process with threads. A parent that died before the child got
that far is caught by comparing ``getppid()`` with the recorded pid. The signal is SIGTERM, which
every node turns into a clean stop (``nodes._main.stop_on_signals``).

Caveat of the kernel feature: the signal follows the *thread* that started the child, so
supervisors start children from their main thread (bringup and demo do).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Mapping

#: Environment variable naming the pid of the parent a child must not outlive.
PARENT_PID_ENV = "ROBOFOLLOW_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) plus the variable that ties a child's life to this process."""
    out = dict(os.environ if env is None else env)
    out[PARENT_PID_ENV] = str(os.getpid())
    return out


def follow_parent(sig: int = signal.SIGTERM) -> bool:
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
