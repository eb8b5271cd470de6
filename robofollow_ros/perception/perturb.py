"""Camera-realistic perturbations of a rendered RGB-D frame: how real cameras differ from the simulator.

Every function takes and returns plain arrays (uint8 RGB, float32 depth in metres with 0 = invalid,
as a RealSense reports it), draws its randomness from the generator it is given, and follows a
stated definition that ``test/test_perception_perturb.py`` checks:

- ``white_balance``: per-channel gains on linear light (sensor values before the sRGB curve), clipped
  at full scale; ``exposure`` is the same gain on all three channels. (``white_balance_codes``
  multiplies the 8-bit codes instead: an earlier experiment's definition, kept to reproduce it.)
- ``depth_noise``: zero-mean Gaussian depth error with RMS σ(z) = ρ · z² / 1 m, the quadratic growth of
  stereo RMS error with range (Intel RealSense D400 datasheet and "Tuning depth cameras for best
  performance": RMS error = z² · subpixel / (focal · baseline)); ρ = 1 % is the datasheet's limit of
  2 % at 2 m, and gives 6.4 mm at the 0.8 m from the head camera to the table.
- ``edge_holes``: stereo occlusion: background pixels left of a nearer object are seen by the left
  (reference) imager only, so a band of f·B·(1/z_near − 1/z_far) pixels there has no depth; plus the
  matcher's failures within ``matcher_px`` of every depth edge.
- ``misregister``: the depth picture shifted by whole pixels against the colour picture (a residual
  depth→colour extrinsic error after alignment).
- ``jpeg``: JPEG encode/decode at a quality (OpenCV's libjpeg, 4:2:0 chroma subsampling).
- ``motion_blur``: a straight-line box kernel of ``length_px`` at ``angle_deg``, applied in linear light.
- ``offset_depth_camera``: the depth a separate depth camera (RealSense: the stereo pair's origin,
  about 15 mm from the colour camera) reports, before alignment to colour.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from robofollow_ros.perception.colour_space import bytes_of_linear, linear_of_bytes

#: Range at which the depth-noise level ρ is quoted (σ = ρ · z² / REFERENCE_RANGE_M).
REFERENCE_RANGE_M = 1.0
#: RealSense D435 stereo baseline (m), for the occlusion band of ``edge_holes``.
D435_BASELINE_M = 0.050
#: A depth step larger than this between neighbours is an edge (m).
EDGE_JUMP_M = 0.01


def _check_rgb(rgb: np.ndarray) -> None:
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb: expected uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}")


def white_balance(rgb: np.ndarray, gains: tuple[float, float, float]) -> np.ndarray:
    """Multiply linear R, G, B by ``gains`` (clipped at full scale), as a camera's white balance does."""
    _check_rgb(rgb)
    g = np.asarray(gains, dtype=np.float64)
    if g.shape != (3,) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gains: expected three positive numbers, got {gains!r}")
    return bytes_of_linear(linear_of_bytes(rgb) * g)


def white_balance_codes(rgb: np.ndarray, gains: tuple[float, float, float]) -> np.ndarray:
    """Multiply the 8-bit sRGB codes themselves by ``gains`` (clipped at 255).

    Not what a camera does (``white_balance`` is), but how an earlier experiment on this project
    shifted white balance; gains g on codes are about g^2.2 in linear light (×1.12 ≈ ×1.28).
    """
    _check_rgb(rgb)
    g = np.asarray(gains, dtype=np.float64)
    if g.shape != (3,) or not np.all(np.isfinite(g)) or np.any(g <= 0):
        raise ValueError(f"gains: expected three positive numbers, got {gains!r}")
    return np.clip(np.round(rgb.astype(np.float64) * g), 0, 255).astype(np.uint8)


def exposure(rgb: np.ndarray, factor: float) -> np.ndarray:
    """Scale linear light by ``factor`` (×0.5 = one stop under), clipping highlights."""
    return white_balance(rgb, (factor, factor, factor))


