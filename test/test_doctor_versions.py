"""``robofollow doctor`` where rosdep's Python packages are too old or numpy is 2.x, as beside a ROS install.

The environments are real: .venv-olddeps (tools/setup_olddeps_env.sh) puts PyPI's websockets 10.4 and
OpenCV 4.6.0 (rosdep's python3-websockets and python3-opencv on Debian 12 / Ubuntu 24.04) in front of this
venv's packages, and its numpy2 folder puts numpy 2 in front (what sapien pulls without constraints.txt).
Doctor must fail with one line per broken package naming the version found and the pip command that fixes it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLDDEPS = ROOT / ".venv-olddeps"
#: pip's words when it cannot reach an index: the only reason to skip rather than fail.
NO_NETWORK = re.compile(r"Failed to establish|Temporary failure in name resolution|No matching distribution|"
                        r"Could not find a version|NewConnectionError|Network is unreachable|timed out")


@pytest.fixture(scope="session")
def olddeps_python() -> str:
    """Build (first time, ~1.5 min of downloads) or reuse (.olddeps stamp, ~2 s) the layered venv over this one."""
    env = {**os.environ, "BASE_VENV": sys.prefix}
    proc = subprocess.run(["bash", str(ROOT / "tools" / "setup_olddeps_env.sh")], capture_output=True, text=True,
                          env=env, timeout=900)
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        if NO_NETWORK.search(output):
            pytest.skip("cannot build .venv-olddeps: PyPI unreachable (tools/setup_olddeps_env.sh)")
        pytest.fail(f"tools/setup_olddeps_env.sh failed:\n{output[-2000:]}")
    return str(OLDDEPS / "bin" / "python")


def doctor(python: str, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    """``python -m robofollow_ros.cli doctor ARGS`` on this checkout, with ``pythonpath`` in front of it."""
    path = os.pathsep.join(p for p in (pythonpath, str(ROOT)) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([python, "-m", "robofollow_ros.cli", "doctor", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


def test_doctor_names_rosdeps_too_old_websockets_and_opencv_with_the_fix(olddeps_python):
    proc = doctor(olddeps_python, "--quick")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    failed = [line for line in lines if line.startswith("[FAIL]")]
    assert len(failed) == 2, proc.stdout
    websockets, opencv = failed
    fix = f"-- fix: {olddeps_python} -m pip install -c {ROOT / 'constraints.txt'}"
    assert websockets.startswith("[FAIL] websockets 10.4: cannot import name 'CloseCode'"), websockets
    assert "needs >= 15.0" in websockets and websockets.endswith(f"{fix} websockets"), websockets
    assert opencv.startswith("[FAIL] OpenCV 4.6.0: ChArUco API"), opencv
    assert "needs >= 4.7" in opencv and f"{fix} opencv-python-headless" in opencv, opencv
    assert [line.split(":")[0] for line in lines if line.startswith("[ok  ]")] == [
        f"[ok  ] numpy {version('numpy')}", f"[ok  ] matplotlib {version('matplotlib')}",
        f"[ok  ] foxglove-sdk {version('foxglove-sdk')}"]
    assert lines[-1] == "failed: websockets, OpenCV"


def test_doctor_names_numpy_2_with_the_fix(olddeps_python):
    proc = doctor(sys.executable, "--quick", pythonpath=str(OLDDEPS / "numpy2"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith("[FAIL]")]
    assert len(failed) == 1, proc.stdout
    assert failed[0].startswith("[FAIL] numpy 2.2.6: numpy 2.2.6 from ") and "needs < 2" in failed[0], failed[0]
    assert failed[0].endswith(f"-- fix: {sys.executable} -m pip install -c {ROOT / 'constraints.txt'} numpy")


def test_doctor_passes_here_and_prints_each_check_as_it_ends():
    """The full doctor takes a minute (DDS, SAPIEN, rendering, torch): its first lines come while it runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "doctor"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("robofollow doctor: 9 checks")
        first = proc.stdout.readline()
        assert first.startswith(f"[ok  ] numpy {version('numpy')}: numpy 1.x ABI"), first
        assert proc.poll() is None, "doctor ended before its first check's line was read: no progress shown"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
