"""Fitting an object's known primitive (sphere, box, cylinder, bowl) to its surface points.

Extreme percentiles of a noisy point cloud move with the noise (the top 2 % of points of a flat top
under 6 mm noise sit about 1 cm above it); a least-squares fit of the known shape does not: every
point pulls the surface by its signed distance, so zero-mean noise averages out. The fit is robust
(Huber weights, then Tukey's biweight, which drops points far from the surface: the gripper's
fingers coloured by JPEG bleeding, a neighbour caught by a misregistered outline) and uses the
signed distance functions of upright primitives, with yaw as a fourth parameter for boxes, then
refines along the viewing rays (``ray_distance``), where zero-mean depth noise leaves no bias.

The objects stand upright in the benchmark (a tilted object in the hand fits approximately), so the
primitives are axis-aligned in z. ``robust_loss`` scores how well a shape explains the points with a
common truncation, which lets grounding compare a sphere with a cube on the same segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robofollow_ros.perception.shapes import Primitive, ray_distance, signed_distance

#: Points used per fit at most (a deterministic stride over the segment's points).
MAX_FIT_POINTS = 150
#: Shape scoring (which of a colour's shapes is this?) needs fewer points than the final pose.
SHAPE_POINTS = 80
ITERATIONS = 6
HUBER_ITERATIONS = 3
REFINE_ITERATIONS = 5
WARM_ITERATIONS = 2
#: The robust scale never drops below this (m): rendered depth is exact, the model is not.
SCALE_FLOOR = 0.0015
#: Bowls: a grid of starts ±BOWL_GRID_M around the first guess, then walls thickened (m, each side).
BOWL_GRID_M = 0.01
BOWL_INFLATE = (0.003,)
#: A step smaller than this (m) ends the iterations.
CONVERGED_M = 5e-5
#: Rays meeting a face more obliquely than this cosine count as this oblique (bounded derivatives).
MIN_COS = 0.2


@dataclass
class Fit:
    """Result of one fit: pose of the origin, signed distances of the used points, robust scale."""

    position: np.ndarray
    yaw: float
    residuals: np.ndarray
    scale: float
    converged: bool

    def robust_loss(self, tau: float) -> float:
        """Mean truncated squared residual, in units of τ² (0 = perfect, 1 = nothing explained)."""
        if len(self.residuals) == 0:
            return 1.0
        return float(np.mean(np.minimum(np.square(self.residuals / tau), 1.0)))

    @property
    def inlier_share(self) -> float:
        if len(self.residuals) == 0:
            return 0.0
        return float(np.mean(np.abs(self.residuals) < 2.5 * self.scale))


def subsample(points: np.ndarray, limit: int = MAX_FIT_POINTS) -> np.ndarray:
    if len(points) <= limit:
        return points
    return points[:: math.ceil(len(points) / limit)]


def fit_shape(points: np.ndarray, prim: Primitive, init_position: np.ndarray, init_yaw: float = 0.0,
              fixed_z: float | None = None, noise: float = 0.0) -> Fit:
    """Robust Gauss–Newton fit of the primitive's pose (x, y, z[, yaw]) by signed distances.

    The basin is wide (a start centimetres off converges), so this places the shape and scores it
    against other candidate shapes; ``refine_along_rays`` then removes the noise's curvature bias.
    ``fixed_z`` pins the origin's height (an object known to rest on the table plane). ``noise`` is the
    depth noise (1 σ, m) at the object's range: the robust scale never drops below it, or Tukey's
    weights would cut the noise's own tails and bias the fit. A bowl's 5 mm wall leaves local minima
    a wall's width apart (a front-wall point explained by the inner or the outer face), so bowls start
    from the best of a grid of positions, fitted first with walls thickened by ``BOWL_INFLATE``.
    """
    points = subsample(np.asarray(points, dtype=np.float64), SHAPE_POINTS)
    if prim.shape == "bowl":
        init_position = _grid_start(points, prim, init_position)
        for inflate in BOWL_INFLATE:
            coarse = _fit(points, prim, init_position, init_yaw, fixed_z, inflate, HUBER_ITERATIONS, noise)
            init_position = coarse.position
    return _fit(points, prim, init_position, init_yaw, fixed_z, 0.0, ITERATIONS, noise)


def refine_along_rays(points: np.ndarray, prim: Primitive, start: Fit, origin: np.ndarray, noise: float = 0.0,
                      fixed_z: float | None = None, warm: bool = False) -> Fit:
    """From a ``fit_shape`` result, refit with residuals along the camera's viewing rays (``ray_distance``).

    A point whose ray meets the shape counts by how far along its ray it lies from the surface (the
    depth noise itself); points beside the shape keep the signed distance. Bowls (not convex) are
    only refitted by signed distances (with ``fixed_z`` when given). ``warm``: ``start`` is already a
    refined pose (last frame's, of an unchanged segment): a few Tukey iterations on the new points.
    """
    points = subsample(np.asarray(points, dtype=np.float64))
    ray_origin = None if prim.shape == "bowl" else np.asarray(origin, dtype=np.float64)
    return _fit(points, prim, start.position, start.yaw, fixed_z, 0.0, WARM_ITERATIONS if warm else REFINE_ITERATIONS,
                noise, ray_origin, huber_iterations=0 if warm else 1)


def fit_primitive(points: np.ndarray, prim: Primitive, init_position: np.ndarray, init_yaw: float = 0.0,
                  fixed_z: float | None = None, noise: float = 0.0, origin: np.ndarray | None = None) -> Fit:
    """``fit_shape``, then (with the camera's ``origin``) ``refine_along_rays``."""
    shape = fit_shape(points, prim, init_position, init_yaw, fixed_z, noise)
    if origin is None:
        return shape
    return refine_along_rays(points, prim, shape, origin, noise, fixed_z)


def _grid_start(points: np.ndarray, prim: Primitive, start: np.ndarray) -> np.ndarray:
    """The best of a ±BOWL_GRID_M grid of horizontal offsets around ``start`` (truncated loss, τ = 6 mm,
    walls thickened by 3 mm: a smooth landscape a 2.5 mm grid cannot step over)."""
    pts = subsample(points, 100)
    offsets = np.linspace(-BOWL_GRID_M, BOWL_GRID_M, 9)
    dx, dy = np.meshgrid(offsets, offsets)
    candidates = np.asarray(start, dtype=np.float64) + np.column_stack([dx.ravel(), dy.ravel(), np.zeros(dx.size)])
    rel = (pts[None, :, :] - candidates[:, None, :]).reshape(-1, 3)
    d, _ = signed_distance(prim, rel, 0.003)
    losses = np.minimum(np.square(d.reshape(len(candidates), -1) / 0.006), 1.0).mean(axis=1)
    return np.asarray(candidates[int(np.argmin(losses))])


def _median_abs(values: np.ndarray) -> float:
    a = np.abs(values)
    k = len(a) // 2
    return float(np.partition(a, k)[k]) if len(a) else 0.0


def _solve(a: np.ndarray, b: np.ndarray) -> list[float] | None:
    """Solve the small symmetric system a·x = b (2..4 unknowns) by Gaussian elimination in Python:
    ``np.linalg.solve`` spends ten times longer on its checks than on a 4×4 system."""
    n = len(b)
    m = [[float(a[i, j]) for j in range(n)] + [float(b[i])] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-18:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for row in range(col + 1, n):
            f = m[row][col] / m[col][col]
            for k in range(col, n + 1):
                m[row][k] -= f * m[col][k]
    x = [0.0] * n
    for row in range(n - 1, -1, -1):
        x[row] = (m[row][n] - sum(m[row][k] * x[k] for k in range(row + 1, n))) / m[row][row]
    return x


def _fit(points: np.ndarray, prim: Primitive, init_position: np.ndarray, init_yaw: float, fixed_z: float | None,
         inflate: float, iterations: int, noise: float = 0.0, origin: np.ndarray | None = None,
         huber_iterations: int = HUBER_ITERATIONS) -> Fit:
    """Huber iterations (at most ``huber_iterations``, fewer once converged), then Tukey iterations."""
    pts = points
    c = np.array(init_position, dtype=np.float64)
    if fixed_z is not None:
        c[2] = fixed_z
    yaw = float(init_yaw) if prim.has_yaw else 0.0
    n_free = 2 if fixed_z is not None else 3
    n_params = n_free + (1 if prim.has_yaw else 0)
    jac = np.empty((len(pts), n_params))
    floor = max(SCALE_FLOOR, noise)
    scale, converged, huber = floor, False, huber_iterations > 0
    d = np.zeros(len(pts))
    huber_left = huber_iterations
    for _ in range(iterations):
        rel = pts - c
        cy, sy = math.cos(yaw), math.sin(yaw)
        if prim.has_yaw:
            q = np.empty_like(rel)
            q[:, 0] = cy * rel[:, 0] + sy * rel[:, 1]
            q[:, 1] = cy * rel[:, 1] - sy * rel[:, 0]
            q[:, 2] = rel[:, 2]
        else:
            q = rel
        d, g = signed_distance(prim, q, inflate)
        # Signed distance: ∂d/∂c = −R(yaw)·g ; ∂d/∂yaw = g_x·q_y − g_y·q_x.
        lever = q
        if origin is not None:
            rel_o = origin - c
            o_local = np.array([cy * rel_o[0] + sy * rel_o[1], cy * rel_o[1] - sy * rel_o[0], rel_o[2]])
            hit, along, normal, point, u = ray_distance(prim, o_local, q)
            # Along the ray: ∂r/∂c = R·n / (n·u), ∂r/∂yaw = (n·(ẑ × h)) / (n·u); grazing rays capped.
            cos = np.minimum((normal * u).sum(axis=1), -MIN_COS)
            d = np.where(hit, along, d)
            g = np.where(hit[:, None], normal, g) * np.where(hit, -1.0 / cos, 1.0)[:, None]
            lever = np.where(hit[:, None], point, q)
        if prim.has_yaw:
            jac[:, 0] = sy * g[:, 1] - cy * g[:, 0]
            jac[:, 1] = -sy * g[:, 0] - cy * g[:, 1]
            jac[:, n_free] = g[:, 0] * lever[:, 1] - g[:, 1] * lever[:, 0]
        else:
            jac[:, 0] = -g[:, 0]
            jac[:, 1] = -g[:, 1]
        if n_free == 3:
            jac[:, 2] = -g[:, 2]
        scale = max(1.4826 * _median_abs(d), floor)
        r = np.abs(d) * (1.0 / scale)
        if huber:
            w = np.minimum(1.0, 1.345 / np.maximum(r, 1e-12))
        else:
            w = np.square(np.maximum(0.0, 1.0 - np.square(r * (1.0 / 4.685))))
        jw = jac * w[:, None]
        step = _solve(jw.T @ jac + 1e-9 * np.eye(n_params), -(jw.T @ d))
        if step is None:
            break
        largest = 0.0
        for k in range(n_free):
            move = min(0.02, max(-0.02, step[k]))
            c[k] += move
            largest = max(largest, abs(move))
        if prim.has_yaw:
            yaw += min(0.2, max(-0.2, step[n_free]))
        small = largest < CONVERGED_M
        if huber:
            huber_left -= 1
            if small or huber_left == 0:
                huber = False
        elif small:
            converged = True
            break
    return Fit(c, _wrap(yaw, prim.yaw_period), d, scale, converged)


def _wrap(yaw: float, period: float) -> float:
    return (yaw + period / 2) % period - period / 2
