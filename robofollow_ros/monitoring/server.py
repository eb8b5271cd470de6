"""The live Foxglove websocket server on the monitoring channels, with the trial-control services.

Foxglove users start, stop and advance trials and confirm the operator's scene reset from the
app's Service Call panel. The server only forwards: each service calls a ``TrialControl``
callable (the foxglove node binds them to the trial manager's ``std_srvs/Trigger`` services),
and answers with the Trigger response as JSON, so the app shows success and the message.

A viewer that connects after the robot model and the static transforms were sent still gets them:
when it subscribes to a latched topic, the server re-sends that topic's last messages (what a
transient-local subscription gives on ROS). The robot's meshes come through the protocol's asset fetch
(the ``assets`` capability): the live description names them by ``package://`` URI and
``channels.assets`` answers exactly those (``monitoring.rig_assets``). ``server.stop()`` closes every
connection with a websocket close frame (the SDK's, without a status code: the client reads 1005, not 1006).

Control is this machine's unless asked otherwise. The protocol has no authentication, and two of the
services (``take_over``, ``hand_back``) move an arm; so a server bound beyond loopback (``0.0.0.0``, a LAN
address, a host name) is read-only — it offers no service and advertises no ``services`` capability —
unless ``remote_control`` is set (``--foxglove-control``, recorded in run.json). Bound to loopback it
offers them as always; a viewer elsewhere reaches that through an ssh tunnel (docs/foxglove.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import foxglove
from foxglove import MessageSchema, Schema, Service, ServiceRequest, ServiceSchema
from foxglove.websocket import Capability, ChannelView, Client, ServerListener, WebSocketServer

from robofollow_ros.monitoring.access import offers_control
from robofollow_ros.monitoring.channels import TrialChannels

#: A trial-control action: returns (success, message) like std_srvs/Trigger.
TrialControl = Callable[[], tuple[bool, str]]

#: Foxglove service names (the trial manager's ROS service names, DESIGN.md; take_over and hand_back: the
#: arm bridge's).
TRIAL_SERVICES = ("/robofollow/trial/start", "/robofollow/trial/stop", "/robofollow/trial/next",
                  "/robofollow/trial/confirm_reset", "/robofollow/trial/override_reset", "/robofollow/trial/pause",
                  "/robofollow/trial/resume", "/robofollow/trial/abort", "/robofollow/trial/redo",
                  "/robofollow/teleop/take_over", "/robofollow/teleop/hand_back")

_TRIGGER_REQUEST = Schema(name="std_srvs/srv/Trigger_Request", encoding="jsonschema",
                          data=json.dumps({"type": "object", "properties": {}}).encode())
_TRIGGER_RESPONSE = Schema(name="std_srvs/srv/Trigger_Response", encoding="jsonschema",
                           data=json.dumps({"type": "object", "properties": {
                               "success": {"type": "boolean"}, "message": {"type": "string"}}}).encode())
TRIGGER_SCHEMA = ServiceSchema("std_srvs/srv/Trigger",
                               request=MessageSchema(encoding="json", schema=_TRIGGER_REQUEST),
                               response=MessageSchema(encoding="json", schema=_TRIGGER_RESPONSE))


def _trigger_handler(name: str, control: TrialControl) -> Callable[[ServiceRequest], bytes]:
    def handle(request: ServiceRequest) -> bytes:
        try:
            success, message = control()
        except Exception as exc:  # the app shows the reason; the server keeps running
            success, message = False, f"{name}: {type(exc).__name__}: {exc}"
        return json.dumps({"success": bool(success), "message": str(message)}).encode()
    return handle


class LatchedResend(ServerListener):
    """Re-sends a latched topic's last messages to the live view when a viewer subscribes to it."""

    def __init__(self, channels: TrialChannels) -> None:
        self.channels = channels
        self.resent = 0

    def on_subscribe(self, client: Client, channel: ChannelView) -> None:
        self.resent += self.channels.resend_latched(channel.topic)


def start_monitor_server(channels: TrialChannels, host: str = "127.0.0.1", port: int = 8765,
                         controls: Mapping[str, TrialControl] | None = None,
                         name: str = "robofollow", remote_control: bool = False) -> WebSocketServer:
    """Start the websocket server on ``channels``' live view (port 0 picks a free one; read ``server.port``),
    serving the live robot description's mesh files (``channels.assets``) to viewers that fetch them.

    ``controls`` are offered as services only where ``offers_control(host, remote_control)``: a server bound
    beyond loopback is read-only unless ``remote_control``."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port: must be in 0..65535, got {port}")
    unknown = sorted(set(controls or {}) - set(TRIAL_SERVICES))
    if unknown:
        raise ValueError(f"controls: unknown service {unknown[0]!r}; expected some of {TRIAL_SERVICES}")
    offered = controls if offers_control(host, remote_control) else None
    services = [Service(svc, schema=TRIGGER_SCHEMA, handler=_trigger_handler(svc, fn))
                for svc, fn in (offered or {}).items()]
    return foxglove.start_server(name=name, host=host, port=port, context=channels.live_context,
                                 capabilities=[Capability.Services] if services else [],
                                 supported_encodings=["json"], services=services,
                                 server_listener=LatchedResend(channels), asset_handler=channels.assets.fetch)
