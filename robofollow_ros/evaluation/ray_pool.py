"""``--backend ray``: trials on Ray actors, each owning one ``TrialWorker`` (a SimWorld and a policy).

Ray places the actors on the cluster's nodes and carries keys out and results back; this module
only keeps every live actor busy with one trial at a time and streams results to the driver as
they finish (the driver alone writes the run directory). What it decides on top of Ray:

* An actor whose **node is lost** (removed, preempted, crashed) did nothing wrong: its trial goes
  back to the queue and runs again elsewhere (a trial is recorded only when its result arrives, so
  nothing is lost or duplicated), and a replacement actor is requested; it starts when the cluster
  has a free CPU again, so a node that joins mid-run is used too.
* An actor whose **process dies** on a live node (abort, OOM, a policy that kills its process)
  fails only that trial with the reason, as the local backend does, and is replaced.
* A trial past ``trial_deadline_s`` gets its actor killed and fails with that reason.
* The **head lost** (its GCS unreachable for ``HEAD_LOST_S``: the head crashed, or the driver's or the
  head's network is down) stops the run with :class:`RayHeadLost`, one line, before Ray's own limit ends
  the driver's process with a crash report; what was recorded stays, and ``--resume`` on any backend
  finishes the run. (Results travel from the actors straight to the driver, so a run can outlive its
  head for a while: it stops only when the head stays silent.)
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from robofollow_ros.evaluation.episode import unexecuted_result
from robofollow_ros.evaluation.selection import TrialKey
from robofollow_ros.evaluation.trial_worker import TrialOutcome, WorkerSpec, replacement
from robofollow_ros.evaluation.worker_errors import START_DIED, WorkerStartError, start_failure

#: A trial whose node is lost more often than this fails (a cluster that keeps losing nodes).
MAX_NODE_LOSSES_PER_TRIAL = 3
#: How long the run may wait with no actor able to start (no free CPU anywhere) before it stops.
START_TIMEOUT_S = 900.0
_NODE_DIED = "because its node has died"
#: A head (GCS) silent this long stops the run; below Ray's own ``gcs_rpc_server_reconnect_timeout_s`` (60 s),
#: after which Ray itself ends the driver's process with a crash report instead of one line.
HEAD_LOST_S = 20.0
#: How often (and how long at most) the driver asks the head whether it is there.
HEAD_PROBE_S = 2.0


class RayHeadLost(RuntimeError):
    """The cluster's head stopped answering: the run cannot go on (see the module docstring)."""


