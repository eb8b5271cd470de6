"""vla-eval's own code as the other end of the wire, run in .venv-vlaeval (vla-eval from PyPI, no
robofollow_ros) by test_protocol_vlaeval.py. Not a test double: everything protocol-side here is
vla-eval's (``PredictModelServer`` + ``serve_async``; ``Connection``; ``specs.check_specs``).

``python vlaeval_peer.py model-server [--action-spec joints|eef] [--protocol-version N] [--chunk-size N]``
    A vla-eval model server built on vla-eval's ``PredictModelServer`` serving a trivial model on a
    free loopback port; prints ``PORT <n>`` once listening, runs until killed. The model's chunk is
    known: ``CHUNK`` rows, row i = state + 0.01 (i + 1); the action payload also carries ``echo``
    (what the model received: task_description, image dtype/shape/sum per camera, the state keys, and
    the ``task`` of the session's ``episode_start``).
    ``--action-spec eef`` declares vla-eval's end-effector delta spec (position/rotation/gripper);
    ``--protocol-version N`` sets vla-eval's own ``PROTOCOL_VERSION`` constant before serving.
    ``--chunk-size N`` builds the server as vla-eval's own model servers do (pi0 10, oft 10, groot 16,
    xvla 30): ``PredictModelServer(chunk_size=N)`` buffers the chunk and answers one action per call.

``python vlaeval_peer.py client PORT OUT_NPZ STEPS INSTRUCTION``
    vla-eval's ``Connection`` (what its orchestrator uses) against a model server: hello, the spec
    check vla-eval's orchestrator runs (against the specs of vla-eval's RoboTwin benchmark, copied
    from ``benchmarks/robotwin/benchmark.py``: importing it needs the simulator), one episode of
    STEPS RoboTwin-style observations (random 240×320 images, ``joint_state``, task_description),
    sent png-encoded as vla-eval sends them. Prints one JSON line (hello, spec warnings, actions) and
    saves what it sent to OUT_NPZ for the test to compare with what our policy received.

``python vlaeval_peer.py relay PORT``
    vla-eval's ``Connection`` held open for every episode, as its orchestrator holds one per shard, driven
    over stdin/stdout by a test's policy (``test_served_episodes.VlaEvalPeer``): frames of a 4-byte
    big-endian length and a msgpack list, arrays as ``np.save`` bytes. ``["start", task]`` →
    ``start_episode({"task": task})``, ``["act", images, joint_state, text]`` → ``act(...)`` as vla-eval's
    RoboTwin benchmark builds the observation (answered ``["actions", npy]``), ``["end"]`` →
    ``end_episode``, ``["close"]`` → close and exit. Every command is answered; ``["error", text]`` on failure.
"""

from __future__ import annotations

import json
import sys

import anyio
import numpy as np

CHUNK = 8


def model_server(args: list[str]) -> None:
    from vla_eval.model_servers.predict import PredictModelServer
    from vla_eval.model_servers.serve import serve_async
    from vla_eval.protocol import messages
    from vla_eval.specs import (
        GRIPPER_CLOSE_POS,
        IMAGE_RGB,
        LANGUAGE,
        POSITION_DELTA,
        ROTATION_AA,
        STATE_JOINT,
        DimSpec,
    )

    options = dict(zip(args[::2], args[1::2], strict=True))
    if "--protocol-version" in options:
        messages.PROTOCOL_VERSION = int(options["--protocol-version"])
    eef = options.get("--action-spec", "joints") == "eef"

    class KnownChunk(PredictModelServer):
        tasks: dict[str, object] = {}  # noqa: RUF012 - the episode_start task of each session, echoed back

        async def on_episode_start(self, config, ctx):  # type: ignore[no-untyped-def]
            self.tasks[ctx.session_id] = config.get("task")
            await super().on_episode_start(config, ctx)

        def predict(self, obs, ctx):  # type: ignore[no-untyped-def]
            state = np.asarray(obs.get("state", obs.get("joint_state")), dtype=np.float32)
            chunk = state[None, :] + 0.01 * np.arange(1, CHUNK + 1, dtype=np.float32)[:, None]
            echo = {"task_description": obs.get("task_description"), "state_keys": sorted(
                k for k in ("state", "joint_state") if k in obs), "step": ctx.step,
                "task": self.tasks.get(ctx.session_id), "images": {
                name: [str(image.dtype), list(image.shape), int(image.astype(np.int64).sum())]
                for name, image in obs.get("images", {}).items()}}
            return {"actions": chunk, "echo": echo}

        def get_action_spec(self):  # type: ignore[no-untyped-def]
            if eef:
                return {"position": POSITION_DELTA, "rotation": ROTATION_AA, "gripper": GRIPPER_CLOSE_POS}
            return {"joints": DimSpec("joints", 14, "joint_positions")}

        def get_observation_spec(self):  # type: ignore[no-untyped-def]
            return {"head_camera": IMAGE_RGB, "left_camera": IMAGE_RGB, "right_camera": IMAGE_RGB,
                    "state": STATE_JOINT, "language": LANGUAGE}

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            chunk_size = int(options["--chunk-size"]) if "--chunk-size" in options else None
            port = await tg.start(serve_async, KnownChunk(chunk_size=chunk_size), "127.0.0.1", 0)
            print(f"PORT {port}", flush=True)

    anyio.run(main)


