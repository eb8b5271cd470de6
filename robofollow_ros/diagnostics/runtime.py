"""The parts that show they work only by working: a DDS round trip, a physics step, a render, torch."""

from __future__ import annotations

import os
import time
import uuid

from robofollow_ros.diagnostics.distro import ros_distro
from robofollow_ros.diagnostics.result import CHECK_TIMEOUT_S, CheckResult, first_line, pkg_version
from robofollow_ros.diagnostics.versions import pip_fix


def check_ros_dds(timeout_s: float = CHECK_TIMEOUT_S) -> CheckResult:
    """Import rclpy and send one message to ourselves over DDS (publisher and subscriber in one node)."""
    result = CheckResult(
        "rclpy + DDS round trip",
        ok=False,
        required=True,
        version=pkg_version("ros-rclpy"),
        fix="source /opt/ros/$ROS_DISTRO/setup.bash (a ROS install), or run `make setup` (the venv's ROS wheels)",
    )
    try:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String
    except Exception as exc:
        result.detail = f"import failed: {first_line(exc)}"
        return result
    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node(f"robofollow_doctor_{os.getpid()}", context=context)
        topic = f"/robofollow_doctor/ping_{uuid.uuid4().hex[:8]}"
        token = uuid.uuid4().hex
        received: list[str] = []
        def on_ping(msg: String) -> None:
            received.append(msg.data)

        node.create_subscription(String, topic, on_ping, 10)
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
            "distro": ros_distro(result.version, os.environ),
        }
        if token in received:
            result.ok = True
            result.detail = (f"ROS 2 {result.extra['distro']}: message round trip over {result.extra['rmw']} in "
                             f"{elapsed * 1000:.1f} ms")
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
        version=pkg_version("sapien"),
        fix=pip_fix("sapien"),
    )
    try:
        import sapien
    except Exception as exc:
        result.detail = f"import failed: {first_line(exc)}"
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
        version=pkg_version("sapien"),
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
        result.detail = f"import failed: {first_line(exc)} (optional: robofollow train, learned:CKPT policies)"
    return result
