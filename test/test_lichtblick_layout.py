"""The committed layout in a real viewer: Lichtblick 1.24.3 (web build) in headless Chromium, on a real bag.

A headless ``robofollow eval --record`` writes the bag; the app is served over a real socket from
``../shared/tools/lichtblick`` (beside the repository), the bag opened through the app's file input and
the layout imported through its own *Import layout from file* path (the OS file picker, which headless
Chromium lacks, stubbed as that folder's ``picker_stub.js`` does). Then, from the page and its console:
every panel is placed with the title the layout gives it, has data (images drawn, the robot drawn with
no frame axes over it, status, plot, states and log filled), the console has
no error, and every Call Service button on every tab is visible and is what a click at its centre hits.

Live, with the ALOHA rig (meshes only, STL files where pip installed gym-aloha): the app connects to our
websocket server (``?ds=foxglove-websocket``), fetches every mesh the description names through the server's
asset handler (``monitoring.rig_assets``; counted there) and draws them: the 3-D panel with the meshes
answered differs from the same panel while they were asked for but held back, by the arms' grey.
The operator's view, live at 1280 x 720 (the layout's geometry, ``monitoring.layout``): the real
``foxglove_node`` serves the app, a stub trial manager answers the trial services, and a Scene 4 sequence
trial (three stages, the most any task has) runs on the node's topics. Measured from the panels' boxes and
pixels: every state row (trial, each stage, completion) inside the states panel's visible box with its
bar drawn; each of the plot's legend rows whole and beside the data, not over it; room for several log
lines; the button strip one row of tiles per tab, at most a third of the height, every button whole and
hit by a click; and a click on *stop* brings the trial manager's answer as a log line, whole inside the
log's visible box (Lichtblick's own response box holds two rows of a half tile: ``{`` and ``"success"``).
Skipped, with the reason, where the build, playwright or Chromium is missing (and the live test where
rclpy is).
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.layout import CONTROL_TABS, CONTROLS, LAYOUT_PATH, LOG, PLOT, STATES, TITLE_KEYS
from robofollow_ros.monitoring.rig_assets import RigAssets
from robofollow_ros.monitoring.server import TRIAL_SERVICES, start_monitor_server
from robofollow_ros.monitoring.stages import STAGE_SLOTS, STAGE_VALUES, STATUS_NAMES

REPO = Path(__file__).resolve().parents[1]


def _lichtblick_dir() -> Path:
    """``$ROBOFOLLOW_LICHTBLICK_DIR``, else ``../shared/tools/lichtblick`` beside this checkout, else beside the
    checkout this one was cloned from when that is a local folder (CI tests a fresh clone in a temporary folder)."""
    if os.environ.get("ROBOFOLLOW_LICHTBLICK_DIR"):
        return Path(os.environ["ROBOFOLLOW_LICHTBLICK_DIR"])
    candidates = [REPO.parent / "shared" / "tools" / "lichtblick"]
    origin = subprocess.run(["git", "-C", str(REPO), "remote", "get-url", "origin"], capture_output=True, text=True,
                            timeout=30).stdout.strip()
    if origin and Path(origin).is_dir():
        candidates.append(Path(origin).resolve().parent / "shared" / "tools" / "lichtblick")
    return next((c for c in candidates if c.is_dir()), candidates[0])


LICHTBLICK = _lichtblick_dir()
BUILD = LICHTBLICK / "lichtblick-1.24.3-web.tgz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: WebGL (the 3-D and image panels) without a GPU (the build's README).
CHROMIUM_ARGS = ["--use-gl=angle", "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-sandbox"]
#: The default window: a 1280 x 720 screen, with the app's panel sidebar open as it opens.
VIEWPORT = {"width": 1280, "height": 720}
TASK = "L0_place_yellow_block_1_behind_red_cylinder"
#: The live trial: a Scene 4 sequence, whose three stages fill every stage row.
SEQUENCE = "L0_s41_seq_l_bowl_then_r_green_cylinder"
#: What a panel shows instead of data (Lichtblick's empty states and topic problems).
EMPTY = re.compile(r"waiting for|no messages|not available|no data|select a topic|no topic", re.IGNORECASE)
#: Set to a folder to keep the screenshot and the console log (docs/images/lichtblick_view.png comes from it).
SHOTS = os.environ.get("ROBOFOLLOW_LICHTBLICK_SHOTS")

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements.txt)")
pytestmark = [
    pytest.mark.skipif(not BUILD.is_file(), reason=f"no Lichtblick build at {BUILD}"),
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)"),
]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The web build and the committed layout, from one origin (the app fetches the layout from it)."""
    root = tmp_path_factory.mktemp("lichtblick")
    with tarfile.open(BUILD) as tar:
        # The build holds one stray absolute link (.webpack/files); links are not needed, so none is made.
        tar.extractall(root, filter=lambda m, path: None if m.issym() or m.islnk() else tarfile.data_filter(m, path))
    web = root / ".webpack"
    (web / "robofollow").mkdir()
    shutil.copy(LAYOUT_PATH, web / "robofollow" / LAYOUT_PATH.name)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(web)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


