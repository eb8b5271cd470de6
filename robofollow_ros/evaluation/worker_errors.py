"""Why a worker could not start or died, in one line each backend reports the same way."""

from __future__ import annotations

import signal
from pathlib import Path

#: Start-failure kinds, mapped by the CLI to exit statuses: a bad SPEC or kwargs is bad input, a
#: policy server that cannot be reached is ``EXIT_POLICY_UNREACHABLE``, anything else is internal.
START_BAD_SPEC, START_UNREACHABLE, START_DIED, START_OTHER = "bad_spec", "unreachable", "died", "other"


class PolicyStartError(RuntimeError):
    """The policy could not be built, or a remote one not reached (connect + reset), in a worker."""


class WorkerStartError(RuntimeError):
    """No worker could be started (the policy or the simulator failed to load); nothing ran on it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def start_failure(exc: BaseException) -> tuple[str, str]:
    """(kind, one-line message) of an exception raised while building a worker."""
    from robofollow_ros.policy.spec import PolicySpecError

    first = (str(exc).strip().splitlines() or [""])[0]
    cause = exc.__cause__ if isinstance(exc, PolicyStartError) else None
    if isinstance(exc, PolicySpecError) or isinstance(cause, PolicySpecError):
        return START_BAD_SPEC, str(cause or exc).strip().splitlines()[0]
    if isinstance(exc, PolicyStartError):
        return START_UNREACHABLE, first
    if isinstance(exc, SystemExit):
        return START_DIED, f"sys.exit({exc.code!r}) while a worker was starting"
    return START_OTHER, f"a worker could not start: {type(exc).__name__}: {first}"


def oom_kills() -> int | None:
    """The kernel's count of OOM kills so far (``/proc/vmstat``), or None where it is not available."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def death_reason(exitcode: int | None, oom_before: int | None = None) -> str:
    """How a worker process ended, e.g. ``was killed by SIGKILL (the kernel's out-of-memory killer)``."""
    if exitcode is None:
        return "stopped answering"
    if exitcode >= 0:
        return f"exited with status {exitcode}"
    signum = -exitcode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if signum == signal.SIGKILL:
        after = oom_kills()
        if oom_before is not None and after is not None and after > oom_before:
            return "was killed by SIGKILL from the kernel's out-of-memory killer (out of memory)"
        return "was killed by SIGKILL (an operator, or the out-of-memory killer of a container)"
    if signum == signal.SIGABRT:
        return "aborted (SIGABRT)"
    return f"was killed by {name}"
