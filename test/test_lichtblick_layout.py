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
Skipped, with the reason, where the build, playwright or Chromium is missing.
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
from robofollow_ros.monitoring.layout import CONTROL_TABS, CONTROLS, LAYOUT_PATH, TITLE_KEYS
from robofollow_ros.monitoring.rig_assets import RigAssets
from robofollow_ros.monitoring.server import start_monitor_server

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
                for n in names:
                    assert page.get_by_test_id(f"panel-mouseenter-container CallService!{n}") \
                        .get_by_test_id("call-service-button").is_visible()
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
    from robofollow_ros.robot.rig_config import RigConfigError, load_rig_config

    try:
        model = RobotModel(load_rig_config("aloha"))
    except (RigConfigError, OSError) as exc:  # gym-aloha not installed (tools/setup_env.sh installs it)
        pytest.skip(f"the ALOHA rig does not load here: {exc}")
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
