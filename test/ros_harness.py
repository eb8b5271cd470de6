"""Real rclpy in tests: an isolated context, an executor thread, and condition waits with timeouts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import Executor, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from robofollow_ros.nodes._main import shutdown_executor


class RosHarness:
    """Spins the nodes it is given in a background thread; ``wait_for`` blocks until a condition holds."""

    def __init__(self, single_threaded: bool = True) -> None:
        """Spins as ``nodes._main.run_node`` does, one callback at a time, unless ``single_threaded`` is False
        (rclpy's ``MultiThreadedExecutor``, 4 threads). That executor busy-waits while a mutually exclusive
        callback group with a backlog is busy (ros2/rclpy#1223, #1452): the loop takes the GIL from the
        callback it waits for, a node flooded with messages then drains a few a second, and a CI run once saw
        no joint state reach a rate-mode policy_node for over 5 s (a stale-state fault). No node of ours
        blocks in a callback on another node's answer, so one thread serves every test."""
        self.context = Context()
        rclpy.init(context=self.context)
        self.executor: Executor = (SingleThreadedExecutor(context=self.context) if single_threaded
                                   else MultiThreadedExecutor(num_threads=4, context=self.context))
        self.nodes: list[Node] = []
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:
                if not self.context.ok():
                    break
                raise

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def node(self, name: str) -> Node:
        return self.add(rclpy.create_node(name, context=self.context))

    def notify(self) -> None:
        """Call from callbacks that change what ``wait_for`` looks at."""
        with self._changed:
            self._changed.notify_all()

    def collector(self, into: list[Any]) -> Callable[[Any], None]:
        """A subscription callback that appends the message and wakes ``wait_for``."""

        def callback(msg: Any) -> None:
            into.append(msg)
            self.notify()

        return callback

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
                self._changed.wait(min(remaining, 0.05))

    def publish_until(self, publish: Callable[[], object], predicate: Callable[[], bool], timeout: float = 10.0,
                      what: str = "condition", period: float = 0.05) -> None:
        """Publish, then wait up to ``period`` for ``predicate``; again until it holds or ``timeout`` passes.

        For a publisher whose first messages may precede discovery. The publish runs outside the condition's
        lock and at most once a period: publishing on every wake-up, under the lock that every collecting
        callback takes to notify, starves the executor (a backlog drained at a few messages a second)."""
        deadline = time.monotonic() + timeout
        while True:
            publish()
            with self._changed:
                wake = min(time.monotonic() + period, deadline)
                while not predicate():
                    remaining = wake - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                else:
                    return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")

    def call_trigger(self, client: Any, what: str, timeout: float = 10.0) -> Any:
        """Call a ``std_srvs/Trigger`` service through ``client`` (waiting for it first) and return its reply."""
        from std_srvs.srv import Trigger

        assert client.wait_for_service(timeout_sec=timeout), f"no {what} service"
        reply = client.call_async(Trigger.Request())
        self.wait_for(reply.done, timeout=timeout, what=f"the reply of {what}")
        return reply.result()

    def close(self) -> None:
        """Destroy every node even if one fails to, so no node outlives its test and talks to the next."""
        self._stop.set()  # the spin thread must not wait on entities being destroyed
        self._thread.join(timeout=5)
        shutdown_executor(self.executor, timeout_sec=5)  # and no callback may still run in the executor's pool
        errors: list[BaseException] = []
        for node in self.nodes:
            try:
                node.destroy_node()
            except Exception as exc:  # collected, re-raised once the rest are down
                errors.append(exc)
        rclpy.shutdown(context=self.context)
        if errors:
            raise errors[0]

    def __enter__(self) -> RosHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
