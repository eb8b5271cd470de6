"""Remote policy SPECs, ``SCHEME://HOST:PORT[/PATH][?KEY=VALUE&...]``: the one table of wire clients.

Every peer protocol the bridge speaks is one row of :data:`REMOTE_CLIENTS`: the SPEC scheme, the
client class that speaks it (imported only when a policy is built), whether it can carry privileged
state, and whether the URL may hold a path and query options. ``spec.load_policy`` builds clients
from it, ``guard`` and ``preflight`` recognise remote SPECs by it, ``factory_of`` names the client in
run.json. A new protocol adds a row here and a folder under ``wire/``; nothing else branches on
scheme names.

Query options reach the client as keyword arguments (strings, as a URL holds them; the client
converts and checks them) and ``--kwargs`` adds to them; a key given both ways is refused, so a run
never says two things about one setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl


@dataclass(frozen=True)
class RemoteClient:
    """One wire protocol's client: ``factory`` (``module:Class``) is called with ``host``, ``port``, the
    URL's ``path`` and query options when ``url_options``, and the user's kwargs."""

    factory: str
    what: str
    carries_privileged: bool = False
    url_options: bool = False
    #: The request holds camera images: an evaluation without rendering (``--no-render``) is refused at start.
    needs_images: bool = False


#: scheme → client. Order is the order ``--help`` lists them in.
REMOTE_CLIENTS: dict[str, RemoteClient] = {
    "tcp": RemoteClient("robofollow_ros.policy.wire.robofollow.client:RoboFollowTcpPolicy",
                        "RoboFollow's TCP protocol (robofollow serve, the official serve.py)", carries_privileged=True),
    "openpi": RemoteClient("robofollow_ros.policy.wire.openpi.client:OpenpiWebsocketPolicy",
                           "an openpi websocket policy server (pi0, pi0.5; ?dialect=roboarena for RoboArena's framing)",
                           url_options=True, needs_images=True),
    "gr00t": RemoteClient("robofollow_ros.policy.wire.gr00t.client:Gr00tZmqPolicy",
                          "an NVIDIA Isaac-GR00T ZMQ policy server (N1.5, N1.6, N1.7)", needs_images=True),
    "act+http": RemoteClient("robofollow_ros.policy.wire.act.client:ActHttpPolicy",
                             "a json_numpy POST /act server (openvla-oft, X-VLA, GR00T http_server; ?preset=...)",
                             url_options=True),
    "vla-eval": RemoteClient("robofollow_ros.policy.wire.vlaeval.client:VlaEvalPolicy",
                             "a vla-evaluation-harness model server (groot, oft, pi0, starvla, xvla, lerobot...)"),
    "xpolicylab": RemoteClient("robofollow_ros.policy.wire.xpolicylab.client:XPolicyLabPolicy",
                               "XPolicyLab's websocket policy server (RoboTwin 2.0's model zoo)", url_options=True,
                               needs_images=True),
}

_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[^\]]+\]|[^:/\s?#\[\]]+):(?P<port>\d{1,5})"
                  r"(?P<path>/[^?#\s]*)?(?:\?(?P<query>[^#\s]*))?$")


class RemoteSpecError(ValueError):
    """A remote SPEC that cannot be parsed; the message names the SPEC and what is wrong."""


@dataclass(frozen=True)
class RemoteSpec:
    scheme: str
    host: str
    port: int
    path: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def client(self) -> RemoteClient:
        return REMOTE_CLIENTS[self.scheme]

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def client_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The client's keyword arguments: address, URL path and options, then ``kwargs``."""
        out: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.path:
            out["path"] = self.path
        both = sorted(set(self.options) & set(kwargs))
        if both:
            raise RemoteSpecError(f"policy spec {self.address}: {', '.join(both)} given both in the URL and in "
                                  "--kwargs; give each once")
        return {**out, **self.options, **kwargs}


def is_remote(spec: str) -> bool:
    """Whether ``spec`` names a policy behind a wire (any ``SCHEME://``), known scheme or not."""
    return isinstance(spec, str) and "://" in spec


def parse_remote(spec: str) -> RemoteSpec | None:
    """The parts of a remote SPEC; ``None`` for a local one; :class:`RemoteSpecError` for a bad one."""
    if not is_remote(spec):
        return None
    spec = spec.strip()
    match = _URL.match(spec)
    scheme = spec.split("://", 1)[0]
    if scheme not in REMOTE_CLIENTS:
        raise RemoteSpecError(f"policy spec {spec!r}: unknown scheme {scheme!r}; expected one of {forms()}")
    if match is None:
        raise RemoteSpecError(f"policy spec {spec!r}: expected {scheme}://HOST:PORT"
                              + ("[/PATH][?KEY=VALUE&...]" if REMOTE_CLIENTS[scheme].url_options else ""))
    port = int(match["port"])
    if not 0 < port < 65536:
        raise RemoteSpecError(f"policy spec {spec!r}: port {port} is outside 1..65535")
    path = match["path"] or ""
    path = "" if path == "/" else path
    query = match["query"] or ""
    client = REMOTE_CLIENTS[scheme]
    if (path or query) and not client.url_options:
        raise RemoteSpecError(f"policy spec {spec!r}: {scheme}:// takes no path or query; expected {scheme}://HOST:PORT")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise RemoteSpecError(f"policy spec {spec!r}: bad query {query!r} ({exc})") from None
    options: dict[str, str] = {}
    for key, value in pairs:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
            raise RemoteSpecError(f"policy spec {spec!r}: query key {key!r} is not an option name")
        if key in options or key in ("host", "port", "path"):
            raise RemoteSpecError(f"policy spec {spec!r}: query key {key!r} given twice or reserved")
        options[key] = value
    return RemoteSpec(scheme, match["host"].strip("[]"), port, path, options)


def forms() -> str:
    """Every remote SPEC form, for error messages and ``--help``."""
    return ", ".join(f"{scheme}://HOST:PORT" + ("[/PATH][?...]" if c.url_options else "")
                     for scheme, c in REMOTE_CLIENTS.items())
