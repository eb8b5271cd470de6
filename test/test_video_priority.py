"""SVT-AV1 run as root makes its threads real-time; encode_frames puts them back (thread_priority.py).

Each check runs in a child process so that a failure cannot leave this test worker at SCHED_FIFO 99."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ENCODE = """
import json, os, sys
import numpy as np
from pathlib import Path
frames = np.zeros((6, 48, 64, 3), np.uint8)
if sys.argv[1] == "guarded":
    from robofollow_ros.datasets.video import VideoSettings, encode_frames
    encode_frames(frames, Path(sys.argv[2]), 10, VideoSettings())
else:  # PyAV alone, as the encoder leaves this process
    import av
    with av.open(sys.argv[2], "w") as c:
        s = c.add_stream("libsvtav1", rate=10); s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")): c.mux(p)
        for p in s.encode(): c.mux(p)
policies = {t: os.sched_getscheduler(int(t)) for t in os.listdir("/proc/self/task")}
print(json.dumps(sorted(set(policies.values()))))
"""


def _policies_after(mode: str, tmp_path) -> set[int]:  # type: ignore[no-untyped-def]
    proc = subprocess.run([sys.executable, "-c", ENCODE, mode, str(tmp_path / f"{mode}.mp4")], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "SVT_LOG": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(os.geteuid() != 0, reason="SVT-AV1 can only make itself real-time as root")
def test_the_encoder_alone_makes_the_process_real_time_as_root(tmp_path):
    """The hazard, measured on this machine's PyAV build: if this stops failing, the guard has nothing to do."""
    assert os.SCHED_FIFO in _policies_after("raw", tmp_path)


def test_encode_frames_leaves_every_thread_at_ordinary_priority(tmp_path):
    assert _policies_after("guarded", tmp_path) <= {os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_IDLE}
    assert (tmp_path / "guarded.mp4").stat().st_size > 0
