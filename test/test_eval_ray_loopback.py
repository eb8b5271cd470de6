"""``robofollow eval --backend ray`` without ``--ray-address`` starts a private Ray instance for this machine
alone: while a real run holds its actor mid-trial, every listening TCP socket of every process of that run
(the evaluator, GCS, raylet, agents, workers) is read from ``/proc`` and must be bound to loopback. The run
ignores an inherited ``RAY_ADDRESS``, ends with all its Ray processes, and scores as the local backend does."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import pytest

from robofollow_ros.evaluation.episode import EpisodeSettings
from robofollow_ros.evaluation.runner import EvalConfig, run_evaluation
from test_cli_tasks import ROBOFOLLOW
from test_eval_ray import _alive, scored
from waiting import poll_until

pytestmark = pytest.mark.timeout(600)

TASK = "L0_push_left_cube_to_red_cylinder"
SHORT = EpisodeSettings(max_steps=2, actions_per_step=5)
GATED = "robofollow_ros.policy.drills.scripted:gated"


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from ``/proc/<pid>/stat``'s parent field)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _address(field: str) -> tuple[str, int]:
    """``/proc/net/tcp{,6}``'s ``HEX_IP:HEX_PORT`` (IPv4 one little-endian word, IPv6 four)."""
    hex_ip, hex_port = field.split(":")
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1]), int(hex_port, 16)
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, raw), int(hex_port, 16)


def listening(pids: Iterable[int]) -> list[tuple[int, str, str, int]]:
    """(pid, command name, bound IP, port) of every TCP socket in LISTEN state that these processes hold."""
    by_inode: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                by_inode[int(fields[9])] = _address(fields[1])
    found = []
    for pid in pids:
        with suppress(OSError):  # a process that ended meanwhile
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:[") and int(target[8:-1]) in by_inode:
                        found.append((pid, name, *by_inode[int(target[8:-1])]))
    return sorted(set(found))


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, an IPv6 socket bound to IPv4 loopback
    return (mapped or address).is_loopback


def test_the_socket_reader_tells_loopback_from_every_interface() -> None:
    binds = [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::"),
             (socket.AF_INET6, "::1")]
    socks = [socket.socket(family, socket.SOCK_STREAM) for family, _ in binds]
    try:
        for sock, (_, host) in zip(socks, binds, strict=True):
            sock.bind((host, 0))
            sock.listen()
        ports = {sock.getsockname()[1]: host for sock, (_, host) in zip(socks, binds, strict=True)}
        seen = {port: (ip, is_loopback(ip)) for _, _, ip, port in listening([os.getpid()]) if port in ports}
        assert seen == {port: (host, host in ("127.0.0.1", "::1")) for port, host in ports.items()}
    finally:
        for sock in socks:
            sock.close()
    assert is_loopback("::ffff:127.0.0.1") and not is_loopback("::ffff:192.0.2.2")


def test_the_private_ray_instance_listens_on_loopback_only(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # the actor waits at its first predict until the gate opens
    gate.mkdir()
    # Ray's ray.init() would join the cluster named here (or the last `ray start` on this machine):
    # the private instance must not (nothing listens on the discard port; joining it would fail the run).
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:9")
    log = tmp_path / "eval.log"
    command = [ROBOFOLLOW, "eval", "--backend", "ray", "--workers", "1", "--tasks", TASK, "--rounds", "1",
               "--max-steps", str(SHORT.max_steps), "--actions-per-step", str(SHORT.actions_per_step), "--no-render",
               "--policy", GATED, "--kwargs", json.dumps({"gate": str(gate), "inner": "oracle"}),
               "--output", str(tmp_path / "ray")]
    with log.open("w") as out:
        evaluator = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        held = poll_until(lambda: any(gate.glob("*.waiting")) or evaluator.poll() is not None, 300)
        assert held and evaluator.poll() is None, log.read_text()
        actor = int(next(gate.glob("*.waiting")).stem)
        ray_pids = [pid for pid in descendants(evaluator.pid) if pid != evaluator.pid]
        sockets = listening([evaluator.pid, *ray_pids])
        (gate / "open").touch()
        assert evaluator.wait(300) == 0, log.read_text()
    finally:
        if evaluator.poll() is None:
            evaluator.kill()
            evaluator.wait()
        with suppress(ProcessLookupError):  # whatever of our run is left (the evaluator led its own session)
            os.killpg(evaluator.pid, signal.SIGKILL)

    table = "\n".join(f"{name}[{pid}] {ip}:{port}" for pid, name, ip, port in sockets)
    assert [s for s in sockets if not is_loopback(s[2])] == [], f"listening beyond loopback:\n{table}"
    # what was read is the instance: GCS, raylet, the actor and the evaluator's own worker all listen
    listeners = {name for _, name, _, _ in sockets} | {"actor" for pid, *_ in sockets if pid == actor}
    assert {"gcs_server", "raylet", "actor"} <= listeners, table
    assert any(pid == evaluator.pid for pid, *_ in sockets), table
    # the run's Ray processes end with it
    assert poll_until(lambda: not any(_alive(pid) for pid in ray_pids), 60), \
        [pid for pid in ray_pids if _alive(pid)]

    local = tmp_path / "local"
    run_evaluation(EvalConfig(policy="oracle", output=local, tasks=(TASK,), rounds=1, settings=SHORT))
    assert scored(tmp_path / "ray") == scored(local)
