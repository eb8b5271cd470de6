"""Blinded instruction controls on the graph (issue 39 item 3): ``bringup --controls`` interleaves control trials
with the true ones in a seeded random order, records them as eval does, and the operator's terminal and live
view never show which instruction a trial got (nor that it is a control) before the run has ended
(nodes/trial_blind.py, monitoring/blind.py, docs/controls.md)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from robofollow_ros.benchmark import default_registry
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.blind import BLINDED, blind_live, scrub
from robofollow_ros.nodes.trial_blind import ControlledPlan
from robofollow_ros.nodes.trial_plan import parse_trials
from waiting import poll_until

TASK = "L0_pickup_red_cylinder"
CONTROLS = ("blank", "swap", "paraphrase")


def test_the_plan_interleaves_controls_in_a_seeded_order_with_labels() -> None:
    registry = default_registry()
    plan = parse_trials(f"tasks={TASK},L0_pickup_blue_cylinder rounds=2", registry)
    one = ControlledPlan.build(registry, plan, CONTROLS, order_seed=3)
    again = ControlledPlan.build(registry, plan, CONTROLS, order_seed=3)
    other = ControlledPlan.build(registry, plan, CONTROLS, order_seed=4)
    assert one.plan.keys == again.plan.keys != other.plan.keys
    assert sorted(k.trial_id for k in one.plan.keys) == sorted(k.trial_id for k in other.plan.keys)
    assert {k.control for k in one.plan.keys} >= {"", *CONTROLS[:1]} and len(one.plan) > len(plan)
    assert sorted(one.labels.values()) == [f"blind-{i:03d}" for i in range(1, len(one.plan) + 1)]
    key = next(k for k in one.plan.keys if k.control == "swap")
    given = one.given(key)
    assert given.scoring == {"scored_task": given.control.scored_task, "also_scored": key.task_id}  # type: ignore[union-attr]
    assert one.graph_id(key, 1) == one.labels[key] and one.graph_id(key, 2) == one.labels[key] + "_attempt2"
    assert "instruction blinded" in one.told(key, given) and given.instruction not in one.told(key, given)
    fields = one.result_fields(key)
    assert fields["control"] == "swap" and fields["partner"] == key.partner_id and fields["task"] == key.task_id
    unblinded = ControlledPlan.build(registry, plan, CONTROLS, blind=False)
    assert unblinded.labels == {} and unblinded.graph_id(key, 1) == key.trial_id
    assert unblinded.arguments()["unblind"] is True and "labels" not in unblinded.run_record()["controls"]
    assert ControlledPlan.build(registry, plan, ()).plan.keys == plan.keys  # no controls: the plan as it was


def test_the_live_view_of_a_blinded_run_loses_the_words_and_the_scored_task() -> None:
    words = "Use your left arm to push the blue cube towards the larger cylinder."
    instruction = rosmsg.encode(rosmsg.string(words))
    assert rosmsg.decode(blind_live(topics.INSTRUCTION, topics.STRING, instruction), topics.STRING).data == BLINDED
    score = {"trial_id": "blind-002", "task": "L2_push_x", "intent": 0.4, "stages": {
        "stage1_push_blue_cube": {"intent": 0.4, "intent_reason": "near blue_cube"}}}
    data = rosmsg.encode(rosmsg.string(json.dumps(score)))
    seen = json.loads(rosmsg.decode(blind_live(topics.SCORE, topics.STRING, data), topics.STRING).data)
    assert seen == {"trial_id": "blind-002", "intent": 0.4, "stages": {"stage 1": {"intent": 0.4}}}
    assert scrub({"phases": [{"phase": "stage1_x", "exec_score": 1.0}], "phase": "running"}) == \
        {"phases": [{"exec_score": 1.0}], "phase": "running"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _LiveWatcher:
    """Every message the live Foxglove view sends during the run, as a viewer subscribed to everything gets it."""

    def __init__(self, url: str) -> None:
        from robofollow_ros.monitoring.ws_client import FoxgloveProbe

        self.probe = FoxgloveProbe(url)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def connect(self, alive: subprocess.Popen[str], timeout: float) -> None:
        def connected() -> bool:  # the server may not be listening yet: retried by poll_until, bounded
            assert alive.poll() is None, "bringup ended before its Foxglove server listened"
            try:
                asyncio.run_coroutine_threadsafe(self.probe.connect(), self.loop).result(10)
                return True
            except OSError:
                return False

        assert poll_until(connected, timeout, interval_s=0.2), f"no Foxglove server within {timeout} s"
        wait = self.probe.wait_for(lambda: bool(self.probe.channels), 30, "channels")
        asyncio.run_coroutine_threadsafe(wait, self.loop).result(40)
        asyncio.run_coroutine_threadsafe(self.probe.subscribe(), self.loop).result(10)

    def close(self) -> None:
        try:
            # beyond websockets' own 10 s close timeout, which a loaded machine can use up (a TimeoutError here)
            asyncio.run_coroutine_threadsafe(self.probe.close(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


@pytest.mark.timeout(600)
def test_a_blinded_mock_run_records_its_controls_and_never_shows_them_before_the_end(tmp_path: Path) -> None:
    registry = default_registry()
    plan = ControlledPlan.build(registry, parse_trials(f"tasks={TASK} rounds=1", registry), CONTROLS)
    given = {k: plan.given(k).instruction for k in plan.plan.keys}
    secrets = [w for w in given.values() if w] + [k.trial_id for k in plan.plan.keys if k.control]
    run, port = tmp_path / "run", _free_port()
    log = (tmp_path / "console.txt").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "robofollow_ros.cli", "bringup", "mock", "--policy", "oracle",
                             "--tasks", TASK, "--rounds", "1", "--max-steps", "2", "--controls", ",".join(CONTROLS),
                             "--foxglove-port", str(port), "--exit-when-done", "--output", str(run)],
                            stdout=log, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    watcher = _LiveWatcher(f"ws://127.0.0.1:{port}")
    try:
        watcher.connect(proc, timeout=120)
        code = proc.wait(timeout=420)
    finally:
        if proc.poll() is None:
            proc.kill()
        watcher.close()
        log.close()
    console = (tmp_path / "console.txt").read_text()
    assert code == 0, console[-4000:]
    # recorded like eval's control trials: control, partner, the instruction given; run.json says blinded
    results = json.loads((run / "results.json").read_text())
    assert sorted(r.get("control") or "" for r in results) == ["", "blank", "paraphrase", "swap"]
    for r in results:
        key = TrialKey(TASK, 1, r["seed"], r.get("control") or "")
        assert r["blind_label"] == plan.labels[key] and r["task"] == TASK
        if key.control:
            assert r["partner"] == key.partner_id and r["instruction"] == given[key]
    swap = next(r for r in results if r.get("control") == "swap")
    assert swap["scored_task"] != TASK and swap["original_verdict"]["task"] == TASK
    record = json.loads((run / "run.json").read_text())
    assert record["arguments"]["controls"] == list(CONTROLS) and record["arguments"]["unblind"] is False
    assert record["controls"]["blind"] is True and len(record["controls"]["labels"]) == 4
    # the bag records what the policy was given (the live view did not show it)
    from mcap.reader import make_reader

    with (run / "mcap" / f"{swap['blind_label']}.mcap").open("rb") as fh:
        recorded = [bytes(m.data) for _, _, m in make_reader(fh).iter_messages(topics=[topics.INSTRUCTION])]
    assert recorded and swap["instruction"].encode() in recorded[0]
    # the SQLite store holds them: report --controls works on a bringup run
    report = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "report", str(run), "--controls", "--json",
                             "--no-plot"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    # the operator's terminal: nothing of the instructions, nor which trial is a control, before the run ended
    before, sep, after = console.partition("unblinded (every verdict and mark is recorded)")
    assert sep, console[-3000:]
    for secret in secrets:
        assert secret not in before, secret
        assert secret in after, secret
    for name in CONTROLS:
        assert f"control {name}" not in before
    assert "blind-001" in before
    # the live view: no message on any channel carried an instruction, a control trial's id or the swap's task
    received = watcher.probe.received
    assert any(m.topic == topics.TRIAL for m in received) and any(m.topic == topics.INSTRUCTION for m in received)
    leaks = [(m.topic, s) for m in received for s in [*secrets, swap["scored_task"]] if s.encode() in m.payload]
    assert leaks == [] or all(m_topic == topics.ROSOUT for m_topic, _ in leaks), leaks
    late = [m for m in received if m.topic == topics.ROSOUT and b"unblinded" in m.payload]
    first_leak = min((m.timestamp_ns for m in received for s in secrets if s.encode() in m.payload), default=None)
    assert first_leak is None or (late and first_leak >= min(m.timestamp_ns for m in late)), leaks


def test_the_launch_arguments_and_flags_land_on_the_trial_manager_and_the_live_view() -> None:
    from robofollow_ros.bringup import launch_profile
    from robofollow_ros.bringup.profiles import ProfileError

    profile = launch_profile(use_mock_hardware="true", controls="swap,blank")
    manager = profile.node("trial_manager_node").parameters
    assert manager["controls"] == "blank,swap" and manager["blind"] is True
    assert profile.node("foxglove_node").parameters["blind"] is True
    debug = launch_profile(use_mock_hardware="true", controls="blank", unblind="true")
    assert debug.node("trial_manager_node").parameters["blind"] is False
    assert debug.node("foxglove_node").parameters["blind"] is False
    with pytest.raises(ProfileError, match="only with controls"):
        launch_profile(use_mock_hardware="true", unblind="true")
    with pytest.raises(ProfileError, match="'bogus' is not one of"):
        launch_profile(use_mock_hardware="true", controls="blank,bogus")
