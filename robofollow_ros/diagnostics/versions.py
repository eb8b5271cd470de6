"""The Python packages beside a ROS install: versions and APIs (``robofollow doctor --quick``, seconds).

rosdep's Debian/Ubuntu packages and the pip-installed ones share one Python: these checks catch the
combinations that import but fail later (numpy 2 under modules built for 1.x, rosdep's websockets 10.4 and
OpenCV 4.6), and each fix names the pip command with the repository's ``constraints.txt``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from robofollow_ros.diagnostics.result import CheckResult, first_line, pkg_version

#: The oldest version of each rosdep-provided module the code runs on, and why (package.xml carries the
#: same numbers as ``version_gte``; test_package_manifest.py keeps them equal). numpy also has a ceiling.
MINIMUM_VERSIONS: dict[str, tuple[str, str]] = {
    "numpy": ("1.24", "the ROS wheels and the pinned requirements"),
    "matplotlib": ("3.6", "reports and comparisons (robofollow report / compare)"),
    "websockets": ("15.0", "the openpi, vla-eval and XPolicyLab wires (CloseCode, the sync server's keepalive)"),
    "opencv": ("4.7", "calibration's ChArUco API (CharucoBoard(...).generateImage, CharucoDetector)"),
}
#: numpy 2 breaks extension modules built for numpy 1.x (the ROS packages', rosdep's python3-matplotlib).
NUMPY_BELOW = "2"


def constraints_file() -> str:
    """Where ``constraints.txt`` is: the source checkout (also an editable or symlink install), else the
    ament share directory ``colcon build`` installs it to."""
    source = Path(__file__).resolve().parents[2] / "constraints.txt"
    if source.is_file():
        return str(source)
    try:
        from ament_index_python.packages import get_package_share_directory

        share = Path(get_package_share_directory("robofollow_ros")) / "constraints.txt"
        if share.is_file():
            return str(share)
    except Exception:  # no ament index, or the package is not in it
        pass
    return "constraints.txt"  # the file at the top of the robofollow_ros source


def pip_fix(*requirements: str) -> str:
    """The exact command that installs ``requirements`` at the constrained versions, into this Python."""
    names = " ".join(f"'{r}'" if any(c in r for c in "<>=") else r for r in requirements)
    return f"{sys.executable} -m pip install -c {constraints_file()} {names}"


def version_tuple(text: str) -> tuple[int, ...]:
    """(4, 6, 0) for '4.6.0+dfsg', (10, 4) for '10.4'; () when ``text`` does not start with a number."""
    match = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def _too_old(found: str, module: str) -> str | None:
    """'needs >= X for WHY' when ``found`` is older than the minimum for ``module``, else None."""
    minimum, why = MINIMUM_VERSIONS[module]
    if version_tuple(found) < version_tuple(minimum):
        return f"needs >= {minimum} for {why}"
    return None


def _numpy_2() -> bool:
    """Whether the numpy this Python imports is 2.x (False when numpy does not import)."""
    try:
        import numpy as np
    except Exception:
        return False
    return version_tuple(np.__version__) >= version_tuple(NUMPY_BELOW)


def _from(module: Any) -> str:
    """The folder a module was imported from: shows which layer won (venv, /usr/local, rosdep's)."""
    return str(Path(module.__file__).resolve().parents[1]) if getattr(module, "__file__", None) else "?"


def check_numpy() -> CheckResult:
    """numpy 1.x from 1.24 on: numpy 2 breaks modules built for numpy 1.x, which a ROS install is full of."""
    result = CheckResult("numpy", ok=False, required=True, fix=pip_fix("numpy"))
    try:
        import numpy as np
    except Exception as exc:
        result.detail = f"import failed: {first_line(exc)}"
        return result
    result.version = np.__version__
    if _numpy_2():
        result.detail = (f"numpy {np.__version__} from {_from(np)} is 2.x: modules built for numpy 1.x (the ROS "
                         f"packages', rosdep's python3-matplotlib) fail to import; needs < {NUMPY_BELOW}")
        return result
    too_old = _too_old(np.__version__, "numpy")
    result.ok = too_old is None
    result.detail = too_old or f"numpy 1.x ABI, from {_from(np)}"
    return result


def check_matplotlib() -> CheckResult:
    """``import matplotlib.pyplot`` and draw one PNG, as ``robofollow report`` does."""
    import io

    result = CheckResult("matplotlib", ok=False, required=True, version=pkg_version("matplotlib"),
                         fix=pip_fix("numpy") if _numpy_2() else pip_fix("matplotlib"))
    try:
        import matplotlib

        result.version = matplotlib.__version__
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure = plt.figure(figsize=(1, 1))
        figure.add_subplot().plot([0, 1], [0, 1])
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        plt.close(figure)
    except Exception as exc:
        cause = " (numpy 2 under a matplotlib built for numpy 1.x)" if _numpy_2() else ""
        result.detail = f"import matplotlib.pyplot failed: {first_line(exc)}{cause}"
        return result
    too_old = _too_old(result.version or "", "matplotlib")
    result.ok = too_old is None
    result.detail = too_old or f"pyplot draws a PNG ({len(buffer.getvalue())} bytes), from {_from(matplotlib)}"
    return result


def check_websockets() -> CheckResult:
    """The API the websocket wires use: ``CloseCode``, the sync server and its keepalive setting (15.0 on)."""
    import inspect

    result = CheckResult("websockets", ok=False, required=True, version=pkg_version("websockets"),
                         fix=pip_fix("websockets"))
    problems = []
    try:
        import websockets

        result.version = getattr(websockets, "__version__", result.version)
        from websockets.frames import CloseCode  # noqa: F401
        from websockets.sync.server import Server, serve  # noqa: F401

        if "ping_interval" not in inspect.signature(serve).parameters:
            problems.append("websockets.sync.server.serve takes no ping_interval")
    except Exception as exc:
        problems.append(first_line(exc))
    too_old = _too_old(result.version or "0", "websockets")
    if too_old:
        problems.append(too_old)
    result.ok = not problems
    result.detail = "; ".join(problems) or f"CloseCode and the sync server import, from {_from(websockets)}"
    return result


def check_opencv() -> CheckResult:
    """PNG encoding and the ChArUco API calibration uses: draw a board and find its corners again."""
    installed = [d for d in ("opencv-python-headless", "opencv-python") if pkg_version(d)]
    result = CheckResult("OpenCV", ok=False, required=True, fix=pip_fix(*(installed or ["opencv-python-headless"])))
    problems = []
    try:
        import cv2
        import numpy as np

        result.version = cv2.__version__
        ok, buf = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
        if not (ok and len(buf) > 0):
            problems.append("PNG encoding failed")
        dictionary = cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_4X4_50)
        board = cv2.aruco.CharucoBoard((5, 4), 0.04, 0.03, dictionary)
        picture = board.generateImage((500, 400), marginSize=20)
        _, ids, _, _ = cv2.aruco.CharucoDetector(board).detectBoard(picture)
        found = 0 if ids is None else len(ids)
        if found != 12:
            problems.append(f"found {found} of the 12 inner corners of a drawn ChArUco board")
    except Exception as exc:
        problems.append(f"ChArUco API: {first_line(exc)}" if "cv2" in sys.modules else first_line(exc))
    too_old = _too_old(result.version or "0", "opencv")
    if too_old:
        problems.append(too_old)
    result.ok = not problems
    result.detail = "; ".join(problems) or f"PNG encoding and a ChArUco board round trip work, from {_from(cv2)}"
    return result


def check_foxglove() -> CheckResult:
    result = CheckResult(
        "foxglove-sdk",
        ok=False,
        required=True,
        version=pkg_version("foxglove-sdk"),
        fix=pip_fix("foxglove-sdk"),
    )
    try:
        import foxglove  # noqa: F401
        from foxglove.schemas import Pose  # noqa: F401

        result.ok = True
        result.detail = "SDK and schemas import"
    except Exception as exc:
        result.detail = f"import failed: {first_line(exc)}"
    return result
