"""Health checks of the parts the product stands on, for ``robofollow doctor`` and ``make setup``.

Each check does the real thing (a DDS publish/subscribe round trip, a physics step, a render), not
an import alone, because an installed-but-broken part (no RMW, no Vulkan device) only shows then.
Heavy imports happen inside each check so one missing part cannot hide the others.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
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
        fix="run `make setup` (installs ros-rclpy and ros-rmw-fastrtps-cpp)",
    )
    try:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String
    except Exception as exc:
        result.detail = f"import failed: {exc}"
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
        fix="run `make setup` (installs sapien)",
    )
    try:
        import sapien
    except Exception as exc:
        result.detail = f"import failed: {exc}"
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
    result = CheckResult("torch", ok=False, required=True, fix="run `make setup` (installs torch==2.13.0, CPU)")
    try:
        import torch

        result.version = torch.__version__
        value = float(torch.ones(3).sum())
        result.ok = value == 3.0
        result.detail = f"cuda available: {torch.cuda.is_available()}"
    except Exception as exc:
        result.detail = f"import failed: {exc}"
    return result


def check_opencv() -> CheckResult:
    result = CheckResult("OpenCV", ok=False, required=True, fix="run `make setup` (installs opencv-python-headless)")
    try:
        import cv2
        import numpy as np

        result.version = cv2.__version__
        ok, buf = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
        result.ok = bool(ok) and len(buf) > 0
        result.detail = "PNG encode works"
    except Exception as exc:
        result.detail = f"import failed: {exc}"
    return result


def check_foxglove() -> CheckResult:
    result = CheckResult(
        "foxglove-sdk",
        ok=False,
        required=True,
        version=_pkg_version("foxglove-sdk"),
        fix="run `make setup` (installs foxglove-sdk)",
    )
    try:
        import foxglove  # noqa: F401
        from foxglove.schemas import Pose  # noqa: F401

        result.ok = True
        result.detail = "SDK and schemas import"
    except Exception as exc:
        result.detail = f"import failed: {exc}"
    return result


CHECKS: tuple[Callable[[], CheckResult], ...] = (
    check_ros_dds,
    check_sapien_physics,
    check_sapien_render,
    check_torch,
    check_opencv,
    check_foxglove,
)


def run_checks(require_render: bool = False) -> list[CheckResult]:
    results = []
    for check in CHECKS:
        try:
            res = check()
        except Exception as exc:
            res = CheckResult(
                check.__name__.removeprefix("check_"), ok=False, required=True, detail=f"check crashed: {exc}"
            )
        if res.name == "SAPIEN rendering" and require_render:
            res.required = True
        results.append(res)
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
