"""The multi-host test bed (``tools/testbed.sh``) for tests: hosts are network namespaces with their own
IP, process table and ``/tmp/ray``, joined by a switch that can delay, drop and unplug.

Each pytest process gets its own prefix (``rfbt<pid>``), so concurrent runs never share a bed; a bed whose
pytest process is gone (killed mid-run) is removed by the next one that starts. Every bed is torn down
when its fixture ends, and at interpreter exit as a last resort. Where namespaces are not permitted (not
root, a container without CAP_SYS_ADMIN, no /dev/net/tun), the tests that need a bed skip with one line."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "testbed.sh"
PREFIX = f"rfbt{os.getpid()}"
#: The evaluator and Ray's CLI, run inside the hosts (the same environment as the tests).
PY = sys.executable
RAY = str(Path(sys.executable).parent / "ray")


def unavailable() -> str | None:
    """Why no bed can be built here (one line), or None."""
    if os.geteuid() != 0:
        return "the multi-host test bed needs root (network, PID and mount namespaces)"
    for tool in ("ip", "unshare", "nsenter", "python3"):
        if shutil.which(tool) is None:
            return f"the multi-host test bed needs '{tool}' (Debian: iproute2, util-linux, python3)"
    if not Path("/dev/net/tun").exists():
        return "the multi-host test bed needs /dev/net/tun (its switch's ports are TAP devices)"
    probe = subprocess.run(["unshare", "--net", "--mount", "--pid", "--fork", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces are not permitted here: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def _script(*args: str, prefix: str = PREFIX, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, RFB_PREFIX=prefix))


def remove_orphaned_beds() -> list[str]:
    """Tear down the beds of pytest processes that no longer run (a run killed before its teardown)."""
    names = set(re.findall(r"^(rfbt\d+)-(?:sw|h\d+)\b", subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True).stdout, re.M))
    names |= {p.name[: -len("-testbed")] for p in Path("/run").glob("rfbt*-testbed")}
    removed = []
    for prefix in sorted(names):
        if prefix != PREFIX and not Path(f"/proc/{prefix[4:]}").exists():
            _script("down", prefix=prefix)
            removed.append(prefix)
    return removed


class Testbed:
    """One bed of ``hosts`` hosts (1..n), host i at :meth:`ip` ``(i)``."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, hosts: int, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        self.hosts = hosts
        self._up = False
        atexit.register(self.down)  # a last resort: the fixture's teardown normally comes first
        done = _script("up", str(hosts), *self._shape_args(delay_ms, jitter_ms, loss_pct))
        self._up = True
        if done.returncode != 0:
            self.down()
            raise RuntimeError(f"tools/testbed.sh up {hosts} failed: {done.stderr.strip()}")

    @staticmethod
    def _shape_args(delay_ms: float, jitter_ms: float, loss_pct: float) -> list[str]:
        return ["--delay", f"{delay_ms:g}", "--jitter", f"{jitter_ms:g}", "--loss", f"{loss_pct:g}"]

    @staticmethod
    def ip(host: int) -> str:
        return f"10.213.0.{host}"

    def _ok(self, *args: str) -> None:
        done = _script(*args)
        if done.returncode != 0:
            raise RuntimeError(f"tools/testbed.sh {' '.join(args)} failed: {done.stderr.strip()}")

    def shape(self, host: int, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        self._ok("shape", str(host), *self._shape_args(delay_ms, jitter_ms, loss_pct))

    def link(self, host: int, up: bool) -> None:
        """Plug or pull host ``host``'s cable (its interface loses its carrier; frames to and from it are gone)."""
        self._ok("link", str(host), "up" if up else "down")

    def command(self, host: int, *argv: str) -> list[str]:
        return ["bash", str(SCRIPT), "exec", str(host), *argv]

    def env(self, **extra: str) -> dict[str, str]:
        """The tests' environment, with this checkout importable, for processes on the hosts."""
        return dict(os.environ, RFB_PREFIX=PREFIX, PYTHONPATH=str(REPO), **extra)

    def popen(self, host: int, *argv: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(self.command(host, *argv), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env(**env))

    def run(self, host: int, *argv: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(host, *argv), capture_output=True, text=True, timeout=timeout,
                              env=self.env(**env))

    def down(self) -> None:
        if self._up:
            self._up = False
            with suppress(subprocess.TimeoutExpired):
                _script("down")


def bed(hosts: int, **shape: Any) -> Iterator[Testbed]:
    """For fixtures: ``yield from bed(4)``; skips (one line) where no bed can be built here."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    remove_orphaned_beds()
    testbed = Testbed(hosts, **shape)
    try:
        yield testbed
    finally:
        testbed.down()