def _record_bag(out: Path) -> subprocess.Popen[str]:
    """A real headless trial recorded as a ROS 2 bag (started at once; the browser loads meanwhile)."""
    return subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "eval", "--policy", "oracle", "--tasks", TASK,
                             "--rounds", "1", "--max-steps", "4", "--record", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _panel(page: Any, panel_id: str) -> Any:
    return page.get_by_test_id(f"panel-mouseenter-container {panel_id}")


def _pixels(page: Any, locator: Any) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(locator.screenshot())).convert("RGB")).astype(int)


def _grey(scene: np.ndarray) -> float:
    """Share of grey pixels (the robot's links and meshes) in a panel's picture."""
    r, g, b = scene[..., 0], scene[..., 1], scene[..., 2]
    return float(((abs(r - g) < 12) & (abs(g - b) < 12) & (r > 60) & (r < 200)).mean())


def _pictures(page: Any) -> dict[str, Any]:
    """What the canvases show: distinct colours of each camera image; in the 3-D panel the share of the
    frame axes' green (y arrows; 2.8 % with the axes drawn, 0.02 % hidden, measured at 1280 x 720) and
    of the robot's grey links."""
    colours = {camera: len(np.unique(_pixels(page, _panel(page, camera)).reshape(-1, 3), axis=0))
               for camera in ("Image!head", "Image!left_wrist", "Image!right_wrist")}
    scene = _pixels(page, _panel(page, "3D!robofollow"))
    r, g, b = scene[..., 0], scene[..., 1], scene[..., 2]
    green = float(((g > 150) & (r < 170) & (b < 120) & (g - r > 50)).mean())
    grey = _grey(scene)
    return {"colours": colours, "green": green, "grey": grey,
            "ok": min(colours.values()) > 200 and green < 0.005 and grey > 0.01}


def _until(measure: Any, done: Any, page: Any, seconds: float) -> Any:
    """``measure()`` again every 0.5 s until ``done`` holds or ``seconds`` pass; the last measurement."""
    value = measure()
    for _ in range(int(seconds * 2)):
        if done(value):
            break
        page.wait_for_timeout(500)
        value = measure()
    return value


def _buttons(page: Any) -> list[dict[str, Any]]:
    """Each Call Service button on screen: its text, and whether a click at its centre lands on it (a
    disabled button passes pointer events to its tooltip wrapper, so that counts as the button too)."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid=call-service-button]')].map(b => {
        const r = b.getBoundingClientRect();
        const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
        return {text: b.innerText.replace(/\\s+/g, ' '), hit: !!hit && (b.contains(hit) || hit === b.parentElement),
                inside: r.bottom <= window.innerHeight && r.right <= window.innerWidth,
                what: hit ? hit.tagName + ' ' + String(hit.className).slice(0, 60) : 'nothing'}; })""")


