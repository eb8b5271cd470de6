"""Control over the live view beyond this machine is opt-in (issue 36, item 9).

The Foxglove protocol has no authentication and ``take_over`` / ``hand_back`` move an arm: bound to loopback the
server offers the operator's services; bound beyond it, read-only unless ``--foxglove-control``; run.json records
which. The loopback server is a real one, called by a real protocol client; a server beyond loopback is not bound
here (a test opens no port to the network): its arguments to the SDK are read instead."""

from __future__ import annotations

import json
from typing import Any

import pytest

from robofollow_ros.bringup import Choices, apply_choices, launch_profile, load_profile
from robofollow_ros.monitoring import server as monitor_server
from robofollow_ros.monitoring.access import is_loopback, offers_control
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.server import TRIAL_SERVICES, start_monitor_server
from robofollow_ros.monitoring.ws_client import FoxgloveProbe
from test_foxglove_live import ProbeThread

CONTROLS = {name: (lambda name=name: (True, f"{name} ok")) for name in TRIAL_SERVICES}


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.0.9", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("10.0.0.5", False), ("rig-pc.lab", False),
    ("", False),
])
def test_loopback_is_told_by_address_and_a_name_is_not_trusted(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert offers_control(host, remote_control=False) is loopback
    assert offers_control(host, remote_control=True)


def test_on_loopback_a_real_client_sees_and_calls_every_service() -> None:
    server = start_monitor_server(TrialChannels(), host="127.0.0.1", port=0, controls=CONTROLS)
    client = ProbeThread(f"ws://127.0.0.1:{server.port}")
    try:
        probe: FoxgloveProbe = client.probe
        client.run(probe.connect())
        client.run(probe.wait_for(lambda: len(probe.services) == len(TRIAL_SERVICES), 10, "service advertisements"))
        assert "services" in probe.server_info["capabilities"]
        answer = client.run(probe.call_service("/robofollow/teleop/take_over", {}))
        assert answer == {"success": True, "message": "/robofollow/teleop/take_over ok"}
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize(("host", "remote_control", "offered"), [
    ("0.0.0.0", False, 0), ("192.168.1.20", False, 0), ("0.0.0.0", True, len(TRIAL_SERVICES)),
    ("localhost", False, len(TRIAL_SERVICES)),
])
def test_beyond_loopback_the_server_is_read_only_unless_control_is_asked_for(
        monkeypatch: pytest.MonkeyPatch, host: str, remote_control: bool, offered: int) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(monitor_server.foxglove, "start_server", lambda **kwargs: seen.update(kwargs))
    start_monitor_server(TrialChannels(), host=host, port=0, controls=CONTROLS, remote_control=remote_control)
    assert seen["host"] == host
    assert len(seen["services"]) == offered
    assert (monitor_server.Capability.Services in seen["capabilities"]) is bool(offered)


def test_run_json_records_where_the_live_view_binds_and_whether_it_offers_control() -> None:
    flag = lambda name: f"--{name}"  # noqa: E731

    def live_view(choices: Choices) -> dict[str, Any]:
        profile = apply_choices(load_profile("sim"), choices, flag)
        return json.loads(profile.node("trial_manager_node").parameters["live_view"])

    assert live_view(Choices()) == {"serve": True, "host": "127.0.0.1", "remote_control": False, "control": True}
    assert live_view(Choices(foxglove_host="0.0.0.0")) == {
        "serve": True, "host": "0.0.0.0", "remote_control": False, "control": False}
    assert live_view(Choices(foxglove_host="0.0.0.0", foxglove_control=True))["control"] is True
    assert live_view(Choices(foxglove=False)) == {"serve": False}
    launched = launch_profile(use_sim="true", foxglove_host="0.0.0.0", foxglove_control="true")
    assert launched.node("foxglove_node").parameters["remote_control"] is True
    assert json.loads(launched.node("trial_manager_node").parameters["live_view"])["control"] is True