class TrialActor:
    """The actor class (wrapped with ``ray.remote`` at run time, so importing this needs no Ray)."""

    def __init__(self, spec: WorkerSpec) -> None:
        from robofollow_ros.evaluation.trial_worker import TrialWorker

        self.worker: Any = None
        self.error: tuple[str, str] | None = None
        try:
            self.worker = TrialWorker(spec)
        except BaseException as exc:
            self.error = start_failure(exc)

    def ready(self) -> dict[str, Any]:
        import ray

        info = self.worker.info if self.worker is not None else {}
        return {"error": self.error, "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "info": info}

    def run(self, key: TrialKey) -> TrialOutcome:
        return self.worker.run(key)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def connect(address: str | None) -> bool:
    """Join (``auto``, ``HOST:PORT``, ``ray://HOST:10001``) or, with None, start a private instance
    (:func:`start_private`); True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    options: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.WARNING, namespace="robofollow")
    if address is None:
        start_private(**options)
    else:
        ray.init(address=address, include_dashboard=False, **options)
    return True


#: Where every server of the private instance listens.
LOOPBACK = "127.0.0.1"


def start_private(**options: Any) -> None:
    """Start a Ray instance for this machine alone: every Ray process binds ``127.0.0.1``.

    Ray has no switch for this in ``ray.init``. Its C++ servers (GCS, raylet and object manager,
    every core worker) and its agents bind loopback when the node's IP is ``127.0.0.1``, and otherwise
    all interfaces (the agents: the node IP); but ``ray.init(_node_ip_address="127.0.0.1")`` and ``ray start
    --node-ip-address 127.0.0.1`` both rewrite a loopback IP to the machine's own
    (``services.resolve_ip_for_localhost``) unless Ray runs single-machine, as it does on macOS and
    Windows (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). Ray reads that variable once, when it is
    imported, into ``ray_constants.ENABLE_RAY_CLUSTER``, so the flag is cleared for this call alone:
    the node's processes get the IP on their command lines, and a later ``--ray-address`` run in this
    process still reaches other machines. ``address="local"`` starts a new instance even where
    ``RAY_ADDRESS`` or a ``ray start`` on this machine would make ``ray.init()`` join that one. No Ray
    Client server (``ray.init`` starts none) and no dashboard; its API server, which Ray starts anyway,
    binds ``dashboard_host``. If Ray comes up elsewhere all the same (a Ray that changed this), it is
    shut down and the run stops rather than serve the network.
    """
    import ipaddress

    import ray
    from ray._private import ray_constants

    cluster_mode = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", _node_ip_address=LOOPBACK, include_dashboard=False, dashboard_host=LOOPBACK,
                 **options)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
    node_ip = ray.util.get_node_ip_address()
    if not ipaddress.ip_address(node_ip).is_loopback:
        ray.shutdown()
        raise RuntimeError(f"the private Ray instance came up on {node_ip}, not {LOOPBACK}: it would listen on "
                           "every interface, so it was stopped (has Ray changed how it picks the node IP?)")


class RayPool:
    """See the module docstring; :meth:`results` yields one :class:`TrialOutcome` per key, as they finish."""

    def __init__(self, spec: WorkerSpec, workers: int, address: str | None, trial_deadline_s: float,
                 cpus_per_worker: float = 1.0) -> None:
        import ray

        self.ray = ray
        self.spec, self.workers, self.trial_deadline_s = spec, workers, trial_deadline_s
        self.cpus_per_worker = cpus_per_worker
        self._owns_ray = connect(address)
        self._cls = ray.remote(num_cpus=cpus_per_worker, max_restarts=0, max_task_retries=0)(TrialActor)
        self._starting: dict[Any, Any] = {}  # ready() ref -> actor
        self._idle: list[tuple[Any, dict[str, Any]]] = []
        self._inflight: dict[Any, tuple[Any, dict[str, Any], TrialKey, float]] = {}
        self._overdue: set[Any] = set()
        self.requeued = 0
        self.replaced = 0
        # the head to watch: a cluster joined by address (not the private instance, not Ray Client's proxy)
        self._watch_head = address is not None and not address.startswith("ray://")
        self._head_seen = self._head_probe_at = time.monotonic()
        self._head_lost = False

    def _spawn(self, replacing: bool = False) -> None:
        actor: Any = self._cls.remote(replacement(self.spec) if replacing else self.spec)
        self._starting[actor.ready.remote()] = actor

    def target_workers(self, n_keys: int) -> int:
        if self.workers > 0:
            return min(self.workers, n_keys)
        cpus = float(self.ray.cluster_resources().get("CPU", 1.0))
        return max(1, min(n_keys, int(cpus // self.cpus_per_worker)))

    def _actors(self) -> int:
        return len(self._starting) + len(self._idle) + len(self._inflight)

    def start(self, trials: int) -> dict[str, Any]:
        """Request the actors ``trials`` trials need and wait until one is ready (its policy built, a remote one
        reached); returns what it reported (``TrialWorker.info``). Before the run directory is opened: a
        policy that cannot be built fails here (``WorkerStartError``) and the run leaves nothing behind."""
        for _ in range(self.target_workers(trials) - self._actors()):
            self._spawn()
        since = time.monotonic()
        while not self._idle:
            if not self._starting:
                self._spawn(replacing=True)  # the one asked for was lost with its node
            done, _ = self.ray.wait(list(self._starting), num_returns=1, timeout=1.0)
            for ref in done:
                self._on_started(ref, self._starting.pop(ref))
            if time.monotonic() - since > START_TIMEOUT_S:
                raise WorkerStartError(START_DIED, f"no Ray worker could start within {START_TIMEOUT_S:g} s "
                                                   "(does the cluster have a free CPU for each worker?)")
        return dict(self._idle[0][1].get("info") or {})

    def running(self) -> list[tuple[TrialKey, float]]:
        """The trials under way and when each was handed to its actor (``time.monotonic``)."""
        return [(key, started) for _, _, key, started in list(self._inflight.values())]

    def results(self, keys: Sequence[TrialKey]) -> Iterator[TrialOutcome]:
        pending = collections.deque(keys)
        losses: collections.Counter[TrialKey] = collections.Counter()
        for _ in range(self.target_workers(len(pending)) - self._actors()):
            self._spawn()
        waiting_since = time.monotonic()
        while pending or self._inflight:
            self._assign_idle(pending)  # actors ready since start() get their trials at once
            refs = [*self._inflight, *self._starting]
            if not refs:
                self._spawn(replacing=True)
                continue
            done, _ = self.ray.wait(refs, num_returns=1, timeout=1.0)
            for ref in done:
                if ref in self._starting:
                    self._on_started(ref, self._starting.pop(ref))
                else:
                    yield from self._on_finished(ref, pending, losses)
            self._kill_overdue()
            self._check_head()
            self._assign_idle(pending)
            if self._inflight or not self._starting:
                waiting_since = time.monotonic()
            elif time.monotonic() - waiting_since > START_TIMEOUT_S:
                raise WorkerStartError(START_DIED, f"no Ray worker could start within {START_TIMEOUT_S:g} s "
                                                   "(does the cluster have a free CPU for each worker?)")

    def _assign_idle(self, pending: collections.deque[TrialKey]) -> None:
        while self._idle and pending:
            actor, info = self._idle.pop()
            key = pending.popleft()
            self._inflight[actor.run.remote(key)] = (actor, info, key, time.monotonic())

    def _on_started(self, ref: Any, actor: Any) -> None:
        try:
            info = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            if self._node_lost(exc, None):
                self._spawn(replacing=True)
                return
            raise WorkerStartError(START_DIED, f"a Ray worker died while starting: {_first_line(exc)}") from None
        if info["error"] is not None:
            self.ray.kill(actor)
            raise WorkerStartError(*info["error"])
        self._idle.append((actor, info))

    def _on_finished(self, ref: Any, pending: collections.deque[TrialKey],
                     losses: collections.Counter[TrialKey]) -> Iterator[TrialOutcome]:
        actor, info, key, _ = self._inflight.pop(ref)
        try:
            outcome: TrialOutcome = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self._replace(actor)
            if ref in self._overdue:
                reason = f"no result within {self.trial_deadline_s:g} s; the Ray worker was killed"
            elif self._node_lost(exc, info):
                losses[key] += 1
                if losses[key] <= MAX_NODE_LOSSES_PER_TRIAL:
                    self.requeued += 1
                    pending.appendleft(key)  # not the trial's fault: run it again on another node
                    return
                reason = f"its Ray node was lost {losses[key]} times"
            else:
                reason = f"Ray worker process died: {_death_detail(exc)}"
            yield TrialOutcome(key, unexecuted_result(_registry().eval_task(key.task_id), reason))
            return
        # any other error (a simulator or scorer bug inside the actor) propagates: the run stops
        yield outcome
        if outcome.retire:
            self._replace(actor)
        else:
            self._idle.append((actor, info))

    def _node_lost(self, exc: BaseException, info: dict[str, Any] | None) -> bool:
        if _NODE_DIED in str(exc) or isinstance(exc, self.ray.exceptions.ActorUnavailableError):
            return True
        if info is None:
            return False
        alive = {n["NodeID"]: n["Alive"] for n in self.ray.nodes()}
        return not alive.get(info["node"], False)

    def _replace(self, actor: Any) -> None:
        self.ray.kill(actor, no_restart=True)
        self.replaced += 1
        self._spawn(replacing=True)

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for ref, (actor, _, _, started) in self._inflight.items():
            if ref not in self._overdue and now - started > self.trial_deadline_s:
                self._overdue.add(ref)
                self.ray.kill(actor, no_restart=True)

    def _check_head(self) -> None:
        """Raise :class:`RayHeadLost` once the head has not answered for ``HEAD_LOST_S``."""
        if not self._watch_head or time.monotonic() < self._head_probe_at:
            return
        try:
            gcs: Any = getattr(self.ray._private.worker.global_worker, "gcs_client")  # noqa: B009 (set at connect)
            gcs.get_all_node_info(timeout=HEAD_PROBE_S)
            self._head_seen = time.monotonic()
        except Exception:  # any failure to get an answer (timeout, connection refused, ...) is silence
            silent = time.monotonic() - self._head_seen
            if silent > HEAD_LOST_S:
                self._head_lost = True
                raise RayHeadLost(f"the Ray head has not answered for {silent:.0f} s (stopped, or the network to it "
                                  "is down): the run stops; every trial recorded so far is kept, finish it with "
                                  "--resume (on any backend)") from None
        self._head_probe_at = time.monotonic() + HEAD_PROBE_S

    def close(self) -> None:
        if self._head_lost:  # killing actors or shutting down would wait on the head that is gone
            self._idle.clear()
            self._starting.clear()
            self._inflight.clear()
            return
        actors = [a for a, _ in self._idle] + list(self._starting.values()) + [v[0] for v in self._inflight.values()]
        for actor in actors:
            with contextlib.suppress(Exception):  # an actor that is already gone
                self.ray.kill(actor, no_restart=True)
        self._idle.clear()
        self._starting.clear()
        self._inflight.clear()
        if self._owns_ray:
            self._owns_ray = False  # a second close leaves Ray alone
            self.ray.shutdown()

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _death_detail(exc: BaseException) -> str:
    """The most telling line of Ray's actor-death message (its exit detail when it gives one)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "exit detail" in line.lower() or "killed" in line.lower() or "memory" in line.lower():
            return line
    return lines[-1] if lines else type(exc).__name__


def _registry() -> Any:
    from robofollow_ros.benchmark import default_registry

    return default_registry()
