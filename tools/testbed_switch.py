#!/usr/bin/env python3
"""The test bed's switch (tools/testbed.sh): a learning Ethernet switch in user space whose ports are TAP
devices, one per host namespace, with per-port delay, jitter, loss and link state.

Why not a kernel bridge and ``tc netem``: kernels built without ``sch_netem`` (this project's CI VM has
only ``htb``, no classifiers, no actions) cannot delay or drop, and a test bed that cannot make a link
slow or lossy is no test bed. TAP devices need only ``/dev/net/tun``. Standard library only (runs on the
system ``python3``), no network of its own: it lives in the bed's switch namespace and only moves frames
between the bed's hosts.

Semantics per port I (host I's cable): ``delay`` and ``jitter`` (ms) are one way and apply to frames
the host sends and frames it receives (so host-to-clean-host RTT = 2 x delay +- 2 x jitter); ``loss``
(%) drops that share of the frames in each direction. Jitter never reorders a link's frames (a frame
leaves no earlier than the one before it on the same pair of ports), as on a real cable; TCP would
otherwise see reordering no real link shows. A port that is down drops everything and the host's
interface loses its carrier, as when a cable is pulled.

Control: a Unix socket ``STATE/switch.sock``; one line per connection, answered ``ok`` or ``error ...``:
``shape I DELAY JITTER LOSS``, ``link I up|down``, ``ping``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import heapq
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

TUNSETIFF = 0x400454CA
TUNSETCARRIER = 0x400454E2
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
#: Large frames: fewer of them for this process to move on shared CPUs (the hosts' TCP fills them).
MTU = 65000
MAX_QUEUED = 20000  # frames in flight through the switch; past it new frames are dropped (a full buffer)


@dataclass
class Port:
    fd: int
    delay: float = 0.0  # seconds, one way
    jitter: float = 0.0
    loss: float = 0.0  # probability per direction
    up: bool = True


def open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def set_carrier(port: Port, on: bool) -> None:
    with contextlib.suppress(OSError):  # older kernels: the port still drops everything
        fcntl.ioctl(port.fd, TUNSETCARRIER, struct.pack("i", 1 if on else 0))


class Switch:
    def __init__(self, ports: dict[int, Port], seed: int) -> None:
        self.ports = ports
        self.by_fd = {p.fd: i for i, p in ports.items()}
        self.macs: dict[bytes, int] = {}
        self.queue: list[tuple[float, int, int, bytes]] = []
        self.last_due: dict[tuple[int, int], float] = {}
        self.seq = 0
        self.rng = random.Random(seed)

    def _jitter(self, port: Port) -> float:
        return self.rng.uniform(-port.jitter, port.jitter) if port.jitter else 0.0

    def receive(self, src: int, frame: bytes, now: float) -> None:
        if len(frame) < 14:
            return
        sport = self.ports[src]
        if not sport.up:
            return
        dst_mac, src_mac = frame[:6], frame[6:12]
        if not src_mac[0] & 1:
            self.macs[src_mac] = src
        known = self.macs.get(dst_mac)
        targets = [known] if known is not None and known != src else [i for i in self.ports if i != src]
        for dst in targets:
            dport = self.ports[dst]
            if not dport.up or (sport.loss and self.rng.random() < sport.loss) \
                    or (dport.loss and self.rng.random() < dport.loss):
                continue
            delay = max(0.0, sport.delay + dport.delay + self._jitter(sport) + self._jitter(dport))
            due = max(now + delay, self.last_due.get((src, dst), 0.0))
            self.last_due[(src, dst)] = due
            if len(self.queue) < MAX_QUEUED:
                self.seq += 1
                heapq.heappush(self.queue, (due, self.seq, dst, frame))

    def deliver(self, now: float) -> None:
        while self.queue and self.queue[0][0] <= now:
            _, _, dst, frame = heapq.heappop(self.queue)
            port = self.ports[dst]
            if port.up:
                with contextlib.suppress(BlockingIOError, OSError):  # a full or vanished host queue drops it
                    os.write(port.fd, frame)

    def control(self, line: str) -> str:
        words = line.split()
        try:
            if words == ["ping"]:
                return "ok"
            if len(words) == 5 and words[0] == "shape":
                port = self.ports[int(words[1])]
                port.delay, port.jitter = float(words[2]) / 1000, float(words[3]) / 1000
                port.loss = float(words[4]) / 100
                return "ok"
            if len(words) == 3 and words[0] == "link" and words[2] in ("up", "down"):
                port = self.ports[int(words[1])]
                port.up = words[2] == "up"
                set_carrier(port, port.up)
                if not port.up:  # what was on the wire to or from it is gone
                    self.queue = [q for q in self.queue if q[2] != int(words[1])]
                    heapq.heapify(self.queue)
                return "ok"
        except (KeyError, ValueError) as exc:
            return f"error {exc!r} in {line!r}"
        return f"error unknown command {line!r}"

    def serve(self, control: socket.socket) -> None:
        fds = [*self.by_fd, control.fileno()]
        while True:
            now = time.monotonic()
            timeout = max(0.0, self.queue[0][0] - now) if self.queue else 1.0
            readable, _, _ = select.select(fds, [], [], timeout)
            now = time.monotonic()
            for fd in readable:
                if fd == control.fileno():
                    self._answer(control)
                    continue
                for _ in range(256):  # bounded, so one busy host cannot starve the others
                    try:
                        frame = os.read(fd, MTU + 64)
                    except BlockingIOError:
                        break
                    self.receive(self.by_fd[fd], frame, now)
            self.deliver(time.monotonic())

    def _answer(self, control: socket.socket) -> None:
        conn, _ = control.accept()
        with conn:
            conn.settimeout(2.0)
            with contextlib.suppress(OSError):
                line = conn.recv(256).decode(errors="replace").strip()
                conn.sendall((self.control(line) + "\n").encode())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ports: dict[int, Port] = {}
    for i in range(1, args.hosts + 1):
        tap = f"tap{i}"
        ports[i] = Port(open_tap(tap))
        # the fd stays attached when the device moves: the host sees it as its eth0
        subprocess.run(["ip", "link", "set", "dev", tap, "mtu", str(MTU), "netns", f"{args.prefix}-h{i}"],
                       check=True)
        subprocess.run(["ip", "-n", f"{args.prefix}-h{i}", "link", "set", "dev", tap, "name", "eth0"], check=True)
    path = os.path.join(args.state, "switch.sock")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    control.bind(path + ".tmp")
    control.listen(8)
    os.rename(path + ".tmp", path)  # appears only when every port exists: testbed.sh waits for it
    Switch(ports, args.seed).serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
