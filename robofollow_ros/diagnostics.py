"""Health checks of the parts the product stands on, for ``robofollow doctor`` and ``make setup``.

Each check does the real thing (a DDS publish/subscribe round trip, a physics step, a render), not
an import alone, because an installed-but-broken part (no RMW, no Vulkan device) only shows then.
Heavy imports happen inside each check so one missing part cannot hide the others.

Beside a ROS 2 install, rosdep's Debian/Ubuntu packages and the pip-installed ones share one Python:
the version checks (numpy, matplotlib, websockets, OpenCV) catch the combinations that import but fail
later (numpy 2 under modules built for 1.x, rosdep's websockets 10.4 and OpenCV 4.6), and each fix names
the pip command with the repository's ``constraints.txt``.
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Upper bound on every wait in the checks, in seconds.
CHECK_TIMEOUT_S = 15.0

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
    source = Path(__file__).resolve().parents[1] / "constraints.txt"
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


def _pkg_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def check_ros_dds(timeout_s: float = CHECK_TIMEOUT_S) -> CheckResult:
    """Import rclpy and send one message to ourselves over DDS (publisher and subscriber in one node)."""
    result = CheckResult(
        "rclpy + DDS round trip",
        ok=False,
        required=True,
        version=_pkg_version("ros-rclpy"),
        fix="source /opt/ros/$ROS_DISTRO/setup.bash (a ROS install), or run `make setup` (the venv's ROS wheels)",
    )
    try:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String
    except Exception as exc:
        result.detail = f"import failed: {_first_line(exc)}"
        return result
    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node(f"robofollow_doctor_{os.getpid()}", context=context)
        topic = f"/robofollow_doctor/ping_{uuid.uuid4().hex[:8]}"
        token = uuid.uuid4().hex
        received: list[str] = []
        node.create_subscription(String, topic, lambda m: received.append(m.data), 10)
        pub = node.create_publisher(String, topic, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        start = time.monotonic()
        while token not in received and time.monotonic() - start < timeout_s:
            pub.publish(String(data=token))
            executor.spin_once(timeout_sec=0.05)
        elapsed = time.monotonic() - start
        result.extra = {
            "rmw": rclpy.get_rmw_implementation_identifier(),
            "domain_id": os.environ.get("ROS_DOMAIN_ID", "0"),
        }
        if token in received:
            result.ok = True
            result.detail = f"message round trip over {result.extra['rmw']} in {elapsed * 1000:.1f} ms"
        else:
            result.detail = f"no message came back within {timeout_s:.0f} s"
            result.fix = (
                "check that multicast on loopback is allowed, or set ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"
            )
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return result


def check_sapien_physics() -> CheckResult:
    """Drop a box on the ground for 0.5 s of 250 Hz physics and check it comes to rest on it."""
    result = CheckResult(
        "SAPIEN physics",
        ok=False,
        required=True,
        version=_pkg_version("sapien"),
        fix=pip_fix("sapien"),
    )
    try:
        import sapien
    except Exception as exc:
        result.detail = f"import failed: {_first_line(exc)}"
        return result
    scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
    scene.set_timestep(1 / 250)
    scene.add_ground(0.0, render=False)  # a physics-only scene must hold no render components
    builder = scene.create_actor_builder()
    builder.add_box_collision(half_size=[0.02, 0.02, 0.02])
    box = builder.build(name="probe_box")
    box.set_pose(sapien.Pose([0, 0, 0.1]))
    for _ in range(125):
        scene.step()
    z = float(box.get_pose().p[2])
    result.ok = abs(z - 0.02) < 0.005
    result.detail = f"a 4 cm box dropped from 0.10 m rests at z = {z:.4f} m"
    return result


def render_probe() -> str:
    """Render one frame of a red box and return the Vulkan device name; raises when rendering is off."""
    import numpy as np
    import sapien

    summary = sapien.render.get_device_summary()
    scene = sapien.Scene()
    scene.set_ambient_light([0.6, 0.6, 0.6])
    builder = scene.create_actor_builder()
    builder.add_box_visual(half_size=[0.2, 0.2, 0.2], material=[1.0, 0.0, 0.0, 1.0])
    builder.build_static(name="probe")
    camera = scene.add_camera("probe_camera", 32, 24, 1.0, 0.01, 10.0)
    camera.entity.set_pose(sapien.Pose([-1.0, 0.0, 0.0]))
    scene.update_render()
    camera.take_picture()
    rgba = camera.get_picture("Color")
    centre = np.asarray(rgba)[12, 16, :3]
    if not (centre[0] > 0.3 and centre[1] < 0.1 and centre[2] < 0.1):
        raise RuntimeError(f"rendered pixel {centre.tolist()} is not red")
    first = summary.strip().splitlines()[0] if summary.strip() else "unknown device"
    return first.removeprefix("GPU: ").strip()


def check_sapien_render() -> CheckResult:
    result = CheckResult(
        "SAPIEN rendering",
        ok=False,
        required=False,
        version=_pkg_version("sapien"),
        fix="run `make setup` as root on Debian 12 (installs mesa-vulkan-drivers from bookworm-backports)",
    )
    try:
        result.extra["device"] = render_probe()
        result.ok = True
        result.detail = f"rendered a frame on {result.extra['device']}"
    except Exception as exc:
        result.detail = f"rendering is off: {exc}"
    return result


def check_torch() -> CheckResult:
    """Optional (``robofollow train`` and learned:CKPT policies): reported, never a failure."""
    result = CheckResult("torch", ok=False, required=False, fix=pip_fix("torch"))
    try:
        import torch

        result.version = torch.__version__
        value = float(torch.ones(3).sum())
        result.ok = value == 3.0
        result.detail = f"cuda available: {torch.cuda.is_available()}"
    except Exception as exc:
        result.detail = f"import failed: {_first_line(exc)} (optional: robofollow train, learned:CKPT policies)"
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        result.detail = f"import failed: {_first_line(exc)}"
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

    result = CheckResult("matplotlib", ok=False, required=True, version=_pkg_version("matplotlib"),
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
        result.detail = f"import matplotlib.pyplot failed: {_first_line(exc)}{cause}"
        return result
    too_old = _too_old(result.version or "", "matplotlib")
    result.ok = too_old is None
    result.detail = too_old or f"pyplot draws a PNG ({len(buffer.getvalue())} bytes), from {_from(matplotlib)}"
    return result


def check_websockets() -> CheckResult:
    """The API the websocket wires use: ``CloseCode``, the sync server and its keepalive setting (15.0 on)."""
    import inspect

    result = CheckResult("websockets", ok=False, required=True, version=_pkg_version("websockets"),
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
        problems.append(_first_line(exc))
    too_old = _too_old(result.version or "0", "websockets")
    if too_old:
        problems.append(too_old)
    result.ok = not problems
    result.detail = "; ".join(problems) or f"CloseCode and the sync server import, from {_from(websockets)}"
    return result


def check_opencv() -> CheckResult:
    """PNG encoding and the ChArUco API calibration uses: draw a board and find its corners again."""
    installed = [d for d in ("opencv-python-headless", "opencv-python") if _pkg_version(d)]
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
        problems.append(f"ChArUco API: {_first_line(exc)}" if "cv2" in sys.modules else _first_line(exc))
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
        version=_pkg_version("foxglove-sdk"),
        fix=pip_fix("foxglove-sdk"),
    )
    try:
        import foxglove  # noqa: F401
        from foxglove.schemas import Pose  # noqa: F401

        result.ok = True
        result.detail = "SDK and schemas import"
    except Exception as exc:
        result.detail = f"import failed: {_first_line(exc)}"
    return result


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
