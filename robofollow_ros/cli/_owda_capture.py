"""``robofollow owda capture``: an anchor from SAPIEN, from one rendered frame through perception, or from
the running perception node's grounded objects on ``/robofollow/objects`` (``--source ros``, the way to
add anchors on the rig). rclpy is imported only for ``--source ros``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from robofollow_ros.cli._common import SEED, CliError, integer, number, output_file, seconds, writing
from robofollow_ros.exit_status import EXIT_BAD_INPUT

SOURCES = ("sim", "perception", "ros")


def add_arguments(cap: argparse.ArgumentParser) -> None:
    cap.add_argument("--scene", required=True)
    cap.add_argument("--layout", required=True,
                     help="layout key, e.g. default or scene2.3 (what should be on the table)")
    cap.add_argument("--seed", type=SEED, default=0, help="layout jitter seed (sim and perception sources)")
    cap.add_argument("--kind", choices=("object_centric", "action_sequence"), default="object_centric")
    cap.add_argument("--source", choices=SOURCES, default="sim",
                     help="sim: SAPIEN ground truth; perception: the perception pipeline on one rendered head-camera "
                          "frame; ros: the perception node's grounded objects on /robofollow/objects "
                          "(rig or sim graph)")
    cap.add_argument("--timeout", type=seconds(), default=120.0,
                     help="ros: seconds to wait for every object (default 120)")
    cap.add_argument("--min-confidence", type=number(0, 1), default=0.5,
                     help="ros: least grounding confidence (default 0.5)")
    cap.add_argument("--frames", type=integer(1, 1000), default=3,
                     help="ros: take the last of this many messages that ground every object, so tracking has "
                          "settled (default 3)")
    cap.add_argument("--id", dest="anchor_id", help="anchor id (default: captured_<scene>_<layout>_<seed|ros>)")
    cap.add_argument("--out", required=True, metavar="FILE")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from robofollow_ros.benchmark import UnknownTaskError, default_registry
    from robofollow_ros.decisions.candidates import distinct_atomic_pairs
    from robofollow_ros.decisions.capture import capture_from_perception, capture_from_sim
    from robofollow_ros.decisions.errors import OwdaError

    out = Path(args.out)
    output_file(out, "--out", make_folder=True)
    reg = default_registry()
    if args.scene not in reg.layouts:
        raise CliError(f"--scene: unknown scene {args.scene!r}; expected one of {sorted(reg.layouts)}")
    try:
        layout = reg.layout(args.scene, args.layout)
    except UnknownTaskError as exc:
        raise CliError(f"--layout: {exc}") from None
    tail = "ros" if args.source == "ros" else str(args.seed)
    anchor_id = args.anchor_id or f"captured_{args.scene}_{args.layout}_{tail}"
    try:
        if args.source == "ros":
            anchor = capture_from_topic(anchor_id, layout, args.kind, args.timeout, args.min_confidence, args.frames)
        else:
            capture = capture_from_perception if args.source == "perception" else capture_from_sim
            anchor = capture(anchor_id, layout, args.seed, args.kind)
    except OwdaError as exc:  # perception did not find an object, a relation the poses contradict, ...
        raise CliError(str(exc), exit_code=EXIT_BAD_INPUT) from None
    with writing(out, "--out"):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(anchor.to_dict(), indent=1) + "\n")
    families = len(distinct_atomic_pairs(anchor))
    print(f"wrote {out}: {anchor.kind} anchor {anchor.anchor_id} with {len(anchor.candidate_ids)} candidates, "
          f"{families} distinct valid atomic families")
    return 0


def capture_from_topic(anchor_id: str, layout: Any, kind: Any, timeout_s: float, min_confidence: float,
                       frames: int = 1) -> Any:
    """The ``frames``-th ``/robofollow/objects`` message in which perception grounds every object of ``layout``."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from visualization_msgs.msg import MarkerArray

    from robofollow_ros.contract import TOPIC_OBJECTS
    from robofollow_ros.decisions.capture import anchor_from_poses, grounded_poses
    from robofollow_ros.nodes.conversions import stamp_ns

    wanted = set(layout.names)
    got: dict[str, Any] = {}
    seen: set[str] = set()
    done = threading.Event()

    complete = [0]

    def on_objects(msg: MarkerArray) -> None:
        poses = grounded_poses(msg.markers, min_confidence)
        seen.update(poses)
        if wanted <= set(poses) and not done.is_set():
            complete[0] += 1
            got["poses"] = {n: poses[n] for n in wanted}
            got["stamp_ns"] = max(stamp_ns(m.header.stamp) for m in msg.markers)
            if complete[0] >= frames:
                done.set()

    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("owda_capture", context=context)
        node.create_subscription(MarkerArray, TOPIC_OBJECTS, on_objects, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + timeout_s
        while not done.is_set() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        executor.shutdown()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    if not done.is_set():
        missing = sorted(wanted - seen)
        raise CliError(f"--source ros: {complete[0]} of {frames} messages on {TOPIC_OBJECTS} grounded every object of "
                       f"{layout.scene}/{layout.key} within {timeout_s:g} s"
                       + (f"; never grounded: {missing}" if seen else
                                                                 "; no grounded objects at all (is perception_node "
                                                                 "running with this layout?)"),
                       exit_code=EXIT_BAD_INPUT)
    return anchor_from_poses(anchor_id, layout, got["poses"], kind,
                             {"source": "perception", "topic": TOPIC_OBJECTS, "stamp_ns": got["stamp_ns"]})
