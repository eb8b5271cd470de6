"""Keeping SAPIEN's renderer warm across scenes: the rendered-throughput fix of issue 16.

Measured on the CPU renderer (lavapipe): the first picture of a fresh scene cost 3-6 s, the next
ones 10-50 ms. The cost is not the scene's content (robot meshes, table, lights, cameras: a second
fresh scene built while the first one is still alive renders its first picture in ~15 ms). It is
SAPIEN's shared renderer state, which is torn down whenever the last render system of the process
is destroyed and rebuilt (shaders, pipelines) by the next picture. ``SimWorld.reset`` drops the old
scene before building the new one, so every trial paid the rebuild.

One idle ``RenderSystem``, created once and held for the life of the process, keeps that state
alive. Each trial still gets a brand-new scene (physics *and* render bodies), so a trial's result
and its pictures cannot depend on what ran before in the process: determinism per seed is kept by
construction, not by resetting a reused scene back to a start state.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sapien

_LOCK = threading.Lock()
_PIN: sapien.render.RenderSystem | None = None


def keep_renderer_warm() -> None:
    """Create the process-wide idle render system once (thread-safe; later calls do nothing)."""
    global _PIN
    with _LOCK:
        if _PIN is None:
            _PIN = sapien.render.RenderSystem()


def warm_up(scratch: Any, task: Any) -> float:
    """Take the process's first picture now, of a throw-away scene (``scratch``: a rendering ``SimWorld`` of its
    own, closed after), so that no trial pays for building the renderer; returns the seconds it took (run.json's
    ``renderer_startup_s``). The renderer's shared state is then kept for the process (:func:`keep_renderer_warm`).
    """
    started = time.monotonic()
    try:
        scratch.reset(task, 0)
        scratch.render_images()
    finally:
        scratch.close()
    return round(time.monotonic() - started, 3)


def renderer_kept_warm() -> bool:
    return _PIN is not None


def release_renderer() -> None:
    """Drop the idle render system (the next fresh scene pays the full first-picture cost again).

    Only benchmarks and tests that reproduce the old path need this.
    """
    global _PIN
    with _LOCK:
        _PIN = None
