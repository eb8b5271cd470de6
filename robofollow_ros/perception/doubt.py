"""Rules that turn silhouette evidence (``silhouette.py``) into naming vetoes and confidence factors.

- **Not this identity** (``refuses_name``): a resting segment whose top stands higher than the identity's
  top can rest (or lower, with nothing hiding it) is another object (a 4 cm cube is not a
  3.6 × 5.6 × 2.6 cm bar: 1.4 cm taller); a segment covering only a small part of the identity's
  silhouette with the table showing over the rest, or a tiny one far from the identity's track, is a
  fragment. Lifted segments (in the hand: fingers hide and tilt them) are not judged here. (The
  silhouette's outline alone does not separate look-alikes at 320 × 240: a correct bar's contradicted
  + excess share reached 0.3, a 4 cm cube fitted as a cylinder 0.14.)
- **How much of it is seen** (``silhouette_factor``): the measured confidence is multiplied by the share of
  the silhouette not contradicted and the share of the segment inside it; a label (flat) also by its
  visible share (a half-hidden label's centre is not where its visible pixels' centre is); a bowl by the
  share of its silhouette showing the table's colour (its floor lies below the foreground threshold but
  shows the bowl's colour; a pose fitted to a cut arc puts part of the silhouette on bare table).
- **Negative evidence** (``absent``): a pose nobody saw this frame whose silhouette shows the table
  is not where the object is (carried away, taken off the table).
- **Colour only** (``COLOUR_ONLY_CAP``): without depth a blob's height cannot be seen: a pose is
  only confident when the blob covers the silhouette of the pose depth last confirmed.
"""

from __future__ import annotations

import numpy as np

from robofollow_ros.perception.silhouette import Evidence

#: A resting segment whose top is this far (m; or TOP_SIGMAS × depth noise) from every height the identity's top
#: can rest at is another object; lower only counts when less than TOP_HIDDEN_SHARE of the outline is hidden.
TOP_TOLERANCE_M = 0.007
TOP_SIGMAS = 3.0
TOP_HIDDEN_SHARE = 0.1
#: ... and higher only counts when at least this share of its points stand above the identity's top: flying depth
#: pixels (a rim's edge next to what a bowl holds takes depths up to that object's) lift a thin band of points
#: and a fit drawn by them, while a taller look-alike lifts its whole top face.
TALL_MIN_SHARE = 0.2
#: Fragments: a segment covering less than this share of the identity's silhouette while little of the
#: rest is hidden (the rest shows table), or less than FRAGMENT_TINY_SHARE away from its track.
FRAGMENT_SHARE = 0.2
FRAGMENT_TINY_SHARE = 0.1
#: Confidence falls linearly from 1 to 0 between these shares of contradiction / excess.
CONTRADICTED_OK, CONTRADICTED_BAD = 0.08, 0.3
EXCESS_OK, EXCESS_BAD = 0.12, 0.35
#: A bowl's: its floor is seen by colour, not depth (``silhouette.evidence`` with its colour code); the table's
#: colour over more than this share of its silhouette means the pose is off (a fit of a cut arc drifts).
BOWL_CONTRADICTED_OK, BOWL_CONTRADICTED_BAD = 0.3, 0.45
#: A label's confidence: 0 at this visible share of its silhouette, 1 at FLAT_FULL.
FLAT_NONE, FLAT_FULL = 0.5, 0.9
#: An unseen pose whose silhouette shows the table over this share is not where the object is.
ABSENT_CONTRADICTED = 0.3
ABSENT_CONFIDENCE = 0.05
#: A name whose size cannot be confirmed (``unconfirmed_height``) is published at no more than this.
UNCONFIRMED_CAP = 0.3
#: A segment up to this much (m) taller than the identity can rest, where the identity's own track is, keeps the
#: name unconfirmed instead of losing it: an object being set down (still a few mm up, a finger on it) is the
#: object, not a look-alike; a look-alike standing in its place is named only at ``UNCONFIRMED_CAP``.
NEAR_TRACK_EXCESS_M = 0.012
#: Colour only: a blob covering the silhouette of the last depth-confirmed pose this well keeps it.
COLOUR_ONLY_IOU = 0.5
COLOUR_ONLY_CAP = 0.3
#: ... and its centre within this distance (m, at the pose's depth) of the silhouette's: a depth stall while an
#: object is picked or nudged moved the blob 2 cm with the overlap still above COLOUR_ONLY_IOU (a bowl, a cube).
COLOUR_ONLY_SHIFT_M = 0.008
#: A kept pose is never certain without depth: a lift along the camera's ray barely moves the blob (a cube picked
#: off another, a bowl raised 2 cm, kept at 1.00 with 20–24 mm of error in a stall): likely, not confirmed.
COLOUR_ONLY_KEPT_CAP = 0.85