def _every_button_on_every_tab(page: Any) -> None:
    """On each tab of the strip: its Call Service buttons, in one row, each visible and what a click at its
    centre hits."""
    for index, (tab, names) in enumerate(CONTROL_TABS.items()):
        if index:
            tab_button = _panel(page, CONTROLS).get_by_test_id("toolbar-tab").nth(index)
            assert tab in (tab_button.inner_text() + str(tab_button.evaluate(
                "el => [...el.querySelectorAll('input')].map(i => i.value).join(' ')"))), tab
            tab_button.click()
            _panel(page, f"CallService!{names[0]}").wait_for(timeout=10_000)
        buttons = _buttons(page)
        assert sorted(b["text"] for b in buttons) == sorted(n.replace("_", " ") for n in names), tab
        for button in buttons:
            assert button["hit"] and button["inside"], f"tab {tab}: {button['text']!r} is covered ({button})"
        tiles = [_box(page, f"CallService!{n}") for n in names]
        assert len({round(t["y"]) for t in tiles}) == 1, f"tab {tab}: the tiles are not one row ({tiles})"
        for n in names:
            assert _panel(page, f"CallService!{n}").get_by_test_id("call-service-button").is_visible()
    _panel(page, CONTROLS).get_by_test_id("toolbar-tab").nth(0).click()
    _panel(page, f"CallService!{next(iter(CONTROL_TABS.values()))[0]}").wait_for(timeout=10_000)


def _box(page: Any, panel_id: str) -> dict[str, float]:
    """A panel's box on the page, px (its DOM element's bounding box)."""
    box = _panel(page, panel_id).bounding_box()
    assert box is not None, f"{panel_id} is not on the page"
    return dict(box)


def _boxes(page: Any) -> dict[str, dict[str, int]]:
    """Every panel on the page: its box, px."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '[data-testid^="panel-mouseenter-container "]')].map(e => { const r = e.getBoundingClientRect();
        return [e.dataset.testid.split(' ')[1], {x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width),
                height: Math.round(r.height)}]; }))""")


def _open_live(browser: Any, served: str, port: int, console: list[tuple[str, str]]) -> Any:
    """A page of the app served at ``served`` connected live to our server on ``port``, the committed layout
    imported; the console's messages and page errors collected into ``console``."""
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.on("console", lambda m: console.append((m.type, m.text)))
    page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
    page.add_init_script(path=str(LICHTBLICK / "picker_stub.js"))
    url = f"ws://127.0.0.1:{port}"
    page.goto(f"{served}/?ds=foxglove-websocket&ds.url={urllib.parse.quote(url, safe='')}", wait_until="load",
              timeout=120_000)
    page.get_by_test_id("AppMenuButton").wait_for(timeout=120_000)
    _import_layout(page)
    return page


def _inside(inner: dict[str, float], outer: dict[str, float], slack: float = 0.5) -> bool:
    return (inner["x"] >= outer["x"] - slack and inner["y"] >= outer["y"] - slack
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack)


def _state_rows(page: Any) -> list[dict[str, Any]]:
    """The State Transitions rows: each row's label (DOM), its box and the label's, the panel's visible box
    (below its title bar), and how many coloured pixels the row's bar band has (the bar and its state text
    are drawn on a canvas, below the label)."""
    panel = _panel(page, STATES)
    rows = panel.evaluate("""root => { const f = e => { const r = e.getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; };
      const view = f(root); const bar = root.querySelector('[data-testid=mosaic-drag-handle]').getBoundingClientRect();
      view.height -= bar.bottom - view.y; view.y = bar.bottom;
      return [...root.querySelectorAll('[data-testid^=row-]')].map(row => {
        const label = row.querySelector('.MuiButtonGroup-root') || row;
        return {text: label.innerText.trim(), row: f(row), label: f(label), view}; }); }""")
    picture = _pixels(page, panel)
    origin = _box(page, STATES)
    for row in rows:
        top = int(row["label"]["y"] + row["label"]["height"] - origin["y"]) + 2
        view_bottom = row["view"]["y"] + row["view"]["height"]
        bottom = int(min(row["row"]["y"] + row["row"]["height"], view_bottom) - origin["y"])
        band = picture[max(top, 0):max(bottom, 0)]
        row["coloured"] = int(((band.max(axis=2) - band.min(axis=2)) > 60).sum()) if band.size else 0
    return rows


