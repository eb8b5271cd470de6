"""The chat-model adapter against a real OpenAI-compatible HTTP server on loopback.

The server speaks POST /v1/chat/completions, reads the anchor id and instruction out of the prompt,
and answers from the reference decider, except for scripted replies (prose, wrong ids, fenced JSON,
HTTP errors) that the reader of replies and the evaluator must handle.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from robofollow_ros.cli import main
from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.deciders import ReferenceDecider
from robofollow_ros.decisions.generator import Suite
from robofollow_ros.decisions.suite_io import write_suite


class ChatServer:
    """A minimal chat-completions server; ``script`` maps an instruction to a fixed reply or HTTP status."""

    def __init__(self, anchors: dict[str, Anchor]) -> None:
        self.anchors = anchors
        self.script: dict[tuple[str, str], str | int] = {}  # (anchor id, instruction) -> reply
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                reply = server.answer(body) if self.path == "/v1/chat/completions" else 404
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.end_headers()
                    return
                payload = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"], "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> str | int:
        prompt = body["messages"][-1]["content"]
        anchor_id = re.search(r"^Table state (\S+)\.", prompt, re.M).group(1)  # type: ignore[union-attr]
        instruction = re.search(r"^Instruction: (.+)$", prompt, re.M).group(1)  # type: ignore[union-attr]
        if (anchor_id, instruction) in self.script:
            return self.script[(anchor_id, instruction)]
        decision = ReferenceDecider().decide(self.anchors[anchor_id], instruction).decision
        return json.dumps({"decision": list(decision or ())})


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory: pytest.TempPathFactory, owda_suite_seed0: Suite) -> tuple[Suite, Path]:
    """Two compositional families with their constituents, plus one atomic family per operator."""
    full = owda_suite_seed0
    by_id = {f.family_id: f for f in full.families}
    comps = [f for f in full.families if f.kind == "compositional"][:2]
    keep = {c for f in comps for c in f.constituents} | {f.family_id for f in comps}
    for op in ("N", "E", "Q", "T"):
        keep.add(next(f.family_id for f in full.families if f.ops == (op,)))
    families = tuple(f for f in full.families if f.family_id in keep)
    used = {f.anchor_id for f in families}
    suite = Suite(0, tuple(a for a in full.anchors if a.anchor_id in used), families)
    assert all(c in by_id for f in comps for c in f.constituents)
    out = tmp_path_factory.mktemp("small")
    write_suite(suite, out)
    return suite, out


@pytest.fixture()
def server(small_suite: tuple[Suite, Path]) -> Iterator[ChatServer]:
    srv = ChatServer({a.anchor_id: a for a in small_suite[0].anchors})
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(timeout=10)


def _eval(server: ChatServer, suite_dir: Path, out: Path) -> int:
    return main(["owda", "eval", "--suite", str(suite_dir), "--model", f"openai:{server.url}?model=qwen-test",
                 "--output", str(out), "--timeout", "10"])


def test_requests_follow_the_protocol_and_correct_answers_score_one(
        server: ChatServer, small_suite: tuple[Suite, Path], tmp_path: Path) -> None:
    suite, suite_dir = small_suite
    assert _eval(server, suite_dir, tmp_path) == 0
    n = sum(len(f.instances) for f in suite.families)
    assert len(server.requests) == n
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions"
    body = first["body"]
    assert body["model"] == "qwen-test" and body["temperature"] == 0 and body["max_tokens"] == 512
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    inst = suite.families[0].instances[0]
    anchor = next(a for a in suite.anchors if a.anchor_id == suite.families[0].anchor_id)
    prompt = body["messages"][1]["content"]
    assert f"Instruction: {inst.text}" in prompt and all(c in prompt for c in anchor.candidate_ids)
    metrics = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert metrics["atomic_accuracy"]["value"] == 1.0 and metrics["compositional_accuracy"]["value"] == 1.0
    assert metrics["conditional_composition_success"]["value"] == 1.0
    # a second run resumes: every instance is already in predictions.jsonl, nothing is asked again
    assert _eval(server, suite_dir, tmp_path) == 0
    assert len(server.requests) == n


def test_replies_are_read_as_leniently_as_the_benchmark_and_no_more(
        server: ChatServer, small_suite: tuple[Suite, Path], tmp_path: Path) -> None:
    suite, suite_dir = small_suite
    atomic = [f for f in suite.families if f.kind == "atomic"]
    anchors = {a.anchor_id: a for a in suite.anchors}
    gold = atomic[0].instances[0].decision
    other = next(c for c in anchors[atomic[0].anchor_id].candidate_ids if c not in gold)
    a0, a1 = atomic[0].anchor_id, atomic[1].anchor_id
    gold1 = list(atomic[1].instances[1].decision)
    server.script.update({
        # the first JSON object, with prose around it, maps onto the decision: right
        (a0, atomic[0].instances[0].text): f"Sure. {json.dumps({'decision': list(gold)})} These are the ones.",
        (a0, atomic[0].instances[1].text): json.dumps({"decision": [*gold, "no_such_object"]}),  # invalid decision
        (a0, atomic[0].instances[2].text): "I would pick them all.",  # format failure: no JSON object
        (a0, atomic[0].instances[3].text): json.dumps({"decision": [other]}),  # well-formed but wrong
        (a1, atomic[1].instances[0].text): "```json\n" + json.dumps({"decision": list(atomic[1].instances[0].decision),
                                                                     "confidence": 0.9}) + "\n```",
        # the first object has no decision; a later one does not count
        (a1, atomic[1].instances[1].text): json.dumps({"reasoning": "..."}) + " " + json.dumps({"decision": gold1}),
    })
    assert _eval(server, suite_dir, tmp_path) == 0
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "predictions.jsonl").read_text().splitlines())}
    got = [(rows[i.instance_id]["correct"], rows[i.instance_id]["status"]) for i in atomic[0].instances]
    assert got == [(True, "ok"), (False, "invalid_decision"), (False, "format_failure"), (False, "ok")]
    assert rows[atomic[1].instances[0].instance_id]["correct"] is True
    assert rows[atomic[1].instances[1].instance_id]["status"] == "format_failure"
    n_atomic = 4 * len(atomic)
    metrics = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert metrics["atomic_accuracy"]["value"] == pytest.approx((n_atomic - 4) / n_atomic)
    n = sum(len(f.instances) for f in suite.families)
    assert metrics["answers"] == {"ok": n - 3, "format_failure": 2, "invalid_decision": 1, "missing": 0}
    assert metrics["decision_invariance"]["value"] < 1.0


def test_transport_failures_stop_the_run_with_a_clear_error(server: ChatServer, small_suite: tuple[Suite, Path],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, suite_dir = small_suite
    third = (suite.families[0].anchor_id, suite.families[0].instances[2].text)
    server.script[third] = 500
    assert _eval(server, suite_dir, tmp_path) == 3  # EXIT_TRIALS_FAILED: some answers came, then the endpoint failed
    assert "HTTP 500" in capsys.readouterr().err
    kept = (tmp_path / "predictions.jsonl").read_text().splitlines()
    assert len(kept) == 2  # what was answered before the failure is kept for the resumed run
    del server.script[third]
    assert _eval(server, suite_dir, tmp_path) == 0
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"]["atomic_accuracy"]["value"] == 1.0
    server.httpd.shutdown()
    server.httpd.server_close()
    assert _eval(server, suite_dir, tmp_path / "again") == 4  # EXIT_POLICY_UNREACHABLE: nothing was answered
    assert "endpoint http://127.0.0.1" in capsys.readouterr().err