def depth_sigma(z: np.ndarray | float, rho: float) -> np.ndarray:
    """RMS depth error (m) at depth ``z`` (m) for noise level ``rho``: ρ · z² / 1 m."""
    return np.asarray(rho * np.square(z) / REFERENCE_RANGE_M)


def depth_noise(depth: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Add zero-mean Gaussian error of RMS ``depth_sigma(z, rho)`` to every valid pixel."""
    if rho < 0:
        raise ValueError(f"rho: must be >= 0, got {rho}")
    d = np.asarray(depth, dtype=np.float32)
    valid = np.isfinite(d) & (d > 0)
    noisy = d + (rng.standard_normal(d.shape) * depth_sigma(np.where(valid, d, 0.0), rho)).astype(np.float32)
    return np.where(valid, np.maximum(noisy, 1e-3), 0.0).astype(np.float32)


def edge_holes(depth: np.ndarray, focal_px: float, baseline_m: float = D435_BASELINE_M,
               matcher_px: int = 1, jump_m: float = EDGE_JUMP_M) -> np.ndarray:
    """Invalidate (0) the occlusion band left of nearer objects and ``matcher_px`` around every depth edge."""
    d = np.asarray(depth, dtype=np.float32).copy()
    valid = np.isfinite(d) & (d > 0)
    holes = np.zeros(d.shape, dtype=bool)
    # Occlusion: pixel u is background, u + 1 is the nearer object's left edge.
    far, near = d[:, :-1], d[:, 1:]
    step = valid[:, :-1] & valid[:, 1:] & (far - near > jump_m)
    width = np.zeros(far.shape, dtype=np.int32)
    band = focal_px * baseline_m * (1.0 / np.where(step, near, 1.0) - 1.0 / np.where(step, far, 1.0))
    width[step] = np.ceil(band[step] - 1e-9).astype(np.int32)
    rows, cols = np.nonzero(width > 0)
    for k in range(int(width.max(initial=0))):
        keep = width[rows, cols] > k
        target = cols[keep] - k
        inside = target >= 0
        holes[rows[keep][inside], target[inside]] = True
    if matcher_px > 0:
        dz_x = np.zeros(d.shape, dtype=bool)
        dz_y = np.zeros(d.shape, dtype=bool)
        jump_x = np.abs(np.diff(np.where(valid, d, 0.0), axis=1)) > jump_m
        jump_y = np.abs(np.diff(np.where(valid, d, 0.0), axis=0)) > jump_m
        dz_x[:, :-1] |= jump_x
        dz_x[:, 1:] |= jump_x
        dz_y[:-1, :] |= jump_y
        dz_y[1:, :] |= jump_y
        edges = (dz_x | dz_y).astype(np.uint8)
        kernel = np.ones((2 * matcher_px - 1, 2 * matcher_px - 1), dtype=np.uint8)
        holes |= cv2.dilate(edges, kernel) > 0
    d[holes] = 0.0
    return d


def flying_pixels(depth: np.ndarray, rng: np.random.Generator, width_px: int = 2,
                  jump_m: float = EDGE_JUMP_M) -> np.ndarray:
    """Mixed ("flying") depth at depth edges: pixels within ``width_px`` of a nearer neighbour take a
    depth between theirs and the nearer surface's, ``z_far + a (z_near - z_far)`` with ``a`` uniform in
    (0, 1) per pixel, as a stereo matcher's window or a time-of-flight pixel straddling the edge returns.

    The far side of every edge with a jump over ``jump_m`` is affected (an object's edge behind a
    gripper finger floats towards the finger); holes stay holes.
    """
    if width_px < 1:
        raise ValueError(f"width_px: must be >= 1, got {width_px}")
    d = np.asarray(depth, dtype=np.float32)
    valid = np.isfinite(d) & (d > 0)
    far_value = np.float32(1e6)
    source = np.where(valid, d, far_value).astype(np.float32)
    kernel = np.ones((2 * width_px + 1, 2 * width_px + 1), dtype=np.uint8)
    nearest = cv2.erode(source, kernel)  # the nearest valid depth within width_px (a min filter)
    edge = valid & (nearest < far_value) & (d - nearest > jump_m)
    a = rng.uniform(0.0, 1.0, size=d.shape).astype(np.float32)
    out = d.copy()
    out[edge] = d[edge] + a[edge] * (nearest[edge] - d[edge])
    return np.where(valid, out, 0.0).astype(np.float32)


def misregister(depth: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """The depth picture moved ``dx`` px right and ``dy`` px down against colour; uncovered pixels invalid (0)."""
    if int(dx) != dx or int(dy) != dy:
        raise ValueError(f"misregistration: whole pixels only, got ({dx}, {dy})")
    d = np.asarray(depth, dtype=np.float32)
    out = np.zeros_like(d)
    h, w = d.shape
    dx, dy = int(dx), int(dy)
    if abs(dx) >= w or abs(dy) >= h:
        return out
    out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = d[max(-dy, 0):h - max(dy, 0),
                                                                  max(-dx, 0):w - max(dx, 0)]
    return out


def jpeg(rgb: np.ndarray, quality: int) -> np.ndarray:
    """Round trip through JPEG at ``quality`` (1..100)."""
    _check_rgb(rgb)
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"quality: expected 1..100, got {quality}")
    ok, data = cv2.imencode(".jpg", np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise RuntimeError("jpeg: OpenCV could not encode the picture")
    decoded = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return np.ascontiguousarray(decoded[..., ::-1])


def motion_blur_kernel(length_px: int, angle_deg: float) -> np.ndarray:
    """Normalised line kernel: ``length_px`` taps along ``angle_deg`` (0 = horizontal), odd size."""
    if length_px < 1:
        raise ValueError(f"length_px: must be >= 1, got {length_px}")
    size = 2 * (length_px // 2) + 1
    kernel = np.zeros((size, size), dtype=np.float32)
    c = size // 2
    dx, dy = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    for t in np.linspace(-(length_px - 1) / 2, (length_px - 1) / 2, length_px):
        kernel[round(c + t * dy), round(c + t * dx)] += 1.0
    return kernel / kernel.sum()


def motion_blur(rgb: np.ndarray, length_px: int, angle_deg: float = 0.0) -> np.ndarray:
    """Average of the scene over a straight motion of ``length_px`` pixels, integrated in linear light."""
    _check_rgb(rgb)
    linear = linear_of_bytes(rgb)
    blurred = cv2.filter2D(linear, -1, motion_blur_kernel(length_px, angle_deg), borderType=cv2.BORDER_REFLECT)
    return bytes_of_linear(blurred)


def offset_depth_camera(depth: np.ndarray, k: np.ndarray, offset_m: tuple[float, float, float]) -> np.ndarray:
    """The depth picture a camera with intrinsics ``k`` displaced by ``offset_m`` (colour optical frame) takes.

    Forward warp of the colour-registered depth with a z-buffer (the nearest surface wins); what the
    displaced camera would see behind an object's edge is unknown here and stays invalid (0).
    """
    d = np.asarray(depth, dtype=np.float64)
    h, w = d.shape
    v, u = np.nonzero(np.isfinite(d) & (d > 0))
    z = d[v, u]
    kinv = np.linalg.inv(k)
    points = (np.column_stack([u + 0.5, v + 0.5, np.ones_like(z)]) @ kinv.T) * z[:, None] - np.asarray(offset_m)
    zd = points[:, 2]
    ud = np.floor(k[0, 0] * points[:, 0] / zd + k[0, 2]).astype(np.int64)
    vd = np.floor(k[1, 1] * points[:, 1] / zd + k[1, 2]).astype(np.int64)
    inside = (zd > 0) & (ud >= 0) & (ud < w) & (vd >= 0) & (vd < h)
    ud, vd, zd = ud[inside], vd[inside], zd[inside]
    order = np.argsort(-zd, kind="stable")  # far first: the nearest surface is written last
    out = np.zeros((h, w), dtype=np.float32)
    out[vd[order], ud[order]] = zd[order]
    return out
