"""The benchmark's objects as upright primitives: signed distances and where viewing rays meet them.

``primitives.py`` fits these shapes to an object's points; this module only answers geometric
questions about one shape in its own frame (origin at the object's pose origin, z up): how far a
point is from the surface (and the gradient), and where a camera ray first enters the shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Primitive:
    """An upright shape about its pose origin. ``dims``: sphere (r,), box (hx, hy, hz), cylinder (r, h),
    bowl (r_outer, r_inner, z_bottom, z_rim) relative to the origin."""

    shape: str
    dims: tuple[float, ...]

    @property
    def has_yaw(self) -> bool:
        return self.shape == "box"

    @property
    def yaw_period(self) -> float:
        if self.shape != "box":
            return 2 * math.pi
        return math.pi / 2 if abs(self.dims[0] - self.dims[1]) < 1e-6 else math.pi

    @property
    def key(self) -> tuple[str, tuple[float, ...]]:
        return self.shape, tuple(round(v, 5) for v in self.dims)


def _box2(a0: np.ndarray, a1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """2-D box SDF from per-axis excess a = |q| − h; returns d and ∂d/∂a0, ∂d/∂a1."""
    o0, o1 = np.maximum(a0, 0.0), np.maximum(a1, 0.0)
    d_out = np.hypot(o0, o1)
    outside = d_out > 0
    safe = np.where(outside, d_out, 1.0)
    first = a0 >= a1
    g0 = np.where(outside, o0 / safe, first.astype(np.float64))
    g1 = np.where(outside, o1 / safe, (~first).astype(np.float64))
    d = np.where(outside, d_out, np.maximum(a0, a1))
    return d, g0, g1


def signed_distance(prim: Primitive, q: np.ndarray, inflate: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance of local points q (N, 3) to the primitive's surface, and its gradient (N, 3).

    ``inflate`` thickens a bowl's wall on both sides (coarse-to-fine fitting of a thin shape).
    """
    if prim.shape == "sphere":
        rho = np.linalg.norm(q, axis=1)
        safe = np.where(rho > 1e-9, rho, 1.0)
        return rho - prim.dims[0], q / safe[:, None]
    if prim.shape == "box":
        a = np.abs(q) - np.asarray(prim.dims)
        outside = np.maximum(a, 0.0)
        d_out = np.linalg.norm(outside, axis=1)
        out = d_out > 0
        grad = np.where(out[:, None], outside / np.where(out, d_out, 1.0)[:, None], 0.0)
        inside_axis = np.argmax(a, axis=1)
        rows = np.nonzero(~out)[0]
        grad[rows, inside_axis[rows]] = 1.0
        d = np.where(out, d_out, a.max(axis=1))
        return d, grad * np.sign(np.where(q == 0, 1.0, q))
    rho = np.hypot(q[:, 0], q[:, 1])
    safe = np.where(rho > 1e-9, rho, 1.0)
    radial = np.column_stack([q[:, 0] / safe, q[:, 1] / safe])
    if prim.shape == "cylinder":
        r, h = prim.dims
        d, g0, g1 = _box2(rho - r, np.abs(q[:, 2]) - h)
        sz = np.sign(np.where(q[:, 2] == 0, 1.0, q[:, 2]))
        return d, np.column_stack([g0[:, None] * radial, g1 * sz])
    if prim.shape == "bowl":
        r_out, r_in, z_bottom, z_rim = prim.dims
        mid, half_t = 0.5 * (r_out + r_in), 0.5 * (r_out - r_in) + inflate
        zc, hz = 0.5 * (z_bottom + z_rim), 0.5 * (z_rim - z_bottom)
        u = rho - mid
        d, g0, g1 = _box2(np.abs(u) - half_t, np.abs(q[:, 2] - zc) - hz)
        su = np.sign(np.where(u == 0, 1.0, u))
        sz = np.sign(np.where(q[:, 2] == zc, 1.0, q[:, 2] - zc))
        return d, np.column_stack([(g0 * su)[:, None] * radial, g1 * sz])
    raise ValueError(f"primitive: unknown shape {prim.shape!r}")


def ray_distance(prim: Primitive, origin: np.ndarray, q: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each point's viewing ray enters the primitive (local frame, ``origin`` = the camera there).

    Returns (hit mask, signed residual t_hit − range (positive: the point is in front of the surface),
    outward normal at the hit, hit point, unit ray directions). Depth noise moves a point along its
    ray, so this residual is the noise itself, with no curvature bias (a distance to the surface grows
    with the noise's sideways part whichever way it points, and pulls a fit towards the camera).
    """
    rel = q - origin
    rng = np.linalg.norm(rel, axis=1)
    u = rel / np.maximum(rng, 1e-12)[:, None]
    n = len(q)
    normal = np.zeros((n, 3))
    if prim.shape == "sphere":
        (r,) = prim.dims
        b = -(u @ origin)
        disc = r * r - (origin @ origin - b * b)
        hit = disc > 0
        t = b - np.sqrt(np.maximum(disc, 0.0))
        point = origin + t[:, None] * u
        normal = point / r
    elif prim.shape == "box":
        half = np.asarray(prim.dims)
        safe = np.where(np.abs(u) < 1e-12, 1e-12, u)
        t1, t2 = (-half - origin) / safe, (half - origin) / safe
        near, far = np.minimum(t1, t2), np.maximum(t1, t2)
        axis = np.argmax(near, axis=1)
        t = near[np.arange(n), axis]
        hit = t <= far.min(axis=1)
        normal[np.arange(n), axis] = -np.sign(safe[np.arange(n), axis])
        point = origin + t[:, None] * u
    elif prim.shape == "cylinder":
        r, h = prim.dims
        a = u[:, 0] ** 2 + u[:, 1] ** 2
        b = origin[0] * u[:, 0] + origin[1] * u[:, 1]
        disc = b * b - a * (origin[0] ** 2 + origin[1] ** 2 - r * r)
        root = np.sqrt(np.maximum(disc, 0.0))
        safe_a = np.maximum(a, 1e-12)
        side_near, side_far = (-b - root) / safe_a, (-b + root) / safe_a
        uz = np.where(np.abs(u[:, 2]) < 1e-12, 1e-12, u[:, 2])
        z1, z2 = (-h - origin[2]) / uz, (h - origin[2]) / uz
        cap_near, cap_far = np.minimum(z1, z2), np.maximum(z1, z2)
        t = np.maximum(side_near, cap_near)
        hit = (disc > 0) & (t <= np.minimum(side_far, cap_far))
        point = origin + t[:, None] * u
        on_side = side_near >= cap_near
        normal[:, 0] = np.where(on_side, point[:, 0] / r, 0.0)
        normal[:, 1] = np.where(on_side, point[:, 1] / r, 0.0)
        normal[:, 2] = np.where(on_side, 0.0, -np.sign(uz))
    else:
        raise ValueError(f"ray_distance: no ray cast for {prim.shape!r}")
    hit &= t > 0
    return hit, t - rng, normal, point, u