def _legend(page: Any) -> dict[str, Any]:
    """The plot's legend rows (name and box, and whether the name is cut) and the data's canvas box."""
    return _panel(page, PLOT).evaluate("""root => { const f = e => { const r = e.getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; };
      const names = [...root.querySelectorAll('[class*=plotName]')].map(e => {
        const t = e.querySelector('.MuiTypography-root') || e;
        return {text: t.innerText.trim(), box: f(e), cut: t.scrollWidth > t.clientWidth + 1}; });
      return {names, canvas: f(root.querySelector('[data-testid=vertical-bar-wrapper] canvas')), panel: f(root)}; }""")


def _log_view(page: Any) -> dict[str, Any]:
    """The log's scrolled list (its visible box) and the height of one text line in it, px."""
    return _panel(page, LOG).evaluate("""root => { const list = root.querySelector('[data-testid=virtualized-list]');
      const view = [...list.querySelectorAll('*')].find(e => getComputedStyle(e).overflowY === 'auto') || list;
      const r = view.getBoundingClientRect(); const text = view.querySelector('span') || view;
      const line = parseFloat(getComputedStyle(text).lineHeight) || 1.4 * parseFloat(getComputedStyle(text).fontSize);
      return {box: {x: r.x, y: r.y, width: r.width, height: r.height}, line}; }""")


def _log_line(page: Any, text: str) -> dict[str, Any] | None:
    """The log entry that holds ``text``: its box, the list's visible box, and whether a point inside it
    is the entry itself (not something drawn over it); None while no entry holds it."""
    return _panel(page, LOG).evaluate("""(root, text) => {
      const list = root.querySelector('[data-testid=virtualized-list]');
      const view = [...list.querySelectorAll('*')].find(e => getComputedStyle(e).overflowY === 'auto') || list;
      const spans = [...view.querySelectorAll('span')].filter(s => s.textContent.includes(text));
      if (!spans.length) return null;
      const s = spans[spans.length - 1]; const f = e => { const r = e.getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height}; };
      const rects = [...s.getClientRects()]; const last = rects[rects.length - 1];
      const hit = document.elementFromPoint(last.x + 2, last.y + last.height / 2);
      return {text: s.textContent, box: f(s), view: f(view), hit: !!hit && (s.contains(hit) || hit.contains(s))}; }""",
                                     text)


def _import_layout(page: Any) -> None:
    """The committed layout through the app's own *Import layout from file…* (the OS picker stubbed)."""
    name = LAYOUT_PATH.name
    page.evaluate("([u, n]) => { window.__probeNextPick = {url: u, name: n}; }", [f"/robofollow/{name}", name])
    page.get_by_test_id("AppMenuButton").click()
    page.get_by_text("View", exact=True).first.hover()
    page.get_by_text("Import layout from file…").first.click()
    page.wait_for_function("() => (window.__probePicks || []).length === 1", timeout=30_000)
    _panel(page, CONTROLS).wait_for(timeout=60_000)


