"""Tests start the graph of a shipped profile (the same node list ``robofollow bringup`` runs), in a
``RosHarness``, with per-node parameter changes — never a hand-made subset that could drift from it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from robofollow_ros.bringup import build_nodes, load_profile, with_overrides, without_nodes
from ros_harness import RosHarness


def start_profile_graph(ros: RosHarness, profile: str, extra: Mapping[str, Mapping[str, Any]] | None = None,
                        leave_out: Iterable[str] = ("foxglove_node",),
                        remappings: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """Build and spin every node of ``profile`` (minus ``leave_out``) with ``extra`` parameters and
    ``remappings``; the nodes by name."""
    chosen = without_nodes(load_profile(profile), set(leave_out))
    chosen = with_overrides(chosen, extra=extra or {}, remappings=remappings)
    nodes = build_nodes(chosen, ros.context)
    for node in nodes:
        ros.add(node)
    return {node.get_name(): node for node in nodes}
