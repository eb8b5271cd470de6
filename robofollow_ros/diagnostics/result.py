"""What a check of ``robofollow doctor`` reports, and the helpers every check uses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Upper bound on every wait in the checks, in seconds.
CHECK_TIMEOUT_S = 15.0


@dataclass
class CheckResult:
    """Outcome of one check; ``fix`` says what to do when it fails."""

    name: str
    ok: bool
    required: bool
    version: str | None = None
    detail: str = ""
    fix: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pkg_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