def test_layout_in_lichtblick_shows_every_panel_with_data_and_reachable_buttons(served: str, tmp_path: Path) -> None:
    layout = json.loads(LAYOUT_PATH.read_text())
    panels = layout["configById"]
    # Raw Messages shows its topic path where other panels show the title (in both apps).
    titles = {pid: cfg[TITLE_KEYS[1]] for pid, cfg in panels.items()
              if TITLE_KEYS[1] in cfg and not pid.startswith("RawMessages!")}
    start = time.monotonic()
    phases: dict[str, float] = {}
    recording = _record_bag(tmp_path / "run")
    console: list[tuple[str, str]] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.on("console", lambda m: console.append((m.type, m.text)))
            page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
            page.add_init_script(path=str(LICHTBLICK / "picker_stub.js"))
            page.goto(served + "/", wait_until="load", timeout=120_000)
            page.get_by_test_id("AppMenuButton").wait_for(timeout=120_000)
            phases["app up"] = time.monotonic() - start

            output, _ = recording.communicate(timeout=180)
            assert recording.returncode == 0, output[-2000:]
            phases["bag recorded"] = time.monotonic() - start
            bag = next((tmp_path / "run" / "mcap").glob("*.mcap"))
            page.locator("[data-puppeteer-file-upload]").set_input_files(str(bag), timeout=120_000)
            page.get_by_test_id("play-button").wait_for(timeout=60_000)

            _import_layout(page)
            phases["bag open, layout imported"] = time.monotonic() - start

            # Play the whole trial: the log panel shows the trial's last line when the end is reached.
            page.get_by_test_id("play-button").click()
            details, log = _panel(page, "RawMessages!status"), _panel(page, "RosOut!log")
            page.wait_for_function("el => / ended: IS /.test(el.innerText)", arg=log.element_handle(),
                                   timeout=90_000)
            # The canvases paint on their own frames: poll the pictures until drawn (a bound wait on a condition).
            phases["played to the end"] = time.monotonic() - start
            measured = _until(lambda: _pictures(page), lambda m: m["ok"], page, seconds=30)
            phases["pictures drawn"] = time.monotonic() - start
            on_screen = [pid for pid in panels if _panel(page, pid).count()]
            if SHOTS:
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(SHOTS) / "lichtblick_view.png"))

            tabbed = {f"CallService!{n}" for names in CONTROL_TABS.values() for n in names}
            first_tab = {f"CallService!{n}" for n in next(iter(CONTROL_TABS.values()))}
            assert sorted(on_screen) == sorted(set(panels) - tabbed | first_tab), "every panel placed"
            for pid in on_screen:
                if pid in titles:
                    assert titles[pid] in _panel(page, pid).inner_text(), f"{pid}: title {titles[pid]!r} not shown"
                text = _panel(page, pid).inner_text()
                assert not EMPTY.search(text), f"{pid} shows no data: {EMPTY.search(text)[0]!r}"  # type: ignore[index]
            assert "DiagnosticArray @" in details.inner_text()
            assert re.search(rf"trial {TASK}\S* ended: IS 1.00", log.inner_text())
            assert "IS total" in _panel(page, "Plot!scores").inner_text()
            for camera, colours in measured["colours"].items():
                assert colours > 200, f"{camera}: no picture drawn ({colours} colours)"
            assert measured["green"] < 0.005, f"frame axes drawn over the scene ({measured['green']:.2%} green)"
            assert measured["grey"] > 0.01, f"no robot drawn ({measured['grey']:.2%} grey)"

            # The recorded trial's stage rows too (three stages): each label in the panel's visible box, its bar drawn.
            rows = _state_rows(page)
            assert [r["text"] for r in rows] == list(STATUS_NAMES)
            for row in rows:
                assert _inside(row["label"], row["view"]) and row["coloured"] > 30, f"state row {row['text']}: {row}"
            _every_button_on_every_tab(page)
        finally:
            browser.close()
            if recording.poll() is None:
                recording.kill()
                recording.wait(timeout=10)
    if SHOTS:
        (Path(SHOTS) / "console.json").write_text(json.dumps(console, indent=1))
    print("seconds since start:", {k: round(v, 1) for k, v in phases.items()}, "measured:", measured)
    errors = [text for kind, text in console if kind in ("error", "pageerror")]
    assert not errors, errors[:5]
    rejected = [text for kind, text in console if re.search(r"layout|config", text, re.IGNORECASE)
                and re.search(r"invalid|unknown|unsupported|failed|reject", text, re.IGNORECASE)]
    assert not rejected, rejected[:5]


