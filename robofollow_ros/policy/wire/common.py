"""What every wire protocol shares: its errors, its size and time bounds, and the error text a
server may show a caller.

A protocol folder (``robofollow/``, ``openpi/``, and the peers still to come) keeps its own codec,
framing, client and server; whatever two of them would otherwise define twice, or import from each
other, lives here instead, so no protocol ever imports another.

Errors. :class:`WireFormatError` is the peer's fault (a malformed frame or message), never the
policy's; :class:`PeerClosedError` is a stream that ended (cleanly between messages or in the
middle of one); :class:`RemotePolicyError` is a server's error reply, raised by every client.

Error replies (issue 6): the caller always gets the exception's type and message; the full server
traceback only when the operator started the server with ``--debug`` (:func:`describe_error`).

Bounds. Decoders accept arrays of at most :data:`MAX_NDIM` dimensions and only the dtype kinds in
:data:`NUMERIC_KINDS` (nothing that could hold objects, strings or code). Servers wait at most
:data:`DEFAULT_IDLE_TIMEOUT_S` for a connection's next request, then give a request that has
started :data:`DEFAULT_FRAME_TIMEOUT_S` to arrive in full, and serve at most
:data:`DEFAULT_MAX_CONNECTIONS` connections at once (``robofollow serve`` flags override all three).
The memory all connections of a server hold together is bounded by ``budget.py``.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from robofollow_ros.policy.interface import PolicyError

#: Most dimensions an array on any wire may have.
MAX_NDIM = 32
#: NumPy dtype kinds a decoder accepts: bool, signed and unsigned integers, floats.
NUMERIC_KINDS = frozenset("biuf")
#: Seconds a server waits for the first byte of a connection's next request.
DEFAULT_IDLE_TIMEOUT_S = 1800.0
#: Seconds a request may take to arrive once its first byte came (a deadline, not an idle timeout).
DEFAULT_FRAME_TIMEOUT_S = 60.0
#: Connections a server serves at once; the next one is refused with a message naming the limit.
DEFAULT_MAX_CONNECTIONS = 64

#: Checked native dtypes by the text a peer sent (``"<f4"``, ``b"<f4"``): a hot path on every array.
_DTYPES: dict[str | bytes, np.dtype] = {}
_MAX_CACHED_DTYPES = 256

DEBUG_HINT = "full traceback withheld; start the server with --debug to include it"


class WireFormatError(PolicyError, ValueError):
    """A frame or message that does not follow the protocol; the peer, not the policy, is at fault."""


class PeerClosedError(ConnectionError):
    """The peer closed the connection (cleanly between frames, or in the middle of one)."""


class RemotePolicyError(PolicyError, RuntimeError):
    """The server answered with an error; ``remote_traceback`` is what it chose to share."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        full = f"{message}\n--- server traceback ---\n{remote_traceback}" if remote_traceback else message
        super().__init__(full)
        self.remote_error = message
        self.remote_traceback = remote_traceback


def server_reason(text: Any, limit: int = 300) -> str:
    """One line of a server's error text that says why, for the console: of a Python traceback (openpi's
    and RoboArena's servers send ``traceback.format_exc()``; a ``--debug`` server of ours sends its reason,
    then the traceback) the reason before it, else the exception line that ends it; any other text with its
    lines joined; cut to ``limit`` characters. The whole text stays with the error (``remote_traceback``)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "(no reason given)"
    start = next((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), None)
    before = " ".join(lines[:start]) if start else lines[-1]  # start 0: the traceback alone, ended by its reason
    reason = " ".join(lines) if start is None else before
    reason = reason.replace(f" ({DEBUG_HINT})", "")
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def remote_error(prefix: str, text: Any, limit: int = 300) -> RemotePolicyError:
    """``prefix`` + the server's one-line reason (:func:`server_reason`); the server's whole text rides along
    as ``remote_traceback`` when that line left something out (a traceback, a cut)."""
    text = str(text)
    reason = server_reason(text, limit)
    whole = "Traceback (most recent call last)" in text or reason != " ".join(text.split())
    return RemotePolicyError(f"{prefix}{reason}", text if whole else "")


def describe_error(exc: BaseException, debug: bool) -> tuple[str, str]:
    """``(error, traceback)`` for an error reply. The traceback is one line unless ``debug``."""
    error = str(exc) or type(exc).__name__
    if debug:
        return error, "".join(traceback.format_exception(exc))
    return error, f"{type(exc).__name__}: {error} ({DEBUG_HINT})"


def checked_dtype(value: Any, field: str = "array dtype") -> np.dtype:
    """The NumPy dtype a peer named (``"<f4"``, as str or ASCII bytes), or :class:`WireFormatError` naming
    ``field``: only the kinds in :data:`NUMERIC_KINDS`, no structured or sub-array dtypes (nothing that
    could hold objects). Every protocol's decoder calls this one check."""
    cached = _DTYPES.get(value) if isinstance(value, str | bytes) else None
    if cached is not None:
        return cached
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not isinstance(text, str) or len(text) > 16:
        raise WireFormatError(f"{field}: {str(value)[:40]!r} is not a dtype string such as '<f4'")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError) as exc:
        raise WireFormatError(f"{field}: {text!r} is not a NumPy dtype") from exc
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise WireFormatError(f"{field}: {text!r} is not numeric or bool (allowed kinds: b, i, u, f)")
    if dtype.isnative and len(_DTYPES) < _MAX_CACHED_DTYPES:  # valid native dtypes only, and only so many
        _DTYPES[value] = dtype
    return dtype
