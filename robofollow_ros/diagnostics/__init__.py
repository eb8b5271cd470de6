"""Health checks of the parts the product stands on, for ``robofollow doctor`` and ``make setup``.

Each check does the real thing (a DDS publish/subscribe round trip, a physics step, a render), not
an import alone, because an installed-but-broken part (no RMW, no Vulkan device) only shows then.
Heavy imports happen inside each check so one missing part cannot hide the others.

Beside a ROS 2 install, rosdep's Debian/Ubuntu packages and the pip-installed ones share one Python:
the version checks (numpy, matplotlib, websockets, OpenCV) catch the combinations that import but fail
later (numpy 2 under modules built for 1.x, rosdep's websockets 10.4 and OpenCV 4.6), and each fix names
the pip command with the repository's ``constraints.txt``.

Its parts: ``result`` (what a check reports), ``versions`` (the Python packages' versions and APIs, the
checks of ``doctor --quick``) and ``runtime`` (DDS, SAPIEN physics and rendering, torch).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from robofollow_ros.diagnostics.result import CHECK_TIMEOUT_S, CheckResult
from robofollow_ros.diagnostics.runtime import (
    check_ros_dds,
    check_sapien_physics,
    check_sapien_render,
    check_torch,
    render_probe,
)
from robofollow_ros.diagnostics.versions import (
    MINIMUM_VERSIONS,
    NUMPY_BELOW,
    check_foxglove,
    check_matplotlib,
    check_numpy,
    check_opencv,
    check_websockets,
    constraints_file,
    pip_fix,
    version_tuple,
)

__all__ = ["CHECKS", "CHECK_TIMEOUT_S", "MINIMUM_VERSIONS", "NUMPY_BELOW", "VERSION_CHECKS", "CheckResult",
           "check_ros_dds", "check_sapien_physics", "constraints_file", "main", "pip_fix", "run_checks",
           "version_tuple"]


#: The Python packages' versions and APIs: seconds in all (``robofollow doctor --quick``).
VERSION_CHECKS: tuple[Callable[[], CheckResult], ...] = (
    check_numpy,
    check_matplotlib,
    check_websockets,
    check_opencv,
    check_foxglove,
)
#: In this order: the quick version checks first, so a broken install shows within seconds.
CHECKS: tuple[Callable[[], CheckResult], ...] = (
    *VERSION_CHECKS,
    check_ros_dds,
    check_sapien_physics,
    check_sapien_render,
    check_torch,
)


def run_checks(
    require_render: bool = False, on_result: Callable[[CheckResult], None] | None = None, quick: bool = False
) -> list[CheckResult]:
    """Every check in ``CHECKS`` order (``VERSION_CHECKS`` when ``quick``); ``on_result`` sees each result
    as soon as it is known (progress)."""
    results = []
    for check in VERSION_CHECKS if quick else CHECKS:
        start = time.monotonic()
        try:
            res = check()
        except Exception as exc:
            res = CheckResult(
                check.__name__.removeprefix("check_"), ok=False, required=True, detail=f"check crashed: {exc}"
            )
        res.seconds = round(time.monotonic() - start, 2)
        if res.name == "SAPIEN rendering" and require_render:
            res.required = True
        results.append(res)
        if on_result is not None:
            on_result(res)
    return results


def main(argv: list[str]) -> int:
    """``python -m robofollow_ros.diagnostics render-probe``: used by tools/ensure_renderer.sh."""
    if argv[:1] == ["render-probe"]:
        try:
            print(render_probe())
            return 0
        except Exception as exc:
            print(f"rendering is off: {exc}", file=sys.stderr)
            return 1
    print("usage: python -m robofollow_ros.diagnostics render-probe", file=sys.stderr)
    return 2
