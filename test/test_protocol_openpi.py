"""openpi websocket protocol: our server driven by the PyPI ``openpi-client``, our client against our
server and against a server built from openpi-client's own codec, and the ALOHA conversion."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest
import websockets.sync.client
import websockets.sync.server
from openpi_client import image_tools
from openpi_client import msgpack_numpy as openpi_msgpack
from openpi_client.websocket_client_policy import WebsocketClientPolicy

from robofollow_ros.policy.baselines.hold import HoldPolicy
from robofollow_ros.policy.drills.scripted import FaultyPolicy, RecordingPolicy, make_observation
from robofollow_ros.policy.guard import TimeoutGuardedPolicy
from robofollow_ros.policy.wire.common import RemotePolicyError
from robofollow_ros.policy.wire.openpi.client import OpenpiWebsocketPolicy
from robofollow_ros.policy.wire.openpi.codec import packb, unpackb
from robofollow_ros.policy.wire.openpi.observation import (
    ObservationError,
    from_openpi_observation,
    resize_with_pad,
    to_openpi_observation,
)
from robofollow_ros.policy.wire.openpi.server import INTERNAL_ERROR_REASON, OpenpiPolicyServer

# openpi-client (the reference peer, not our code) connects without a context manager.
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")


def aloha_request(prompt: str = "pick the cube", seed: int = 0) -> dict:
    return to_openpi_observation(make_observation(seed), prompt)


@pytest.fixture
def recorder() -> Iterator[tuple[OpenpiPolicyServer, RecordingPolicy]]:
    policy = RecordingPolicy(chunk_size=50)
    server = OpenpiPolicyServer(policy, port=0, metadata={"reset_pose": [0, -1.5, 1.5, 0, 0, 0]}).start()
    yield server, policy
    server.stop()


# ------------------------------------------------------------------------ ALOHA conversion
@pytest.mark.parametrize("size", [(240, 320), (480, 640), (300, 200), (224, 224)])
def test_resize_with_pad_matches_openpi_client(size: tuple[int, int]) -> None:
    image = np.random.default_rng(1).integers(0, 256, (*size, 3), dtype=np.uint8)
    np.testing.assert_array_equal(resize_with_pad(image, 224, 224), image_tools.resize_with_pad(image, 224, 224))


def test_robofollow_observation_becomes_aloha_keys_chw_224() -> None:
    obs = make_observation(seed=2)
    request = to_openpi_observation(obs, "stack the blocks")
    assert set(request) == {"state", "images", "prompt"} and request["prompt"] == "stack the blocks"
    assert request["state"].dtype == np.float32 and request["state"].shape == (14,)
    assert set(request["images"]) == {"cam_high", "cam_left_wrist", "cam_right_wrist"}
    for image in request["images"].values():
        assert image.shape == (3, 224, 224) and image.dtype == np.uint8
    head = obs["observation"]["head_camera"]["rgb"]
    expected = image_tools.resize_with_pad(head, 224, 224).transpose(2, 0, 1)
    np.testing.assert_array_equal(request["images"]["cam_high"], expected)
    # 320×240 → 224×168 with 28 rows of black padding above and below
    assert not request["images"]["cam_high"][:, :28].any() and not request["images"]["cam_high"][:, -28:].any()


def test_aloha_request_converts_back_and_missing_wrists_are_black() -> None:
    request = aloha_request()
    obs, prompt = from_openpi_observation(request)
    assert prompt == "pick the cube" and obs["instruction"] == "pick the cube"
    np.testing.assert_array_equal(obs["observation"]["left_camera"]["rgb"],
                                  request["images"]["cam_left_wrist"].transpose(1, 2, 0))
    del request["images"]["cam_right_wrist"]
    obs, _ = from_openpi_observation(request)
    assert obs["observation"]["right_camera"]["rgb"].shape == (224, 224, 3)
    assert not obs["observation"]["right_camera"]["rgb"].any()


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda r: r.pop("state"), "state"),
        (lambda r: r.__setitem__("state", np.zeros(7)), "state"),
        (lambda r: r["images"].pop("cam_high"), "cam_high"),
        (lambda r: r["images"].__setitem__("cam_top", r["images"]["cam_high"]), "unknown camera names"),
        (lambda r: r["images"].__setitem__("cam_high", np.zeros((5, 5))), "images.cam_high"),
        (lambda r: r.__setitem__("prompt", 3), "prompt"),
    ],
)
def test_bad_aloha_requests_name_the_field(mutate, fragment: str) -> None:
    request = aloha_request()
    mutate(request)
    with pytest.raises(ObservationError, match=fragment):
        from_openpi_observation(request)


def test_our_codec_is_byte_compatible_with_openpi_client() -> None:
    message = {"actions": np.ones((50, 14), np.float32), "n": np.int64(3), "s": "x", "nested": [np.arange(3)]}
    assert packb(message) == openpi_msgpack.packb(message)
    back = unpackb(openpi_msgpack.packb(message))
    np.testing.assert_array_equal(back["actions"], message["actions"])
    assert back["n"] == 3 and isinstance(back["n"], np.int64)


# ------------------------------------------------------------------------ our server, openpi's client
def test_openpi_client_gets_metadata_and_actions_from_our_server(recorder) -> None:
    server, policy = recorder
    client = WebsocketClientPolicy("127.0.0.1", server.address[1])
    assert client.get_server_metadata() == {"reset_pose": [0, -1.5, 1.5, 0, 0, 0]}
    first = client.infer(aloha_request("pick the cube"))
    second = client.infer(aloha_request("pick the cube", seed=1))
    assert first["actions"].shape == (50, 14) and first["actions"].dtype == np.float32
    assert first["actions"][0, 0] == 1.0 and second["actions"][0, 0] == 2.0
    assert set(second["server_timing"]) == {"infer_ms", "prev_total_ms"} and "infer_ms" in second["policy_timing"]
    client.infer(aloha_request("push the bowl"))  # a new prompt starts a new episode
    assert [c[0] for c in policy.calls] == ["reset", "set_instruction", "predict", "predict",
                                            "reset", "set_instruction", "predict"]
    assert policy.calls[4:6] == [("reset", None), ("set_instruction", "push the bowl")]
    assert policy.calls[2][1]["observation"]["head_camera"]["rgb"].shape == (224, 224, 3)


def test_health_endpoint_answers_ok(recorder) -> None:
    server, _ = recorder
    with urllib.request.urlopen(f"http://127.0.0.1:{server.address[1]}/healthz", timeout=20) as response:
        assert response.status == 200 and response.read() == b"OK\n"
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://127.0.0.1:{server.address[1]}/nothing", timeout=20)


@pytest.mark.parametrize("mode", ["raise", "nan", "wrong_shape"])
def test_policy_errors_arrive_as_a_text_frame_then_internal_error_close(mode: str) -> None:
    with OpenpiPolicyServer(FaultyPolicy(mode), port=0).start() as server:
        client = WebsocketClientPolicy("127.0.0.1", server.address[1])
        with pytest.raises(RuntimeError, match="Error in inference server") as info:
            client.infer(aloha_request())
        assert "--debug" in str(info.value) and "Traceback (most recent" not in str(info.value)
        with pytest.raises(websockets.exceptions.ConnectionClosedError) as closed:
            client._ws.recv(timeout=20)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        assert closed.value.rcvd.reason == INTERNAL_ERROR_REASON
        # the server keeps serving new connections
        again = WebsocketClientPolicy("127.0.0.1", server.address[1])
        with pytest.raises(RuntimeError):
            again.infer(aloha_request())


def test_a_hung_policy_times_out_and_the_server_keeps_answering() -> None:
    faulty = FaultyPolicy("hang", hang_s=30)
    guard = TimeoutGuardedPolicy(faulty, timeout_s=0.2)
    with OpenpiPolicyServer(guard, port=0).start() as server:
        client = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=20)
        with pytest.raises(RemotePolicyError, match=r"no answer within 0\.2 s"):
            client.predict(make_observation())
        with pytest.raises(RemotePolicyError, match="still running"):
            client.predict(make_observation())
        faulty.release.set()
        assert guard.wait_idle(10)
        assert client.predict(make_observation()).shape == (4, 14)
        client.close()


def test_debug_server_includes_the_traceback_in_the_text_frame() -> None:
    with OpenpiPolicyServer(FaultyPolicy("raise"), port=0, debug=True).start() as server:
        client = WebsocketClientPolicy("127.0.0.1", server.address[1])
        with pytest.raises(RuntimeError, match="Traceback \\(most recent call last\\)"):
            client.infer(aloha_request())


def test_garbage_messages_get_an_error_frame_not_a_crash(recorder) -> None:
    server, _ = recorder
    for payload in (b"\xc1", b"not msgpack at all", "a text frame"):
        with websockets.sync.client.connect(f"ws://127.0.0.1:{server.address[1]}", open_timeout=20) as ws:
            ws.recv(timeout=20)  # metadata
            ws.send(payload)
            reply = ws.recv(timeout=20)
            assert isinstance(reply, str) and ("msgpack" in reply or "text frame" in reply)
    assert WebsocketClientPolicy("127.0.0.1", server.address[1]).infer(aloha_request())["actions"].shape == (50, 14)


# ------------------------------------------------------------------------ our client
def test_our_client_against_our_server_resets_on_a_new_connection(recorder) -> None:
    server, policy = recorder
    client = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=20, connect_attempts=2,
                                   connect_interval_s=0.05)
    client.reset()
    client.set_instruction("pick the cube")
    assert client.predict(make_observation())[0, 0] == 1.0
    assert client.predict(make_observation())[0, 0] == 2.0
    assert client.server_metadata == {"reset_pose": [0, -1.5, 1.5, 0, 0, 0]}
    assert "infer_ms" in client.last_timing["server_timing"] and client.last_timing["client_ms"] > 0
    assert len(client.timings) == 2
    client.reset()  # same prompt, new episode: the server sees a fresh connection
    assert client.predict(make_observation())[0, 0] == 1.0
    assert client.connections_opened == 2
    assert policy.calls[-3][0] == "reset"
    client.close()


def test_our_client_matches_hold_in_process() -> None:
    with OpenpiPolicyServer(HoldPolicy(chunk_size=5), port=0).start() as server:
        client = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=20)
        obs = make_observation(seed=5)
        np.testing.assert_array_equal(client.predict(obs), HoldPolicy(5).predict(obs))
        client.close()


def test_our_client_raises_the_remote_error_and_reconnects_lazily() -> None:
    with OpenpiPolicyServer(FaultyPolicy("raise"), port=0).start() as server:
        client = OpenpiWebsocketPolicy("127.0.0.1", server.address[1], timeout_s=20)
        with pytest.raises(RemotePolicyError, match="predict failed") as info:
            client.predict(make_observation())
        # the first line (what the console shows) names the server's own reason, without the debug hint
        first = str(info.value).splitlines()[0]
        assert first == (f"openpi server ws://127.0.0.1:{server.address[1]}: predict failed: "
                         "PolicyError: drill: the model failed on purpose")
        assert "withheld" not in first
        with pytest.raises(RemotePolicyError):
            client.predict(make_observation())
        assert client.connections_opened == 2
        client.close()


def test_our_client_gives_up_after_the_configured_attempts() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenpiWebsocketPolicy("127.0.0.1", port, timeout_s=5, connect_attempts=2, connect_interval_s=0.01)
    with pytest.raises(ConnectionError, match="no connection after 2 attempts"):
        client.predict(make_observation())


def test_our_client_talks_to_a_server_built_from_openpi_clients_codec() -> None:
    """A minimal openpi-style server (metadata frame, lock-step replies) using openpi-client's codec."""
    seen: list[dict] = []

    def handler(ws: websockets.sync.server.ServerConnection) -> None:
        ws.send(openpi_msgpack.packb({"reset_pose": [0.0] * 6}))
        for message in ws:
            obs = openpi_msgpack.unpackb(message)
            seen.append(obs)
            actions = np.tile(obs["state"], (50, 1))
            ws.send(openpi_msgpack.packb({"actions": actions, "server_timing": {"infer_ms": 1.5}}))

    server = websockets.sync.server.serve(handler, "127.0.0.1", 0, compression=None, max_size=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = OpenpiWebsocketPolicy("127.0.0.1", server.socket.getsockname()[1], timeout_s=20)
        client.set_instruction("open the drawer")
        obs = make_observation(seed=4)
        actions = client.predict(obs)
        assert actions.shape == (50, 14)
        np.testing.assert_allclose(actions[0], obs["joint_action"]["vector"].astype(np.float32))
        assert seen[0]["prompt"] == "open the drawer" and seen[0]["images"]["cam_high"].shape == (3, 224, 224)
        assert client.last_timing["server_timing"] == {"infer_ms": 1.5}
        client.close()
    finally:
        server.shutdown()
        thread.join(20)


def test_oversized_messages_are_refused_and_the_server_keeps_serving() -> None:
    with OpenpiPolicyServer(HoldPolicy(), port=0, max_message_bytes=10_000).start() as server:
        uri = f"ws://127.0.0.1:{server.address[1]}"
        with websockets.sync.client.connect(uri, open_timeout=20) as ws:
            ws.recv(timeout=20)
            ws.send(packb(aloha_request()))  # ~450 kB > 10 kB
            with pytest.raises(websockets.exceptions.ConnectionClosedError) as closed:
                ws.recv(timeout=20)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
        small = {"state": np.zeros(14, np.float32), "images": {"cam_high": np.zeros((3, 8, 8), np.uint8)}}
        assert WebsocketClientPolicy("127.0.0.1", server.address[1]).infer(small)["actions"].shape == (5, 14)
    client = OpenpiWebsocketPolicy("127.0.0.1", 9, max_message_bytes=1000)
    with pytest.raises(ValueError, match="exceed the limit of 1000"):
        client.predict(make_observation())
