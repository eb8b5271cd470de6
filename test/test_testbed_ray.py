"""``--backend ray`` across hosts of the test bed (tools/testbed.sh): a head (no CPUs) on host 1, two worker
hosts (one CPU each, so one actor each) on hosts 2 and 3, and the evaluator on host 4 (which runs a
CPU-less raylet of its own, as a driver outside the head must), each with its own IP, process table and
/tmp/ray, every Ray process started with ``ray start`` as docs/scale-out.md says. The evaluator gives the
local backend's verdicts; a worker host whose cable is pulled mid-trial (until the head declares it dead)
and plugged back loses and duplicates nothing; the head's loss stops the run with one line, and
``--resume`` on the local backend finishes it. One cluster for the module (Ray starts slowly on 2 cores);
the head-loss test ends it, so it runs last."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from test_eval_ray import scored
from testbed import PY, RAY, Testbed, bed
from waiting import poll_until

pytestmark = pytest.mark.timeout(900)

TASKS = ("L1_s11_pick_left_of_green", "L0_push_left_cube_to_red_cylinder", "L0_s41_seq_l_bowl_then_r_green_cylinder")
HEAD, WORKERS, DRIVER = 1, (2, 3), 4
GATED = "robofollow_ros.policy.drills.scripted:gated"
#: Ray's token authentication on, as docs/scale-out.md asks; a token of this module's own.
RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
#: The head declares a silent node dead after 3 missed 1-s health checks (Ray's default: 5 x 3 s), so a
#: pulled cable is noticed in seconds.
HEALTH = json.dumps({"health_check_period_ms": 1000, "health_check_failure_threshold": 3})
#: Each node's GCS view, printed from host 1: [(node IP, alive?)].
NODES = """
import json, sys
from ray._raylet import GcsClient
infos = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=20).values()
print(json.dumps(sorted((i.node_manager_address, i.state == 0) for i in infos)))
"""


class Cluster:
    def __init__(self, testbed: Testbed) -> None:
        self.bed = testbed
        self.address = f"{testbed.ip(HEAD)}:6379"

    def ray_start(self, host: int, *args: str) -> None:
        done = self.bed.run(host, RAY, "start", "--node-ip-address", self.bed.ip(host), "--disable-usage-stats",
                            "--object-store-memory", str(100 * 2**20), *args, timeout=300, **RAY_ENV)
        assert done.returncode == 0, f"ray start on host {host}:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"

    def nodes(self) -> list[tuple[str, bool]]:
        done = self.bed.run(HEAD, PY, "-c", NODES, self.address, timeout=120, **RAY_ENV)
        return [tuple(n) for n in json.loads(done.stdout.strip().splitlines()[-1])] if done.returncode == 0 else []

    def eval(self, out: Path, *extra: str) -> list[str]:
        return self.bed.command(DRIVER, PY, "-m", "robofollow_ros.cli", "eval", "--backend", "ray", "--ray-address",
                                self.address, "--tasks", ",".join(TASKS), "--rounds", "1", "--no-render",
                                "--output", str(out), *extra)

    def start_eval(self, out: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
        with log.open("wb") as sink:
            return subprocess.Popen(self.eval(out, *extra), stdout=sink, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.bed.env(**RAY_ENV))


@pytest.fixture(scope="module")
def testbed4() -> Iterator[Testbed]:
    yield from bed(4)


@pytest.fixture(scope="module")
def cluster(testbed4: Testbed) -> Iterator[Cluster]:
    c = Cluster(testbed4)
    # one at a time: two raylets starting at once on a loaded 2-core machine time out
    c.ray_start(HEAD, "--head", "--port", "6379", "--num-cpus", "0", "--include-dashboard", "false",
                "--system-config", HEALTH)
    for host in WORKERS:
        c.ray_start(host, "--address", c.address, "--num-cpus", "1")
    c.ray_start(DRIVER, "--address", c.address, "--num-cpus", "0")
    want = sorted((testbed4.ip(h), True) for h in (HEAD, *WORKERS, DRIVER))
    assert poll_until(lambda: c.nodes() == want, 120, interval_s=1), c.nodes()
    yield c
    # the bed's teardown ends every process on every host (their PID namespaces go with them)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("local") / "run"
    run_evaluation(EvalConfig(policy="oracle", output=out, tasks=TASKS, rounds=1, render=False))
    return scored(out)


def gate_kwargs(gate: Path) -> str:
    return json.dumps({"gate": str(gate), "inner": "oracle", "per_host": True})


def waiting_hosts(gate: Path) -> set[str]:
    """Which hosts have an actor held at the gate (``<hostname>.<pid>.waiting``, hostname ``PREFIX-hI``)."""
    return {p.name.split(".")[0].rsplit("-", 1)[1] for p in gate.glob("*.waiting")}


def test_ray_across_hosts_gives_the_local_verdicts(tmp_path: Path, cluster: Cluster,
                                                   reference: list[dict[str, Any]]) -> None:
    done = subprocess.run(cluster.eval(tmp_path / "run", "--policy", "oracle"), capture_output=True, text=True,
                          timeout=600, env=cluster.bed.env(**RAY_ENV))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert scored(tmp_path / "run") == reference


def test_a_worker_hosts_cable_pulled_mid_trial_loses_and_duplicates_nothing(
        tmp_path: Path, cluster: Cluster, reference: list[dict[str, Any]]) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "eval.log"
    run = cluster.start_eval(tmp_path / "run", log, "--policy", GATED, "--kwargs", gate_kwargs(gate))
    try:
        # one actor on each worker host, both mid-trial
        assert poll_until(lambda: waiting_hosts(gate) == {"h2", "h3"} or run.poll() is not None, 300), \
            log.read_text()[-3000:]
        assert run.poll() is None, log.read_text()[-3000:]
        cluster.bed.link(3, up=False)
        dead = (cluster.bed.ip(3), False)
        assert poll_until(lambda: dead in cluster.nodes(), 120, interval_s=1), cluster.nodes()
        cluster.bed.link(3, up=True)  # back, but too late: its trial runs again on host 2
        (gate / "open").touch()
        assert run.wait(600) == 0, log.read_text()[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
    assert "1 trial(s) ran again after their Ray node was lost" in log.read_text(), log.read_text()[-3000:]
    assert scored(tmp_path / "run") == reference  # every trial once, with the local verdicts


def test_the_heads_loss_stops_the_run_in_one_line_and_resume_on_the_local_backend_finishes_it(
        tmp_path: Path, cluster: Cluster, reference: list[dict[str, Any]]) -> None:
    # last in the module: the head does not come back
    gate = tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "eval.log"
    out = tmp_path / "run"
    run = cluster.start_eval(out, log, "--policy", GATED, "--kwargs", gate_kwargs(gate))
    try:
        assert poll_until(lambda: len(waiting_hosts(gate)) >= 1 or run.poll() is not None, 300), \
            log.read_text()[-3000:]
        assert run.poll() is None, log.read_text()[-3000:]
        cluster.bed.link(HEAD, up=False)
        status = run.wait(300)
    finally:
        if run.poll() is None:
            run.kill()
    text = log.read_text()
    errors = [line for line in text.splitlines() if "error" in line.lower()]
    assert status == 3 and "Traceback" not in text, text[-3000:]
    assert len(errors) == 1 and "the Ray head has not answered" in errors[0] and "--resume" in errors[0], text[-3000:]
    (gate / "open").touch()
    resumed = run_evaluation(EvalConfig(policy=GATED, policy_kwargs=json.loads(gate_kwargs(gate)), output=out,
                                        tasks=TASKS, rounds=1, render=False, resume=True))
    assert resumed.recorded + resumed.skipped == len(reference)
    assert scored(out) == reference