@pytest.fixture()
def operator_graph(tmp_path: Path) -> Iterator[tuple[Any, Any, list[str]]]:
    """The real foxglove_node on an rclpy graph (its live server on a free port), a stub trial manager whose
    Trigger services answer as the real one words it, and the test's publishers of the trial streams."""
    pytest.importorskip("rclpy", reason="rclpy is not installed (the ROS 2 Python client)")
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from robofollow_ros.nodes.foxglove_node import FoxgloveNode
    from ros_harness import RosHarness

    with RosHarness() as ros:
        node = ros.add(FoxgloveNode(context=ros.context, parameter_overrides=[
            Parameter("port", value=0), Parameter("record", value=False)]))
        manager = ros.node("stub_trial_manager")
        calls: list[str] = []

        def handler(name: str) -> Any:
            def handle(_req: Any, res: Any) -> Any:
                calls.append(name)
                res.success = True
                res.message = (f"stopping trial {SEQUENCE}_r1_s7; paused after it" if name.endswith("/stop")
                               else f"phase running; {name.rsplit('/', 1)[-1]} done")
                return res
            return handle

        for service in TRIAL_SERVICES:
            manager.create_service(Trigger, service, handler(service))
        yield ros, node, calls


def test_operator_view_live_at_1280x720_shows_every_stage_row_the_plot_the_log_and_the_answer(
        served: str, operator_graph: tuple[Any, Any, list[str]], registry: Any) -> None:
    from std_msgs.msg import String

    from robofollow_ros.nodes import trial_protocol as tp
    from robofollow_ros.scoring.frame import frame_from_dict
    from robofollow_ros.scoring.monitor import StageMonitor
    from robofollow_ros.scoring.synthetic import Puppet

    ros, node, calls = operator_graph
    task = registry.eval_task(SEQUENCE)
    trial_id = f"{SEQUENCE}_r1_s7"
    monitor = StageMonitor(task)
    # Stage 1 (the left arm's pick) and stage 2 (the right arm's) done, stage 3 (both home) pending.
    frames = [f.to_dict() for f in Puppet(task).pick("left", "red_cube_in_bowl").home("left")
              .pick("right", "green_cylinder_top").frames]
    start = time.monotonic()
    phases: dict[str, float] = {}
    console: list[tuple[str, str]] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = _open_live(browser, served, node.server.port, console)
            live = node.channels.live.channels
            ros.wait_for(lambda: all(live[t].has_sinks() for t in (topics.STATUS, topics.STAGES, topics.ROSOUT)), 60,
                         "the layout's panels to subscribe")
            phases["layout imported, panels subscribed"] = time.monotonic() - start

            publisher = ros.node("trial_streams")
            trial_pub = publisher.create_publisher(String, topics.TRIAL, tp.LATCHED)
            score_pub = publisher.create_publisher(String, topics.SCORE, tp.LATCHED)
            trial_pub.publish(String(data=json.dumps({"id": trial_id, "task": SEQUENCE, "scene": task.scene,
                                                      "level": "L0", "phase": "running",
                                                      "instruction": task.instruction})))
            ros.wait_for(lambda: node.session.trial_id == trial_id, 20, "the trial state")
            # The scores in batches, each once the states panel has drawn the last (so the trial takes a few
            # seconds, as a live one does, and each state change shows as its own stretch of bar).
            for first in range(0, len(frames), 10):
                drawn = _pixels(page, _panel(page, STATES))
                for i, raw in enumerate(frames[first:first + 10], start=first):
                    monitor.update(frame_from_dict(raw, i))
                    score_pub.publish(String(data=json.dumps({**monitor.live(), "trial_id": trial_id})))
                _until(lambda: _pixels(page, _panel(page, STATES)), lambda p, d=drawn: bool((p != d).any()), page,
                       seconds=10)
            live_score = monitor.live()
            assert len(live_score["stages"]) == STAGE_SLOTS, "the trial fills every stage row"
            assert [s["exec"] > 0 for s in live_score["stages"].values()] == [True, True, False]
            rows = _until(lambda: _state_rows(page), lambda rs: len(rs) == len(STATUS_NAMES) and all(
                r["coloured"] > 30 for r in rs), page, seconds=30)
            phases["trial drawn"] = time.monotonic() - start

            boxes = _boxes(page)
            top_level = [b for pid, b in boxes.items() if not pid.startswith("CallService!")]
            area = {"x": min(b["x"] for b in top_level), "y": min(b["y"] for b in top_level)}
            area["width"] = max(b["x"] + b["width"] for b in top_level) - area["x"]
            area["height"] = max(b["y"] + b["height"] for b in top_level) - area["y"]
            # Every state row (trial, stages 1..3, completion) whole in the panel's visible box, its bar drawn.
            assert [r["text"] for r in rows] == list(STATUS_NAMES)
            for row in rows:
                assert _inside(row["row"], row["view"]), f"state row {row['text']} cut: {row}"
                assert row["coloured"] > 30, f"state row {row['text']}: no bar drawn ({row})"
            # The plot: each legend row whole in the panel and left of the data, none cut; data at least 150 px square.
            legend = _legend(page)
            assert [n["text"] for n in legend["names"]] == list(STAGE_VALUES)
            for name in legend["names"]:
                assert _inside(name["box"], legend["panel"]) and not name["cut"], f"legend row {name}"
                assert name["box"]["x"] + name["box"]["width"] <= legend["canvas"]["x"] + 1, f"over the data: {name}"
            assert legend["canvas"]["width"] >= 150 and legend["canvas"]["height"] >= 200, legend["canvas"]
            # The log: room for at least eight lines.
            log_view = _log_view(page)
            assert log_view["box"]["height"] >= 8 * log_view["line"], log_view
            # The strip: at most a third of the layout's height.
            assert boxes[CONTROLS]["height"] <= area["height"] / 3, (boxes[CONTROLS], area)

            # A click on stop: the trial manager's answer, whole, in the log's visible box.
            answer = f"/robofollow/trial/stop: stopping trial {trial_id}; paused after it"
            _panel(page, "CallService!stop").get_by_test_id("call-service-button").click()
            # The log scrolls to its newest line as it lays it out: wait for the line in view, not just present.
            line = _until(lambda: _log_line(page, answer),
                          lambda v: v is not None and _inside(v["box"], v["view"]) and v["hit"], page, seconds=30)
            assert calls == ["/robofollow/trial/stop"] and line is not None, (calls, line)
            assert _inside(line["box"], line["view"]) and line["hit"], f"the answer is cut or covered: {line}"
            response = _panel(page, "CallService!stop").locator("textarea[placeholder=Response]")
            assert "paused after it" in response.input_value(), "the Call Service panel got the answer too"
            response_box = response.bounding_box()
            phases["answer shown"] = time.monotonic() - start

            _every_button_on_every_tab(page)
            if SHOTS:
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(SHOTS) / "lichtblick_live_view.png"))
        finally:
            browser.close()
    sizes = {pid: (b["width"], b["height"]) for pid, b in boxes.items()}
    print("seconds since start:", {k: round(v, 1) for k, v in phases.items()}, "layout area:",
          (area["width"], area["height"]), "panels (w, h):", sizes, "log lines:",
          round(log_view["box"]["height"] / log_view["line"], 1), "response box:", response_box)
    errors = [text for kind, text in console if kind in ("error", "pageerror")]
    assert not errors, errors[:5]


