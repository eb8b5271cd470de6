"""Scripted trajectories: a tiny kinematic puppet that writes frames in the trajectory contract.

Tests, benchmarks and docs need trials whose outcome is known from the rules alone. The puppet
moves end effectors in straight lines, closes and opens grippers, and carries a grasped object
rigidly; nothing is simulated, so every frame is exactly what the script says.
"""

from __future__ import annotations

from robofollow_ros.benchmark import EvalTask, Layout, Registry, default_registry
from robofollow_ros.scoring.frame import Frame, Quat, Vec3

#: Default homes: outside the operation area (y < -0.15), as the real home pose is.
HOME = {"left": (-0.30, -0.30, 0.95), "right": (0.30, -0.30, 0.95)}
IDENTITY: Quat = (1.0, 0.0, 0.0, 0.0)


def initial_positions(layout: Layout) -> dict[str, Vec3]:
    """Nominal positions; stacked objects sit on their base, an in-bowl object just above the bowl."""
    xy = {o.name: o.nominal_xy for o in layout.objects}
    out: dict[str, Vec3] = {}
    for obj in layout.objects:
        if obj.spawn_z is not None:
            out[obj.name] = (xy[obj.name][0], xy[obj.name][1], obj.spawn_z)
    for obj in layout.objects:
        base = obj.on_top_of or obj.in_container
        if base is not None:
            bx, by, bz = out[base]
            lift = layout.object(base).half_height + obj.half_height + 0.002 if obj.on_top_of else 0.02
            out[obj.name] = (bx, by, bz + lift)
    return out


class Puppet:
    """Builds a list of frames for one task by scripting both arms."""

    def __init__(self, task: EvalTask | str, registry: Registry | None = None) -> None:
        registry = registry or default_registry()
        self.task = registry.eval_task(task) if isinstance(task, str) else task
        self.layout = registry.layout_of(self.task)
        self.objects = initial_positions(self.layout)
        self.quats: dict[str, Quat] = {o.name: IDENTITY for o in self.layout.objects if o.shape == "box"}
        self.ee: dict[str, Vec3] = dict(HOME)
        self.g = {"left": 1.0, "right": 1.0}
        self.carried: dict[str, tuple[str, float] | None] = {"left": None, "right": None}
        self.frames: list[Frame] = []
        self.snap()

    def snap(self) -> Puppet:
        """Record the current state as the next frame."""
        self.frames.append(Frame(self.ee["left"], self.ee["right"], self.g["left"], self.g["right"],
                                 dict(self.objects), dict(self.quats)))
        return self

    def hold(self, frames: int) -> Puppet:
        for _ in range(frames):
            self.snap()
        return self

    def move(self, arm: str, to: Vec3, steps: int = 5) -> Puppet:
        """Straight line to ``to`` in ``steps`` frames; a carried object keeps its offset below the EE."""
        start = self.ee[arm]
        for k in range(1, steps + 1):
            a = k / steps
            self.ee[arm] = tuple(s + (e - s) * a for s, e in zip(start, to, strict=True))  # type: ignore[assignment]
            carried = self.carried[arm]
            if carried is not None:
                name, dz = carried
                x, y, z = self.ee[arm]
                self.objects[name] = (x, y, z - dz)
            self.snap()
        return self

    def set_object(self, name: str, xyz: Vec3 | None = None, quat: Quat | None = None) -> Puppet:
        """Teleport an object (no frame is recorded)."""
        if xyz is not None:
            self.objects[name] = xyz
        if quat is not None:
            self.quats[name] = quat
        return self

    def close(self, arm: str, grasp: str | None = None, value: float = 0.0) -> Puppet:
        """Close the gripper (one frame); ``grasp`` attaches that object to the EE."""
        self.g[arm] = value
        if grasp is not None:
            self.carried[arm] = (grasp, self.ee[arm][2] - self.objects[grasp][2])
        return self.snap()

    def open(self, arm: str) -> Puppet:
        self.g[arm] = 1.0
        self.carried[arm] = None
        return self.snap()

    def reach(self, arm: str, name: str, above: float = 0.0, steps: int = 5) -> Puppet:
        x, y, z = self.objects[name]
        return self.move(arm, (x, y, z + above), steps)

    def pick(self, arm: str, name: str, lift: float = 0.10) -> Puppet:
        """Approach from above, close on the object, lift it by ``lift``."""
        self.reach(arm, name, 0.08).reach(arm, name).close(arm, grasp=name)
        x, y, z = self.ee[arm]
        return self.move(arm, (x, y, z + lift))

    def place(self, arm: str, xyz: Vec3) -> Puppet:
        """Carry the held object so it ends at ``xyz``, release, retreat upwards."""
        carried = self.carried[arm]
        dz = carried[1] if carried else 0.0
        self.move(arm, (xyz[0], xyz[1], xyz[2] + dz + 0.06)).move(arm, (xyz[0], xyz[1], xyz[2] + dz)).open(arm)
        return self.move(arm, (xyz[0], xyz[1], xyz[2] + dz + 0.08))

    def home(self, arm: str, steps: int = 5, stay: int = 25) -> Puppet:
        """Return to the frame-0 EE position and stay there ``stay`` frames."""
        return self.move(arm, HOME[arm], steps).hold(stay)
