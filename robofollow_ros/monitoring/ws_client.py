"""A small Foxglove WebSocket protocol client (``foxglove.sdk.v1``), for tests, benchmarks and checks.

It speaks the wire format a Foxglove app speaks (JSON text ops, binary message data and service
calls), so a test that passes with it shows the server works for a real viewer; it decodes each
message with the schema the server advertised (ROS 2 ``ros2msg`` text for ``cdr`` channels, via
``mcap_ros2``; protobuf FileDescriptorSet; JSON), never with a schema of its own. It also records
how the connection ended: the close frame the server sent, or None when the socket just dropped.
Needs ``websockets``, ``mcap_ros2`` for ROS channels and ``protobuf`` for protobuf channels.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SUBPROTOCOL = "foxglove.sdk.v1"
_OP_MESSAGE_DATA = 1
_OP_SERVICE_RESPONSE = 3
_OP_CLIENT_SERVICE_REQUEST = 2
_OP_FETCH_ASSET_RESPONSE = 4


@dataclass
class Received:
    """One message delivered on a subscription, with its server timestamp (ns)."""

    topic: str
    timestamp_ns: int
    payload: bytes


@dataclass
class FoxgloveProbe:
    """Connect, collect server info / channels / services, subscribe, receive, call services."""

    url: str
    server_info: dict[str, Any] = field(default_factory=dict)
    channels: dict[int, dict[str, Any]] = field(default_factory=dict)
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    _ws: Any = None
    _subs: dict[int, int] = field(default_factory=dict)
    _responses: dict[int, bytes] = field(default_factory=dict)
    _assets: dict[int, tuple[bool, bytes]] = field(default_factory=dict)
    _decoders: dict[int, Callable[[bytes], Any]] = field(default_factory=dict)
    _next_call: int = 1
    _reader: asyncio.Task[None] | None = None
    #: Set when the connection ended: ``close_code`` (1005: a close frame without a status code;
    #: 1006: no close frame at all) and whether the server sent a close frame.
    closed: bool = False
    close_code: int | None = None
    close_frame_received: bool = False

    async def connect(self) -> None:
        import websockets

        self._ws = await websockets.connect(self.url, subprotocols=[SUBPROTOCOL], max_size=None)  # type: ignore[list-item]
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()

    async def wait_closed(self, timeout: float) -> None:
        """Wait until the server ends the connection."""
        if self._reader is not None:
            await asyncio.wait_for(asyncio.shield(self._reader), timeout)

    async def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait (event-driven polling of received state) until ``condition`` holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            if self._reader is not None and self._reader.done():
                self._reader.result()
                raise ConnectionError(
                    f"connection closed while waiting for {what} (close code {self.close_code}, "
                    f"{'a close frame from the server' if self.close_frame_received else 'no close frame'}; "
                    f"{len(self.received)} messages received)")
            if loop.time() > deadline:
                raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
            await asyncio.sleep(0.01)

    def topic_channel(self, topic: str) -> dict[str, Any]:
        for channel in self.channels.values():
            if channel["topic"] == topic:
                return channel
        raise KeyError(f"topic {topic!r} not advertised; have {sorted(c['topic'] for c in self.channels.values())}")

    async def subscribe(self, topics: list[str] | None = None) -> None:
        """Subscribe to the given topics (all advertised ones when None)."""
        chosen = list(self.channels.values()) if topics is None else [self.topic_channel(t) for t in topics]
        subs = []
        for channel in chosen:
            sub_id = len(self._subs) + 1
            self._subs[sub_id] = channel["id"]
            subs.append({"id": sub_id, "channelId": channel["id"]})
        await self._ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def messages(self, topic: str) -> list[Received]:
        return [m for m in self.received if m.topic == topic]

    def decode(self, message: Received) -> Any:
        """Decode with the advertised schema: JSON → dict, protobuf → message object."""
        channel = self.topic_channel(message.topic)
        if channel["encoding"] == "json":
            return json.loads(message.payload)
        if channel["encoding"] == "cdr":
            decoder = self._decoders.get(channel["id"])
            if decoder is None:
                decoder = self._decoders[channel["id"]] = _ros2_decoder(channel)
            return decoder(message.payload)
        if channel["encoding"] == "protobuf":
            decoder = self._decoders.get(channel["id"])
            if decoder is None:
                decoder = self._decoders[channel["id"]] = _protobuf_decoder(channel)
            return decoder(message.payload)
        raise ValueError(f"topic {message.topic}: no decoder for encoding {channel['encoding']!r}")

    async def call_service(self, name: str, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Call an advertised service with a JSON request; returns the decoded JSON response."""
        if name not in self.services:
            raise KeyError(f"service {name!r} not advertised; have {sorted(self.services)}")
        call_id, self._next_call = self._next_call, self._next_call + 1
        encoding = b"json"
        payload = json.dumps(request).encode()
        frame = struct.pack("<BIII", _OP_CLIENT_SERVICE_REQUEST, self.services[name]["id"], call_id, len(encoding))
        await self._ws.send(frame + encoding + payload)
        def answered() -> bool:
            return call_id in self._responses or any(f.get("callId") == call_id for f in self.failures)

        await self.wait_for(answered, timeout, f"service {name} response")
        if call_id not in self._responses:
            raise RuntimeError(f"service {name} failed: {self.failures[-1].get('message')}")
        result: dict[str, Any] = json.loads(self._responses.pop(call_id))
        return result

    async def fetch_asset(self, uri: str, timeout: float = 10.0) -> bytes:
        """The server's answer to a ``fetchAsset`` request (its ``assets`` capability); ``LookupError`` with the
        server's message when it refuses."""
        request_id, self._next_call = self._next_call, self._next_call + 1
        await self._ws.send(json.dumps({"op": "fetchAsset", "uri": uri, "requestId": request_id}))
        await self.wait_for(lambda: request_id in self._assets, timeout, f"asset {uri}")
        ok, payload = self._assets.pop(request_id)
        if not ok:
            raise LookupError(payload.decode("utf-8", "replace"))
        return payload

    async def _read(self) -> None:
        import websockets

        try:
            async for raw in self._ws:
                if isinstance(raw, str):
                    self._on_text(json.loads(raw))
                else:
                    self._on_binary(bytes(raw))
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed = True
            self.close_frame_received = getattr(self._ws.protocol, "close_rcvd", None) is not None
            self.close_code = self._ws.close_code

    def _on_text(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "serverInfo":
            self.server_info = msg
        elif op == "advertise":
            for channel in msg["channels"]:
                self.channels[channel["id"]] = channel
        elif op == "unadvertise":
            for cid in msg["channelIds"]:
                self.channels.pop(cid, None)
        elif op == "advertiseServices":
            for svc in msg["services"]:
                self.services[svc["name"]] = svc
        elif op == "serviceCallFailure":
            self.failures.append(msg)

    def _on_binary(self, data: bytes) -> None:
        if data[0] == _OP_MESSAGE_DATA:
            sub_id, stamp = struct.unpack_from("<IQ", data, 1)
            channel = self.channels.get(self._subs.get(sub_id, -1))
            if channel is not None:
                self.received.append(Received(channel["topic"], stamp, data[13:]))
        elif data[0] == _OP_SERVICE_RESPONSE:
            _service_id, call_id, enc_len = struct.unpack_from("<III", data, 1)
            self._responses[call_id] = data[13 + enc_len:]
        elif data[0] == _OP_FETCH_ASSET_RESPONSE:  # request id, status (0 ok, 1 error), error text, data
            request_id, status, error_len = struct.unpack_from("<IBI", data, 1)
            error, payload = data[10:10 + error_len], data[10 + error_len:]
            self._assets[request_id] = (status == 0, payload if status == 0 else error)


def _ros2_decoder(channel: dict[str, Any]) -> Callable[[bytes], Any]:
    """A CDR decoder generated from the channel's advertised ros2msg definition."""
    from mcap.records import Schema
    from mcap_ros2.decoder import DecoderFactory

    if channel.get("schemaEncoding") != "ros2msg":
        raise ValueError(f"topic {channel['topic']}: cdr without a ros2msg schema ({channel.get('schemaEncoding')!r})")
    schema = Schema(id=channel["id"], name=channel["schemaName"], encoding="ros2msg",
                    data=channel["schema"].encode("utf-8"))
    decoder = DecoderFactory().decoder_for("cdr", schema)
    assert decoder is not None
    return decoder


def _protobuf_decoder(channel: dict[str, Any]) -> Callable[[bytes], Any]:
    """A decoder built from the channel's advertised FileDescriptorSet (base64)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for proto in fds.file:
        pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))
    return cls.FromString  # type: ignore[no-any-return]
