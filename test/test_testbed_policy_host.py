"""A remote GPU box on the test bed (tools/testbed.sh): ``robofollow serve`` on host 2 behind a link of
20 ms +- 5 ms RTT and about 0.5 % loss per round trip, ``robofollow eval --workers 4`` on host 1 against it
(``tcp://``), with and without dynamic batching: the verdicts of the same policy run in process. Then the
GPU box's cable is pulled mid-run: with ``--policy-timeout`` shorter than the outage the trials in flight
fail with the timeout as their reason and the run goes on; with a longer one a 10 s outage is ridden out
and nothing fails. Either way every trial is recorded once. The served policy is ``shared_echo``
(deterministic, shareable, with ``predict_batch``): what is compared is the transport, not a model."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from test_eval_ray import scored
from testbed import PY, Testbed, bed
from waiting import poll_until

pytestmark = pytest.mark.timeout(900)

EVALUATOR, GPU_BOX = 1, 2
POLICY = "robofollow_ros.policy.drills.echo:shared_echo"
TASKS = ("L1_s11_pick_left_of_green", "L0_push_left_cube_to_red_cylinder", "L0_s41_seq_l_bowl_then_r_green_cylinder",
         "L0_s41_l_pick_yellow_cylinder")
SHORT = EpisodeSettings(max_steps=3, actions_per_step=5)
PLAIN, BATCHED = 8999, 9000  # two servers on the GPU box: one trial-at-a-time, one batching up to 4
OUTAGE_S = 10.0


@pytest.fixture(scope="module")
def gpu_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    logs = tmp_path_factory.mktemp("servers")
    for testbed in bed(2):
        testbed.shape(GPU_BOX, delay_ms=10, jitter_ms=2.5, loss_pct=0.25)  # each way: RTT 20 +- 5 ms
        for port, batch in ((PLAIN, "1"), (BATCHED, "4")):
            testbed.popen(GPU_BOX, PY, "-m", "robofollow_ros.cli", "serve", "--policy", POLICY, "--host", "0.0.0.0",
                          "--port", str(port), "--batch-size", batch, "--batch-wait-ms", "20",
                          log=logs / f"serve{port}.log")
        for port in (PLAIN, BATCHED):
            log = logs / f"serve{port}.log"
            assert poll_until(lambda log=log: "Policy server:" in log.read_text(), 180), log.read_text()[-2000:]
        yield testbed


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("local") / "run"
    run_evaluation(EvalConfig(policy=POLICY, output=out, tasks=TASKS, rounds=2, render=False, settings=SHORT))
    return scored(out)


def eval_command(testbed: Testbed, port: int, out: Path, timeout_s: float) -> list[str]:
    return testbed.command(EVALUATOR, PY, "-m", "robofollow_ros.cli", "eval", "--workers", "4",
                           "--policy", f"tcp://{testbed.ip(GPU_BOX)}:{port}", "--policy-timeout", f"{timeout_s:g}",
                           "--tasks", ",".join(TASKS), "--rounds", "2", "--no-render",
                           "--max-steps", str(SHORT.max_steps), "--actions-per-step", str(SHORT.actions_per_step),
                           "--output", str(out))


@pytest.mark.parametrize("port", [PLAIN, BATCHED], ids=["one-at-a-time", "batched"])
def test_four_workers_against_the_remote_box_give_the_in_process_verdicts(
        tmp_path: Path, gpu_box: Testbed, reference: list[dict[str, Any]], port: int) -> None:
    done = subprocess.run(eval_command(gpu_box, port, tmp_path / "run", 60), capture_output=True, text=True,
                          timeout=600, env=gpu_box.env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert scored(tmp_path / "run") == reference


def start(gpu_box: Testbed, out: Path, log: Path, timeout_s: float) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(eval_command(gpu_box, PLAIN, out, timeout_s), stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=gpu_box.env())


def results(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "results.json").read_text()))


def test_an_outage_longer_than_the_policy_timeout_fails_the_trials_in_flight_and_the_run_goes_on(
        tmp_path: Path, gpu_box: Testbed, reference: list[dict[str, Any]]) -> None:
    log, out = tmp_path / "eval.log", tmp_path / "run"
    run = start(gpu_box, out, log, timeout_s=4)
    try:
        assert poll_until(lambda: "1/8 trials" in log.read_text() or run.poll() is not None, 300), log.read_text()
        gpu_box.link(GPU_BOX, up=False)
        # the outage lasts until it has cost a trial (or the run ended without needing the box)
        poll_until(lambda: " failed" in log.read_text() or run.poll() is not None, 120)
        gpu_box.link(GPU_BOX, up=True)
        status = run.wait(600)
    finally:
        gpu_box.link(GPU_BOX, up=True)
        if run.poll() is None:
            run.kill()
    text = log.read_text()
    rows = results(out)
    assert sorted((r["task"], r["round"]) for r in rows) == sorted((r["task"], r["round"]) for r in reference)
    failed = [r for r in rows if "policy_error" in r]
    assert status == 3 and failed, text[-3000:]  # trials were in flight: they failed, and say why
    assert all("within 4 s" in str(r["policy_error"]) or "Connection" in str(r["policy_error"]) for r in failed), \
        [r["policy_error"] for r in failed]
    assert len(failed) < len(rows)  # the run went on: trials after the outage reached the box again
    by_key = {(r["task"], r["round"]): r for r in scored(out)}
    for want in reference:  # every trial that was not failed by the outage has the in-process verdict
        if (want["task"], want["round"]) not in {(r["task"], r["round"]) for r in failed}:
            assert by_key[(want["task"], want["round"])] == want


def test_an_outage_within_the_policy_timeout_is_ridden_out(
        tmp_path: Path, gpu_box: Testbed, reference: list[dict[str, Any]]) -> None:
    log, out = tmp_path / "eval.log", tmp_path / "run"
    run = start(gpu_box, out, log, timeout_s=60)
    try:
        assert poll_until(lambda: "1/8 trials" in log.read_text() or run.poll() is not None, 300), log.read_text()
        gpu_box.link(GPU_BOX, up=False)
        time.sleep(OUTAGE_S)  # the outage itself: a stimulus of fixed length, not a wait for something
        gpu_box.link(GPU_BOX, up=True)
        status = run.wait(600)
    finally:
        gpu_box.link(GPU_BOX, up=True)
        if run.poll() is None:
            run.kill()
    assert status == 0, log.read_text()[-3000:]
    assert scored(out) == reference  # nothing failed, nothing lost or doubled
