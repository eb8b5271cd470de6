"""A ``module:function`` policy for tests that must signal a node while a predict is in flight: ``hold``, each
predict taking ``latency_s``, with one line appended to ``marker`` as it starts (``start``) and as it answers
(``end``), so a test waits for the file to end with ``start``: a predict is then in flight (served by
``robofollow serve --policy marked_policy:make --kwargs '{"marker": PATH}'``, with ``test/`` on PYTHONPATH)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from robofollow_ros.policy.baselines.hold import HoldPolicy


class MarkedPolicy(HoldPolicy):
    def __init__(self, marker: str, latency_s: float = 1.0) -> None:
        super().__init__()
        self.marker, self.latency_s = Path(marker), float(latency_s)

    def _mark(self, what: str) -> None:
        with self.marker.open("a", encoding="utf-8") as out:
            out.write(what + "\n")

    def predict(self, obs: Any) -> Any:
        self._mark("start")
        time.sleep(self.latency_s)  # the model's time, not a synchronisation
        rows = super().predict(obs)
        self._mark("end")
        return rows


def make(marker: str, latency_s: float = 1.0) -> MarkedPolicy:
    return MarkedPolicy(marker, latency_s)
