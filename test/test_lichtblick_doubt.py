"""Doubt in the operator's view, in a real Lichtblick (issue 37, item 4): the committed layout, live at 1280 x 720.

The real ``foxglove_node`` serves Lichtblick 1.24.3 in headless Chromium (``test_lichtblick_layout``'s fixtures
and helpers). A Scene 1 trial's scorer frames reach the node on ``/robofollow/frame`` as the stage monitor
publishes them, a frame's ``doubtful`` naming the objects whose pose perception gave below the monitor's
threshold (``contract.MIN_POSE_CONFIDENCE``). Read from the 3-D panel's pixels: the green sphere (the layout's
only green object, neither source nor target, so no highlight of its own) drawn at full opacity, then faint
while a frame doubts it (still there: its tint over the table stays), then full again once frames stop doubting
it. Perception's status on ``/robofollow/perception/status`` (doubts, depth age, camera rate, frames dropped)
is read from the details panel's text (Raw Messages of ``/robofollow/status``), its one-line summary in the trial
entry too. Skipped as that module skips.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from robofollow_ros.monitoring import topics
from robofollow_ros.monitoring.layout import DETAILS, THREE_D
from test_lichtblick_layout import (  # noqa: F401  (served, operator_graph: fixtures used by name)
    CHROMIUM,
    CHROMIUM_ARGS,
    LICHTBLICK,
    SHOTS,
    VIEWPORT,
    _open_live,
    _panel,
    _pixels,
    _until,
    operator_graph,
    pytestmark,
    served,
    sync_api,
)

TASK = "L0_place_yellow_block_1_behind_red_cylinder"
#: The object doubted: Scene 1's green sphere, the one green thing in the 3-D panel.
DOUBTED = "green_sphere"
#: Perception's status as ``perception_node`` publishes it: one doubt, stale depth, frames dropped.
PERCEPTION = {"layout": "scene1:scene1_1", "objects": {"yellow_block_2": {"confidence": 0.31}},
              "doubts": {"yellow_block_3": "half hidden"}, "depth_age_s": 1.37,
              "frames": {"camera_hz": 27.4, "processed_hz": 19.5, "dropped": 41}, "missing": []}
#: The details panel's text for it, white space collapsed (Raw Messages writes each KeyValue as ``<i> <key>: <value>``).
STATUS_SHOWN = ('name "perception" message "doubtful"', "doubtful: yellow_block_2",
                "doubts: yellow_block_3: half hidden", "depth_age_s: 1.37", "camera_hz: 27.4", "frames_dropped: 41")
#: Perception's one-line summary, the trial entry's ``perception`` value (the status's first entry).
SUMMARY = 'key "perception" value "doubtful: yellow_block_2, yellow_block_3"'


def _vivid(picture: np.ndarray) -> np.ndarray:
    """Where the picture shows the sphere's green at full opacity (lit and shaded)."""
    r, g, b = picture[..., 0], picture[..., 1], picture[..., 2]
    return (g > 140) & (r < 90) & (b < 90)


def _tint(picture: np.ndarray) -> np.ndarray:
    """Where the picture has a green tint (a quarter-opaque green over the brown table is ~(105, 150, 67));
    the table, the grid's blue, the grey background and the yellow blocks have none."""
    r, g, b = picture[..., 0], picture[..., 1], picture[..., 2]
    return (g > r + 20) & (g > b + 30)


