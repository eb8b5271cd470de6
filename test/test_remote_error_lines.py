"""Errors name the cause (issue 36 item 5): a policy that fails behind a server reaches our clients of
every protocol with a server that sends the traceback as one line with the server's own reason, no
traceback text in it; the whole text stays on the error (``remote_traceback``, in results.json's
``policy_error`` after that line).

The servers are ours with ``debug`` on (so the reply carries a traceback, as openpi's and a --debug
server's do); the GR00T and vla-eval peers' own texts (``str(e)``, ``observation_failed: …``) are
one line already and are checked in their protocol files."""

from __future__ import annotations

from typing import Any

import pytest

from robofollow_ros.policy.drills.scripted import FaultyPolicy, make_observation
from robofollow_ros.policy.spec import load_policy
from robofollow_ros.policy.wire.act.server import ActPolicyServer
from robofollow_ros.policy.wire.common import RemotePolicyError, server_reason
from robofollow_ros.policy.wire.gr00t.server import Gr00tPolicyServer
from robofollow_ros.policy.wire.robofollow.server import RoboFollowTcpServer
from robofollow_ros.policy.wire.vlaeval.server import VlaEvalPolicyServer

pytestmark = pytest.mark.timeout(120)
REASON = "drill: the model failed on purpose"  # FaultyPolicy("raise")


@pytest.mark.parametrize(("server_class", "scheme", "traced"), [
    (RoboFollowTcpServer, "tcp", True), (Gr00tPolicyServer, "gr00t", True), (ActPolicyServer, "act+http", True),
    (VlaEvalPolicyServer, "vla-eval", False)], ids=["tcp", "gr00t", "act", "vla-eval"])
def test_a_failing_policy_is_one_line_with_the_servers_reason(server_class: Any, scheme: str, traced: bool) -> None:
    """``traced``: the server's reply carries a traceback (vla-eval's protocol has an error text only)."""
    with server_class(lambda: FaultyPolicy("raise"), port=0, debug=True).start() as server:
        port = server.address[1]
        policy = load_policy(f"{scheme}://127.0.0.1:{port}", {"timeout_s": 20})
        try:
            policy.reset()
            policy.set_instruction("pick up the cube")
            with pytest.raises(RemotePolicyError) as info:
                policy.predict(make_observation())
        finally:
            policy.close()
    line = str(info.value).splitlines()[0]  # what the console prints (runner: policy_error's first line)
    assert line == info.value.remote_error and REASON in line and f"127.0.0.1:{port}" in line, line
    assert "Traceback" not in line and 'File "' not in line, line
    # the server's whole text is kept where the line left some out (its traceback); else the line is all of it
    assert ("Traceback (most recent call last)" in info.value.remote_traceback) is traced
    assert REASON in info.value.remote_traceback if traced else info.value.remote_traceback == ""


def test_server_reason_reads_tracebacks_and_joins_other_text() -> None:
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\nValueError: bad frame\n'
    assert server_reason(trace) == "ValueError: bad frame"  # openpi: traceback.format_exc()
    assert server_reason(f"PolicyError: on fire\n{trace}") == "PolicyError: on fire"  # ours with --debug
    assert server_reason("CUDA out of memory\n  at line 3") == "CUDA out of memory at line 3"
    assert server_reason("") == "(no reason given)" and len(server_reason("x" * 900)) == 300