class _HeldAssets(RigAssets):
    """The server's asset handler, holding its answers back until ``release`` is set: the 3-D panel can be
    seen with every mesh asked for and none given, then with them."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.changed = threading.Condition()
        self.asked: list[str] = []

    def fetch(self, uri: str) -> bytes:
        with self.changed:
            self.asked.append(uri)
            self.changed.notify_all()
        self.release.wait(timeout=60)
        try:
            return super().fetch(uri)
        finally:
            with self.changed:
                self.changed.notify_all()

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(condition, timeout):
                raise AssertionError(f"timed out after {timeout} s waiting for {what} (asked: {self.asked}, "
                                     f"served: {dict(self.served)}, refused: {self.refused})")


@pytest.fixture()
def aloha_live() -> Iterator[tuple[str, _HeldAssets]]:
    """A live server with the ALOHA rig at home: its description (meshes by ``package://``), static TF, and
    the moving links' TF five times a second (volatile, as on the graph)."""
    from robofollow_ros.monitoring.robot import RobotModel
    from robofollow_ros.robot.rig_config import load_rig_config

    model = RobotModel(load_rig_config("aloha"))  # gym-aloha: tools/setup_env.sh installs it
    channels = TrialChannels()
    assets = channels.assets = _HeldAssets()
    home = model.kinematics.home_vector()
    channels.send(topics.ROBOT_DESCRIPTION, rosmsg.string(model.urdf))
    channels.send(topics.TF_STATIC, rosmsg.tf_message(model.static_transforms(time.time_ns())))
    server = start_monitor_server(channels, port=0)
    stop = threading.Event()

    def links() -> None:
        while not stop.wait(0.2):
            channels.send(topics.TF, rosmsg.tf_message(model.link_transforms(home, time.time_ns())))

    thread = threading.Thread(target=links, daemon=True)
    thread.start()
    try:
        yield f"ws://127.0.0.1:{server.port}", assets
    finally:
        assets.release.set()
        stop.set()
        thread.join(timeout=10)
        server.stop()


def test_live_rig_meshes_are_fetched_from_our_server_and_drawn(served: str,
                                                               aloha_live: tuple[str, _HeldAssets]) -> None:
    url, assets = aloha_live
    wanted = set(assets.files)
    assert len(wanted) == 11, wanted  # ALOHA: 11 STL files, each named by both arms
    start = time.monotonic()
    phases: dict[str, float] = {}
    console: list[tuple[str, str]] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.on("console", lambda m: console.append((m.type, m.text)))
            page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
            page.add_init_script(path=str(LICHTBLICK / "picker_stub.js"))
            page.goto(f"{served}/?ds=foxglove-websocket&ds.url={urllib.parse.quote(url, safe='')}",
                      wait_until="load", timeout=120_000)
            page.get_by_test_id("AppMenuButton").wait_for(timeout=120_000)
            phases["app up"] = time.monotonic() - start
            _import_layout(page)
            phases["layout imported"] = time.monotonic() - start
            assets.wait(lambda: wanted <= set(assets.asked), 60, "the app to ask for every mesh")
            phases["meshes asked for"] = time.monotonic() - start
            scene = _panel(page, "3D!robofollow")
            held = _pixels(page, scene)
            assets.release.set()
            assets.wait(lambda: set(assets.served) >= wanted, 30, "every mesh served")
            phases["meshes served"] = time.monotonic() - start
            drawn = _until(lambda: _pixels(page, scene), lambda p: _grey(p) > _grey(held) + 0.01, page, seconds=20)
            phases["meshes drawn"] = time.monotonic() - start
            if SHOTS:
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                Image.fromarray(held.astype(np.uint8)).save(Path(SHOTS) / "lichtblick_aloha_held.png")
                Image.fromarray(drawn.astype(np.uint8)).save(Path(SHOTS) / "lichtblick_aloha_meshes.png")
        finally:
            browser.close()
    print("seconds since start:", {k: round(v, 1) for k, v in phases.items()},
          f"grey held back {_grey(held):.2%}, served {_grey(drawn):.2%}")
    assert sorted(assets.asked) == sorted(wanted), "each mesh asked for once (the app caches per URI)"
    assert dict(assets.served) == dict.fromkeys(wanted, 1) and not assets.refused
    assert _grey(drawn) > _grey(held) + 0.01, f"meshes not drawn ({_grey(held):.2%} -> {_grey(drawn):.2%} grey)"
    errors = [text for kind, text in console if kind in ("error", "pageerror")]
    assert not errors, errors[:5]