def _around(mask: np.ndarray, margin: int = 3) -> tuple[slice, slice]:
    """The box (rows, columns) of a mask's pixels, ``margin`` px wider on each side."""
    rows, cols = np.nonzero(mask)
    return (slice(max(rows.min() - margin, 0), rows.max() + margin + 1),
            slice(max(cols.min() - margin, 0), cols.max() + margin + 1))


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where two pictures differ by more than 60 in some channel."""
    return np.abs(a - b).max(axis=2) > 60


def test_operator_view_live_draws_a_doubtful_object_faint_and_shows_perceptions_status(
        served: str, operator_graph: tuple[Any, Any, list[str]], registry: Any) -> None:  # noqa: F811
    from std_msgs.msg import String

    from robofollow_ros.nodes import trial_protocol as tp
    from robofollow_ros.scoring.synthetic import Puppet

    ros, node, _calls = operator_graph
    task = registry.eval_task(TASK)
    trial_id = f"{TASK}_r1_s3"
    still = Puppet(task).frames[0].to_dict()
    assert DOUBTED in still["objects"] and DOUBTED not in (task.source, task.target)
    start = time.monotonic()
    phases: dict[str, float] = {}
    console: list[tuple[str, str]] = []
    pictures: dict[str, np.ndarray] = {}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = _open_live(browser, served, node.server.port, console)
            live = node.channels.live.channels
            ros.wait_for(lambda: all(live[t].has_sinks() for t in (topics.STATUS, topics.SCENE)), 60,
                         "the 3-D and details panels to subscribe")
            phases["layout imported, panels subscribed"] = time.monotonic() - start

            publisher = ros.node("trial_streams")
            trial_pub = publisher.create_publisher(String, topics.TRIAL, tp.LATCHED)
            frame_pub = publisher.create_publisher(String, topics.FRAME, tp.FRAME_STREAM)
            status_pub = publisher.create_publisher(String, topics.PERCEPTION_STATUS, 10)
            trial_pub.publish(String(data=json.dumps({"id": trial_id, "task": TASK, "scene": task.scene,
                                                      "level": "L0", "phase": "running",
                                                      "instruction": task.instruction})))
            ros.wait_for(lambda: node.session.trial_id == trial_id, 20, "the trial state")
            scene = _panel(page, THREE_D)
            index = iter(range(1000))

            def look(name: str) -> np.ndarray:
                """The 3-D panel's picture (kept as ``lichtblick_doubt_<name>.png`` under ``SHOTS`` when set)."""
                picture = _pixels(page, scene)
                if SHOTS:
                    Path(SHOTS).mkdir(parents=True, exist_ok=True)
                    Image.fromarray(picture.astype(np.uint8)).save(Path(SHOTS) / f"lichtblick_doubt_{name}.png")
                pictures[name] = picture
                return picture

            def show(doubtful: list[str], absent: str = "") -> None:
                """One scorer frame of the still scene, as the stage monitor publishes it."""
                raw = {**still, "objects": {n: p for n, p in still["objects"].items() if n != absent},
                       **({"doubtful": doubtful} if doubtful else {})}
                frame_pub.publish(String(data=json.dumps({"trial": trial_id, "task": TASK, "index": next(index),
                                                          "frame": raw})))

            # Sure, doubted, sure again, then gone (what "vanished" would look like): each a bound wait for the
            # panel to draw the change.
            show([])
            full = _vivid(_until(lambda: look("full"), lambda p: _vivid(p).sum() >= 20, page, 30))
            box = _around(full)
            phases["scene drawn"] = time.monotonic() - start
            show([DOUBTED])
            _until(lambda: look("doubtful"), lambda p: _vivid(p).sum() < full.sum() / 4, page, 20)
            phases["doubt drawn"] = time.monotonic() - start
            show([])
            _until(lambda: look("again"), lambda p: _vivid(p).sum() >= 0.8 * full.sum(), page, 20)
            phases["doubt lifted"] = time.monotonic() - start
            show([], absent=DOUBTED)
            _until(lambda: look("absent"), lambda p: not _vivid(p).any(), page, 20)
            phases["object gone"] = time.monotonic() - start

            status_pub.publish(String(data=json.dumps(PERCEPTION)))
            details = _panel(page, DETAILS)
            text = _until(lambda: " ".join(details.inner_text().split()), lambda t: all(w in t for w in STATUS_SHOWN),
                          page, 20)
            phases["perception status shown"] = time.monotonic() - start
        finally:
            browser.close()
    measured = {name: {"vivid": int(_vivid(p).sum()), "tint": int(_tint(p)[box].sum())}
                for name, p in pictures.items()}
    # The label: pixels that change, while doubted, above the sphere (the label sits 6 cm over it).
    label = int(_changed(pictures["full"], pictures["doubtful"])[:box[0].start].sum())
    print("seconds since start:", {k: round(v, 1) for k, v in phases.items()}, "green pixels (vivid in the panel, "
          "tint around the sphere):", measured, "label pixels:", label)
    full_px, faint, absent = (measured[k] for k in ("full", "doubtful", "absent"))
    assert full_px["vivid"] >= 20, f"the sphere is not drawn ({full_px})"
    assert faint["vivid"] < full_px["vivid"] / 4, f"a doubtful object is drawn as strong as a sure one: {measured}"
    assert faint["tint"] >= absent["tint"] + 5, f"a doubtful object vanished instead of fading: {measured}"
    assert label >= 30, f"no 'doubtful' label drawn over the doubted object ({label} pixels changed above it)"
    again = int(_changed(pictures["full"], pictures["again"]).sum())
    assert again <= 10, f"the picture stays changed once the object is sure again ({again} pixels)"
    missing = [w for w in STATUS_SHOWN if w not in text]
    assert not missing, f"the details panel lacks {missing}: {text!r}"
    assert SUMMARY in text, f"no perception summary in the trial entry: {text!r}"
    errors = [t for kind, t in console if kind in ("error", "pageerror")]
    assert not errors, errors[:5]