def client(port: str, out: str, steps: str, instruction: str) -> None:
    from vla_eval.connection import Connection
    from vla_eval.specs import IMAGE_RGB, LANGUAGE, STATE_JOINT, DimSpec, check_specs

    bench_action = {"joints": DimSpec("joints", 14, "joint_positions")}
    bench_obs = {"head_camera": IMAGE_RGB, "left_camera": IMAGE_RGB, "right_camera": IMAGE_RGB,
                 "state": STATE_JOINT, "language": LANGUAGE}
    rng = np.random.default_rng(7)
    sent: dict[str, np.ndarray] = {}

    async def main() -> dict:
        conn = Connection(f"ws://127.0.0.1:{port}", timeout=30.0, max_retries=1)
        await conn.connect(benchmark="robotwin")
        info = conn.server_info
        server_action = {k: DimSpec.from_dict(v) for k, v in info.get("action_spec", {}).items()}
        server_obs = {k: DimSpec.from_dict(v) for k, v in info.get("observation_spec", {}).items()}
        warnings = check_specs(server_action, bench_action, server_obs, bench_obs)
        await conn.start_episode({"task": {"name": "robofollow_task", "instruction": instruction}})
        actions = []
        for step in range(int(steps)):
            images = {cam: rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
                      for cam in ("head_camera", "left_camera", "right_camera")}
            joint_state = rng.uniform(-1, 1, 14)
            for cam, image in images.items():
                sent[f"{step}/{cam}"] = image
            sent[f"{step}/joint_state"] = joint_state
            reply = await conn.act({"images": images, "task_description": instruction, "joint_state": joint_state})
            actions.append(np.asarray(reply["actions"]).tolist())
        await conn.end_episode({"success": False})
        await conn.close()
        return {"hello": info, "warnings": warnings, "actions": actions}

    result = anyio.run(main)
    np.savez(out, **sent)
    print(json.dumps(result), flush=True)


def relay(port: str) -> None:
    import io

    import msgpack
    from vla_eval.connection import Connection

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer

    def array(data: bytes) -> np.ndarray:
        return np.load(io.BytesIO(data), allow_pickle=False)

    def read() -> list:
        head = stdin.read(4)
        return msgpack.unpackb(stdin.read(int.from_bytes(head, "big"))) if len(head) == 4 else ["close"]

    def write(message: list) -> None:
        body = msgpack.packb(message)
        stdout.write(len(body).to_bytes(4, "big") + body)
        stdout.flush()

    async def main() -> None:
        conn = Connection(f"ws://127.0.0.1:{port}", timeout=60.0, max_retries=1)
        await conn.connect(benchmark="robotwin")
        while True:
            command = await anyio.to_thread.run_sync(read)  # the event loop keeps answering pings meanwhile
            try:
                if command[0] == "close":
                    await conn.close()
                    return
                if command[0] == "start":
                    await conn.start_episode({"task": command[1]})
                    write(["ok"])
                elif command[0] == "end":
                    await conn.end_episode({"success": False})
                    write(["ok"])
                else:
                    images = {cam: array(data) for cam, data in command[1].items()}
                    reply = await conn.act({"images": images, "joint_state": array(command[2]),
                                            "task_description": command[3]})
                    out = io.BytesIO()
                    np.save(out, np.asarray(reply["actions"], dtype=np.float32), allow_pickle=False)
                    write(["actions", out.getvalue()])
            except Exception as exc:  # the test reads the reason
                write(["error", f"{type(exc).__name__}: {exc}"])

    anyio.run(main)


if __name__ == "__main__":
    if sys.argv[1] == "model-server":
        model_server(sys.argv[2:])
    elif sys.argv[1] == "relay":
        relay(sys.argv[2])
    else:
        client(*sys.argv[2:6])