def _ramp(value: float, ok: float, bad: float) -> float:
    return float(min(1.0, max(0.0, (bad - value) / (bad - ok))))


def unconfirmed_height(ev: Evidence, lifted: bool, top_m: float | None, allowed_tops_m: tuple[float, ...],
                       noise_m: float = 0.0) -> str | None:
    """Why a resting segment's name cannot be confirmed (None: it can): its top stands lower than the
    identity's can rest while part of its outline is hidden, so it may be the identity cut by what hides
    it, or a smaller look-alike; or a little higher where its own track is (``NEAR_TRACK_EXCESS_M``: being set
    down, or a slightly larger look-alike in its place). Such a pose is published at no more than
    ``UNCONFIRMED_CAP``."""
    if ev.expected == 0 or lifted or top_m is None or not allowed_tops_m:
        return None
    tolerance = max(TOP_TOLERANCE_M, TOP_SIGMAS * noise_m)
    nearest = min(allowed_tops_m, key=lambda t: abs(top_m - t))
    if tolerance < top_m - nearest <= NEAR_TRACK_EXCESS_M:
        return f"stands {top_m * 100:.1f} cm tall where it should be {nearest * 100:.1f} cm (set down, or a look-alike)"
    if nearest - top_m > tolerance and ev.occluded / ev.expected >= TOP_HIDDEN_SHARE:
        return f"stands {top_m * 100:.1f} cm tall where it should be {nearest * 100:.1f} cm, partly hidden"
    return None


def refuses_name(ev: Evidence, lifted: bool, near_track: bool, top_m: float | None = None,
                 allowed_tops_m: tuple[float, ...] = (), noise_m: float = 0.0, bowl: bool = False,
                 heights_m: np.ndarray | None = None) -> str | None:
    """Why the segment cannot carry the identity's name (None: it may). ``top_m``: the segment's top above
    the table; ``allowed_tops_m``: where the identity's top can be while it rests (as laid out, on the table);
    ``heights_m``: its points' heights above the table, when known: a top too tall is only believed when at
    least ``TALL_MIN_SHARE`` of them stand above the identity's top (``tall_share``)."""
    if ev.expected == 0 or lifted:
        return None
    if top_m is not None and allowed_tops_m:
        tolerance = max(TOP_TOLERANCE_M, TOP_SIGMAS * noise_m)
        nearest = min(allowed_tops_m, key=lambda t: abs(top_m - t))
        hidden = ev.occluded / ev.expected
        if near_track and tolerance < top_m - nearest <= NEAR_TRACK_EXCESS_M:
            pass  # not refused: unconfirmed_height says why it cannot be confirmed
        elif (top_m - nearest > tolerance and tall_share(heights_m, nearest, tolerance) >= TALL_MIN_SHARE) or (
                nearest - top_m > tolerance and hidden < TOP_HIDDEN_SHARE):
            return (f"stands {top_m * 100:.1f} cm tall where it should be {nearest * 100:.1f} cm "
                    f"(wrong size or shape)")
    if ev.visible_share < FRAGMENT_TINY_SHARE and not near_track:
        return f"a fragment ({ev.visible_share:.0%} of the identity's outline), far from its track"
    if ev.visible_share < FRAGMENT_SHARE and ev.contradicted > ev.occluded and not bowl:
        return f"a fragment ({ev.visible_share:.0%} of the identity's outline, the rest shows table)"
    return None


def tall_share(heights_m: np.ndarray | None, top_m: float, tolerance_m: float) -> float:
    """Share of a segment's point heights above ``top_m + tolerance_m`` (1 without heights)."""
    if heights_m is None or len(heights_m) == 0:
        return 1.0
    return float(np.count_nonzero(heights_m > top_m + tolerance_m)) / len(heights_m)


def silhouette_factor(ev: Evidence | None, flat: bool = False) -> float:
    """Multiplier of a measured pose's confidence from its silhouette evidence (1: nothing doubtful)."""
    if ev is None or ev.expected == 0:
        return 1.0
    factor = _ramp(ev.contradicted_share, CONTRADICTED_OK, CONTRADICTED_BAD)
    if flat:
        return factor * _ramp(ev.visible_share, FLAT_FULL, FLAT_NONE)
    return factor * _ramp(ev.excess_share, EXCESS_OK, EXCESS_BAD)


def bowl_factor(ev: Evidence | None) -> float:
    """Multiplier of a bowl pose's confidence: the table's colour where its walls and floor should be."""
    if ev is None or ev.expected == 0:
        return 1.0
    return _ramp(ev.contradicted_share, BOWL_CONTRADICTED_OK, BOWL_CONTRADICTED_BAD)


def absent(ev: Evidence | None) -> bool:
    """An unseen pose contradicted by the table it would hide."""
    return ev is not None and ev.expected > 0 and ev.contradicted_share > ABSENT_CONTRADICTED
