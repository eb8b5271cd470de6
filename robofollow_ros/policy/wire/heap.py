"""Give freed request buffers back to the system: glibc's malloc set so that RSS follows the memory budget.

Issue 36: 64 requests of 32 MiB took the RoboFollow TCP server to a 994 MiB peak and left 693 MiB resident
afterwards against a 512 MiB budget, although the budget (``budget.py``) never let requests hold more than
512 MiB at once. The excess is glibc's, not ours: its mmap threshold is *dynamic* — once a large buffer
allocated by ``mmap`` is freed, the threshold rises to that size (up to 32 MiB), so every later buffer up to
32 MiB is carved from the heaps of the handler threads' arenas, where freed memory stays resident and
fragments. Fixing the threshold at :data:`MMAP_THRESHOLD_BYTES` (which also ends the dynamic adjustment) and
trimming heaps above :data:`TRIM_THRESHOLD_BYTES` gives large buffers back when they are freed: the same run
peaked at 566 MiB and left 86 MiB.

Process-wide and idempotent; every policy server calls :func:`bound_heap` when it is built. Elsewhere than
glibc (musl, macOS) it does nothing. Setting ``MALLOC_MMAP_THRESHOLD_`` in the environment wins (glibc reads
it at start; we then leave the threshold alone).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

#: Buffers from this size on are mmapped and returned to the system when freed (a camera image, 230 KB, is below).
MMAP_THRESHOLD_BYTES = 256 * 1024
#: Free memory at the top of a heap beyond this is returned to the system.
TRIM_THRESHOLD_BYTES = 1 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_lock = threading.Lock()
_done: bool | None = None


def bound_heap() -> bool:
    """Fix glibc's mmap and trim thresholds (module docstring); True when they are set (now or before)."""
    global _done
    with _lock:
        if _done is None:
            _done = _set_thresholds()
        return _done


def _set_thresholds() -> bool:
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                   TRIM_THRESHOLD_BYTES))
