"""The robot's meshes over the Foxglove WebSocket protocol's asset fetch: only the files the description names.

The live view's description names each local mesh ``package://robofollow_rig/<robot>/<file>``; the server's
asset handler answers exactly those URIs and refuses anything else (a URI not in the description, a traversal,
a file gone missing, not a regular file, over the size bound), and the recording keeps the ``file://`` text.
A real protocol client (``ws_client.FoxgloveProbe``) fetches the ALOHA rig's STL files from a real server.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from robofollow_ros.monitoring import rosmsg, topics
from robofollow_ros.monitoring.channels import TrialChannels
from robofollow_ros.monitoring.rig_assets import PACKAGE, AssetRefused, RigAssets, serve_description
from robofollow_ros.monitoring.server import start_monitor_server
from robofollow_ros.monitoring.ws_client import FoxgloveProbe

T = TypeVar("T")


def _urdf(meshes: list[str], name: str = "my arm", extra: str = "") -> str:
    links = "".join(f'<link name="l{i}"><visual><geometry><mesh filename="{m}" scale="0.001 0.001 0.001"/>'
                    f"</geometry></visual></link>" for i, m in enumerate(meshes))
    return f'<?xml version="1.0"?>\n<robot name="{name}">{links}{extra}</robot>'


@pytest.fixture()
def meshes(tmp_path: Path) -> dict[str, Path]:
    files = {"base": tmp_path / "meshes" / "base.stl", "finger": tmp_path / "meshes" / "hand" / "finger tip.STL",
             "texture": tmp_path / "meshes" / "skin.png"}
    for i, path in enumerate(files.values()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i]) * (100 + i))
    return files


def test_description_names_local_meshes_by_package_uri_and_leaves_the_rest(meshes: dict[str, Path]) -> None:
    texture = f'<material name="m"><texture filename="file://{meshes["texture"]}"/></material>'
    urdf = _urdf([f"file://{meshes['base']}", str(meshes["finger"]), f"file://{meshes['base']}",
                  "package://other_pkg/meshes/a.stl", "https://example.com/b.stl", "meshes/relative.stl",
                  "file:///etc/passwd", "file://otherhost/c.stl"], extra=texture)
    served = serve_description(urdf)
    base = f"package://{PACKAGE}/my_arm/"
    assert served.files == {base + "base.stl": str(meshes["base"]),
                            base + "hand/finger%20tip.STL": str(meshes["finger"]),
                            base + "skin.png": str(meshes["texture"])}
    names = re.findall(r'filename="([^"]*)"', served.urdf)
    assert names == [base + "base.stl", base + "hand/finger%20tip.STL", base + "base.stl",
                     "package://other_pkg/meshes/a.stl", "https://example.com/b.stl", "meshes/relative.stl",
                     "file:///etc/passwd", "file://otherhost/c.stl", base + "skin.png"]
    # everything else as written
    assert re.sub(r'filename="[^"]*"', "", served.urdf) == re.sub(r'filename="[^"]*"', "", urdf)
    assert serve_description("not xml <").files == {}
    assert serve_description(_urdf(["package://a/b.stl"])).urdf == _urdf(["package://a/b.stl"])


def test_an_escaped_filename_is_matched_by_its_value(tmp_path: Path) -> None:
    mesh = tmp_path / "a&b.stl"
    mesh.write_bytes(b"solid")
    served = serve_description(_urdf([f"file://{str(mesh).replace('&', '&amp;')}"], name="r"))
    assert served.files == {f"package://{PACKAGE}/r/a%26b.stl": str(mesh)}


def test_the_handler_answers_only_the_descriptions_files(meshes: dict[str, Path], tmp_path: Path) -> None:
    assets = RigAssets(max_bytes=101)
    live = assets.live_description(_urdf([f"file://{meshes['base']}", f"file://{meshes['finger']}"], name="r"))
    base = f"package://{PACKAGE}/r/"
    assert f'filename="{base}base.stl"' in live
    assert assets.fetch(base + "base.stl") == meshes["base"].read_bytes()

    refused = [base + "other.stl",                                   # not in the description
               base + "hand/../base.stl",                           # the same file by another URI
               f"package://{PACKAGE}/r/../../../../etc/passwd",     # traversal
               f"file://{meshes['base']}", str(meshes["base"]),     # the file's own names
               f"package://{PACKAGE}/r/hand/finger tip.STL",        # unencoded: not the URI written
               base + "hand/finger%20tip.STL"]                      # 101 bytes is fine ...
    for uri in refused[:-1]:
        with pytest.raises(AssetRefused, match="not a file of the current robot description"):
            assets.fetch(uri)
    assert assets.fetch(refused[-1]) == meshes["finger"].read_bytes()

    meshes["finger"].write_bytes(b"x" * 102)                         # ... 102 is over the bound
    with pytest.raises(AssetRefused, match="102 bytes, more than the 101 served"):
        assets.fetch(base + "hand/finger%20tip.STL")
    meshes["base"].unlink()                                          # gone since the description named it
    with pytest.raises(AssetRefused, match="No such file"):
        assets.fetch(base + "base.stl")
    assert assets.served == {base + "base.stl": 1, base + "hand/finger%20tip.STL": 1}
    assert len(assets.refused) == len(refused) - 1 + 2

    folder = tmp_path / "folder.stl"                                 # named like a mesh, not a regular file
    folder.mkdir()
    assets.live_description(_urdf([f"file://{folder}"], name="r"))
    with pytest.raises(AssetRefused, match="not a regular file"):
        assets.fetch(base + "folder.stl")
    with pytest.raises(AssetRefused, match="not a file of the current"):  # the previous description's file
        assets.fetch(base + "hand/finger%20tip.STL")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_viewer_fetches_the_aloha_meshes_from_the_server_and_the_bag_keeps_file_urls(tmp_path: Path) -> None:
    from robofollow_ros.robot.rig_config import load_rig_config

    urdf = load_rig_config("aloha").robot_description()  # gym-aloha: tools/setup_env.sh installs it
    local = sorted(set(re.findall(r'filename="file://([^"]+)"', urdf)))
    assert len(local) == 11, local
    channels = TrialChannels()
    bag = tmp_path / "trial.mcap"
    channels.open_recording(bag)
    channels.send(topics.ROBOT_DESCRIPTION, rosmsg.string(urdf))
    channels.close_recording()
    server = start_monitor_server(channels, port=0)
    probe = FoxgloveProbe(f"ws://127.0.0.1:{server.port}")

    async def watch() -> tuple[str, dict[str, bytes], str]:
        await probe.connect()
        try:
            await probe.wait_for(lambda: topics.ROBOT_DESCRIPTION in {c["topic"] for c in probe.channels.values()},
                                 10, "the description's channel")
            await probe.subscribe([topics.ROBOT_DESCRIPTION])  # latched: re-sent on subscribe
            await probe.wait_for(lambda: bool(probe.messages(topics.ROBOT_DESCRIPTION)), 10, "the description")
            live = str(probe.decode(probe.messages(topics.ROBOT_DESCRIPTION)[0]).data)
            uris = sorted(set(re.findall(r'filename="(package://[^"]+)"', live)))
            got = {uri: await probe.fetch_asset(uri) for uri in uris}
            with pytest.raises(LookupError, match=r"AssetRefused: .* not a file of the current robot description"):
                await probe.fetch_asset(f"package://{PACKAGE}/bimanual_viperx_transfer_cube/../../setup.py")
            return live, got, str(probe.server_info.get("capabilities"))
        finally:
            await probe.close()

    try:
        live, got, capabilities = _run(watch())
    finally:
        server.stop()
    assert "assets" in capabilities
    assert "file://" not in live and len(got) == 11
    assert sorted(got.values()) == sorted(Path(path).read_bytes() for path in local)  # each file, whole
    assert channels.assets.served.total() == 11 and len(channels.assets.refused) == 1
    with bag.open("rb") as f:
        recorded = [m.data for _s, _c, _m, m in make_reader(f, decoder_factories=[DecoderFactory()])
                    .iter_decoded_messages(topics=[topics.ROBOT_DESCRIPTION])]
    assert recorded == [urdf]  # the bag: file:// URLs, as on the graph
