"""A TEST DOUBLE of the json_numpy ``POST /act`` peers, written from their code's facts (not their code).

openvla-oft ``vla-scripts/deploy.py``: FastAPI ``POST /act``; a body ``{"encoded": text}`` (alone) is
opened with ``json.loads`` and the reply is then ``JSONResponse(json_numpy.dumps(action))`` (a JSON
string); otherwise the reply is the action itself, json_numpy-encoded; *any* exception answers the
string ``"error"`` with HTTP 200. X-VLA answers errors with HTTP 400 ``{"error": ...}``; GR00T's
``http_server.py`` takes ``{"observation": {...}}`` and answers a dict of ``tolist()`` arrays. The
codec is the peers' own: ``json_numpy`` from PyPI. What each test wants the peer to do is the
``respond`` callable: ``respond(payload) -> (status, value)``; it may raise (→ ``"error"``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import json_numpy

Respond = Callable[[dict[str, Any]], tuple[int, Any]]


class StubActServer:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.requests: list[tuple[dict[str, Any], bool, dict[str, str]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    payload = json_numpy.loads(raw)
                    double_encode = "encoded" in payload
                    if double_encode:
                        assert len(payload.keys()) == 1, "Only uses encoded payload!"
                        payload = json_numpy.loads(payload["encoded"])
                    stub.requests.append((payload, double_encode, dict(self.headers)))
                    status, value = stub.respond(payload)
                    text = json.dumps(json_numpy.dumps(value)) if double_encode and status == 200 \
                        else json_numpy.dumps(value)
                except Exception:  # deploy.py: a bare except answering "error"
                    status, text = 200, json.dumps("error")
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> StubActServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
