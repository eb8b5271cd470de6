"""Two segments seen at once are two objects (``perception/others.py``), on hand-made segments.

A 4 cm red cube named ``small_red_cube`` stands at A while an identical red cube stands at B; once the real
one is hidden (in the hand), its name must not jump onto B. A segment that was never seen beside the identity
(the identity itself, cut by an arm into two parts) is not barred.
"""

from __future__ import annotations

import math

import numpy as np

from robofollow_ros.perception.detector import Detection
from robofollow_ros.perception.grounding import Grounding
from robofollow_ros.perception.identities import IdentityModel
from robofollow_ros.perception.others import MEMORY_S, OtherObjects
from robofollow_ros.perception.primitives import Primitive

CUBE = IdentityModel("small_red_cube", "red", "cube", 0.04, 0.02, 0.02, 0.04, False, (-0.03, -0.04), True,
                     Primitive("box", (0.02, 0.02, 0.02)), table_centre_height=0.02)


def _segment(x: float, y: float) -> Detection:
    return Detection("red", 300, np.arange(300), (0.0, 0.0), kind="solid", top_xy=(x, y), z_top=0.78)


def _costs(detections: list[Detection], others: OtherObjects) -> np.ndarray:
    costs = np.zeros((len(detections), 1))
    others.veto(costs, detections, [CUBE])
    return costs


def test_a_segment_seen_beside_the_identity_cannot_take_its_name_later() -> None:
    others = OtherObjects()
    real, twin = _segment(-0.03, -0.04), _segment(-0.14, -0.04)
    others.update([Grounding(real, CUBE.name, 1.0, 0.0), Grounding(twin, None, 1.0, 20.0)], set(), 0.0,
                  {CUBE.name: CUBE})
    later = _segment(-0.139, -0.041)  # the real cube is in the hand, out of sight
    assert math.isinf(_costs([later], others)[0, 0])
    assert "small_red_cube was elsewhere" in later.refused[CUBE.name]
    # Forgotten once nothing has stood there for MEMORY_S.
    others.update([], set(), MEMORY_S + 1.0, {CUBE.name: CUBE})
    assert _costs([_segment(-0.139, -0.041)], others)[0, 0] == 0.0


def test_parts_of_one_object_and_lifted_names_do_not_bar() -> None:
    others = OtherObjects()
    part_a, part_b = _segment(-0.03, -0.04), _segment(-0.03, -0.07)  # 3 cm apart: within the cube's own size
    carried, standing = _segment(0.2, -0.1), _segment(-0.14, -0.04)
    others.update([Grounding(part_a, CUBE.name, 1.0, 0.0), Grounding(part_b, None, 1.0, 20.0)], set(), 0.0,
                  {CUBE.name: CUBE})
    others.update([Grounding(carried, CUBE.name, 0.5, 3.0), Grounding(standing, None, 1.0, 20.0)], {CUBE.name},
                  0.1, {CUBE.name: CUBE})  # a lifted name rests on weak shape evidence
    assert _costs([_segment(-0.03, -0.07), _segment(-0.14, -0.04)], others).tolist() == [[0.0], [0.0]]
