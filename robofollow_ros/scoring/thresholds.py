"""Every number of RoboFollow's stage-wise scoring rules, in one place, with its meaning.

Values are those of the official evaluator (``evaluation/common.py`` and ``scene1.py`` ...
``scene4.py`` of AutoLab-SAI-SJTU/RoboFollow at a867718); where it derives a number with NumPy
(``np.cos(np.deg2rad(45.0))``) it is derived the same way here, so comparisons agree to the last
bit. The rule modules spell out ``<`` versus ``<=`` where they compare. Distances are metres,
angles radians, frame counts are recorded frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from robofollow_ros.contract import TABLE_TOP_Z

# --- gripper events (normalised value: 1 open, 0 closed) ---------------------------------------
#: A gripper "closes" when its value crosses down through this (g[t-1] > c >= g[t]).
CLOSE_THRESHOLD: Final = 0.35
#: Scene 2 push tasks detect closes at a stricter value (both arms: the task arm's setup and the
#: other arm's wrong-arm check): the gripper must close fully before pushing.
PUSH_CLOSE_THRESHOLD: Final = 0.25
#: A gripper "opens" when its value crosses up through this (g[t-1] < 0.7 <= g[t]).
OPEN_THRESHOLD: Final = 0.7

# --- common tests ---------------------------------------------------------------------------------
#: Wrong-object test: the EE-source XY distance at the close must be strictly below this.
GRASP_XY: Final = 0.07
#: A source counts as lifted once its z exceeds its frame-0 z by at least this.
LIFT: Final = 0.01
#: "Full" tolerance: score + FULL_EPS >= max.
FULL_EPS: Final = 1e-6
#: intent_ok / exec_ok: total >= this fraction of the maximum total.
OK_FRACTION: Final = 0.99
#: Wrong-arm penalty (Scenes 1-3), subtracted after bonuses when the last phase is full.
WRONG_ARM_PENALTY: Final = 0.2
#: Final-layout / retry bonus added to a total below BONUS_BELOW.
BONUS: Final = 0.3
BONUS_BELOW: Final = 0.5
#: Completion of pickup-like tasks: IS and ES both at least this.
PICKUP_COMPLETE: Final = 0.8

# --- Scene 4 "object under the source" (support) ----------------------------------------------------
#: A candidate is "under" the source within this XY distance ...
SUPPORT_XY: Final = 0.02
#: ... when the source is at least this much higher.
SUPPORT_MIN_DZ: Final = 0.005

# --- operation area (non-operating arm must stay out of it, whole episode) ------------------------
OPERATION_AREA_X: Final = (-0.20, 0.15)
OPERATION_AREA_Y: Final = (-0.15, 0.15)
OPERATION_AREA_Z: Final = (0.74, 1.0)


@dataclass(frozen=True)
class FinishRule:
    """Thresholds of the ``stage3_finish`` (return-home) stage of one scene."""

    #: Every frame of the stable window must be within this 3-D distance of the frame-0 EE position.
    reset_dist: float
    #: After the arm is home, no frame may be farther than this from home.
    leave_home: float
    #: The stable window is min(STABLE_WINDOW, max(1, n - completion_t)) frames.
    stable_window: int = 20
    #: The arm must be home within this many frames of completion_t.
    max_return_frames: int = 180
    #: Max score of the stage, for intent and for execution.
    max_score: float = 0.2


FINISH_SCENE1: Final = FinishRule(reset_dist=0.12, leave_home=0.16)
FINISH_SCENE2: Final = FinishRule(reset_dist=0.10, leave_home=0.14)
FINISH_SCENE4: Final = FinishRule(reset_dist=0.10, leave_home=0.14)

# --- Scene 1 relations --------------------------------------------------------------------------------
#: Relation test: 1e-6 < |source xy - target xy| <= RELATION_MAX_DIST ...
RELATION_MIN_DIST: Final = 1e-6
RELATION_MAX_DIST: Final = 0.12
#: ... and cos(v, direction) >= cos 45 degrees.
RELATION_COS: Final = float(np.cos(np.deg2rad(45.0)))
#: Direction of each Scene 1 relation in the world XY plane.
RELATION_DIRECTION: Final = {
    "place_left_of": (-1.0, 0.0),
    "place_beside": (1.0, 0.0),
    "place_behind": (0.0, 1.0),
    "place_in_front": (0.0, -1.0),
}
#: "On the table": |source z - source z at frame 0| <= this.
ON_TABLE_DZ: Final = 0.02
#: final_target_ok looks at this many last frames.
FINAL_TARGET_WINDOW: Final = 10

# --- Scene 2 ------------------------------------------------------------------------------------------
#: A Scene 2 pickup needs this much lift for execution.
S2_PICKUP_LIFT: Final = 0.03
#: Push setup: the source still on the table (lift <= this) ...
PUSH_ON_TABLE_DZ: Final = 0.02
#: ... and moved at least this far in XY from its close-frame position.
PUSH_MIN_MOVE: Final = 0.005
#: near_table: |EE z - PUSH_EE_OFFSET - source z0| <= PUSH_NEAR_TABLE.
PUSH_EE_OFFSET: Final = 0.12
PUSH_NEAR_TABLE: Final = 0.12
#: Push setup execution allows a slightly larger EE-source XY distance than intent.
PUSH_EXEC_XY: Final = 0.08
#: A push frame counts when cos(displacement, u) >= this.
PUSH_COS: Final = float(np.cos(np.deg2rad(45.0)))
#: Best projected push displacement for intent and for execution.
PUSH_INTENT_DIST: Final = 0.01
PUSH_EXEC_DIST: Final = 0.02
#: Retry bonus for a push: max projected displacement from frame 0, over all frames.
PUSH_RETRY_DIST: Final = 0.005
#: Stack: source z above target z by more than this (intent, exec, retry).
STACK_DZ: Final = 0.005
#: Stack execution: source-target XY at most this.
STACK_XY: Final = 0.03
#: Stack: a frame from the open onward with source z <= target z + this is a drop.
STACK_DROP_DZ: Final = 0.002
#: Bowl: "in bowl" = XY(source, bowl) <= BOWL_XY and source z <= bowl z + BOWL_DZ.
BOWL_XY: Final = 0.04
BOWL_DZ: Final = 0.06
#: Bowl intent: the source is low (lift strictly below this).
BOWL_LOW_LIFT: Final = 0.06

# --- Scene 3 ------------------------------------------------------------------------------------------
#: Route: |x_src - x_correct| < ROUTE_X, |y_src - y_correct| < ROUTE_Y_CORRECT,
#: |y_src - y_wrong| > ROUTE_Y_WRONG.
ROUTE_X: Final = 0.01
ROUTE_Y_CORRECT: Final = 0.06
ROUTE_Y_WRONG: Final = 0.04
#: Orientation error limits (modulo 180 degrees).
ORIENT_INTENT: Final = float(np.deg2rad(40.0))
ORIENT_EXEC: Final = float(np.deg2rad(20.0))
#: Stage maxima of Scene 3 (no finish stage).
S3_MAX: Final = {"stage1_source_select": 0.3, "stage2_route": 0.3, "stage3_orientation": 0.4}

# --- Scene 4 ------------------------------------------------------------------------------------------
#: Gap added between stacked objects when computing the expected stacked z.
S4_STACK_GAP: Final = 0.002
#: stack_on_target: intent XY / |z err| limits, exec limits.
S4_STACK_INTENT_XY: Final = 0.07
S4_STACK_INTENT_DZ: Final = 0.06
S4_PLACE_EXEC_XY: Final = 0.05
S4_PLACE_EXEC_DZ: Final = 0.05
#: unstack_to_slot: intent limits; target z = table + half-height + S4_SLOT_GAP.
S4_SLOT_INTENT_XY: Final = 0.07
S4_SLOT_INTENT_DZ: Final = 0.07
S4_SLOT_GAP: Final = 0.001
#: Pickup support-lift penalty: the support rose this much -> stage-1 exec loses S4_SUPPORT_PENALTY.
S4_SUPPORT_RISE: Final = 0.01
S4_SUPPORT_PENALTY: Final = 0.3
#: Default half-height of a Scene 4 object whose shape is unknown.
S4_DEFAULT_HALF_HEIGHT: Final = 0.025
TABLE_Z: Final = TABLE_TOP_Z
