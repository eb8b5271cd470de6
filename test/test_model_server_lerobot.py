"""A LeRobot policy served from LeRobot's own environment (.venv-lerobot: lerobot 0.4.4 + its torch)
by the model-side package, over both of its protocols (RoboFollow TCP and openpi's websocket), driven
by our ``tcp://`` and ``openpi://`` clients and by ``robofollow eval``.

The policy is an ACT built from its config over the features ``robofollow collect`` writes, with
random weights, saved with ``save_pretrained`` (weights and both processor pipelines) and loaded
back through LeRobot's factory by ``robofollow_model_server.lerobot:load`` (test/lerobot_random_policy.py).
Its chunk must equal, row for row, what LeRobot's own inference path (``predict_action``:
``select_action`` with the pre/post-processors) gives for the same observation; then an eval trial
runs through it and SIGTERM stops the server with 0 within its grace. Over ``openpi://`` the client
sends what openpi's clients send (resize-with-pad to a square), so that policy is built at 64×64 and
the client asked for 64×64 images: the server then hands LeRobot exactly the padded image the reference
is computed on. Training for real takes minutes: tools/lerobot_end_to_end.sh, by hand.

Needs .venv-lerobot (tools/setup_lerobot_env.sh: ~7 minutes and ~8 GB the first time); without it
the module is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from robofollow_ros.policy.drills.scripted import make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.openpi.observation import resize_with_pad

ROOT = Path(__file__).resolve().parents[1]
LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not LEROBOT_PYTHON.exists(), reason="no .venv-lerobot: run tools/setup_lerobot_env.sh"),
]
CAMERAS = {"head": "head_camera", "left_wrist": "left_camera", "right_wrist": "right_camera"}
#: The observation both LeRobot's own inference and the served policy get (at the trained 64×48).
OBS = make_observation(seed=5, width=64, height=48, instruction="pick up the yellow block")
#: The server's shutdown grace (--grace): SIGTERM must end it, with 0, within this.
GRACE_S = 20.0
#: protocol -> (URL scheme, the policy's image W×H, the client's kwargs, the observation the server hands on).
PROTOCOLS = {
    "robofollow": ("tcp", (64, 48), {}, OBS),
    "openpi": ("openpi", (64, 64), {"image_size": 64},
               {**OBS, "observation": {key: {"rgb": resize_with_pad(cam["rgb"], 64, 64)}
                                       for key, cam in OBS["observation"].items()}}),
}
LEROBOT_ENV = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"), "HF_HUB_OFFLINE": "1",
               "PYTHONUNBUFFERED": "1"}


def lerobot(*args: str) -> str:
    out = subprocess.run([str(LEROBOT_PYTHON), *args], capture_output=True, text=True, timeout=240, cwd=ROOT,
                         env=LEROBOT_ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module", params=list(PROTOCOLS))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    protocol = request.param
    scheme, (width, height), client_kwargs, obs = PROTOCOLS[protocol]
    tmp = tmp_path_factory.mktemp(f"act-{protocol}")
    ckpt = tmp / "pretrained_model"
    np.savez(tmp / "obs.npz", state=np.float32(obs["joint_action"]["vector"]), task=obs["instruction"],
             **{cam: obs["observation"][key]["rgb"] for cam, key in CAMERAS.items()})
    lerobot("test/lerobot_random_policy.py", str(ckpt), str(width), str(height), str(tmp / "obs.npz"),
            str(tmp / "ref.npy"))
    proc = subprocess.Popen([str(LEROBOT_PYTHON), "-m", "robofollow_model_server", "--port", "0",
                             "--protocol", protocol, "--grace", str(GRACE_S),
                             "--policy", "robofollow_model_server.lerobot:load",
                             "--kwargs", json.dumps({"checkpoint": str(ckpt)})],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=LEROBOT_ENV)
    try:
        assert proc.stdout is not None
        seen = []  # LeRobot prints to stdout while it loads ("Loading weights from local directory")
        while not (line := proc.stdout.readline()).startswith("Policy server: 127.0.0.1:"):
            assert line and len(seen) < 50, (seen, proc.communicate(timeout=30)[1] if not line else "")
            seen.append(line)
        yield np.load(tmp / "ref.npy"), proc, f"{scheme}://127.0.0.1:{int(line.rsplit(':', 1)[1])}", client_kwargs
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_the_served_chunk_is_what_lerobots_own_inference_gives(served) -> None:  # type: ignore[no-untyped-def]
    expected, _, url, client_kwargs = served
    obs = OBS
    client = load_policy(url, {"timeout_s": 60, "connect_attempts": 2, **client_kwargs})
    client.reset()
    client.set_instruction(obs["instruction"])
    actions = client.predict(obs)
    client.close()
    assert expected.shape == actions.shape == (8, 14)  # n_action_steps rows of 14 joints
    np.testing.assert_allclose(actions, expected, rtol=1e-5, atol=1e-5)
    assert np.ptp(actions, axis=0).max() > 0  # a real chunk, not one row repeated


def test_robofollow_eval_runs_a_trial_through_the_lerobot_policy_and_the_server_exits_0(served,  # type: ignore[no-untyped-def]
                                                                                         tmp_path: Path) -> None:
    _, proc, url, _ = served
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "robofollow_ros.cli", "eval", "--policy", url,
                          "--tasks", "L0_pickup_yellow_block_1_left", "--rounds", "1", "--max-steps", "2",
                          "--output", str(out), "--json"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    entries = results["results"] if isinstance(results, dict) else results
    assert len(entries) == 1 and "policy_error" not in entries[0], entries
    assert entries[0]["policy_steps"] == 2  # two chunks predicted (camera images resized to the policy's) and executed
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=GRACE_S + 30)
    stopped_s = time.monotonic() - start
    assert proc.returncode == 0 and "terminate called" not in err, err[-2000:]
    assert stopped_s < GRACE_S, (stopped_s, err[-2000:])  # a clean stop, not the grace running out
    assert "policy server stopped, policy closed" in err, err[-2000:]
