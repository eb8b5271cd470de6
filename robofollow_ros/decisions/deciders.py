"""Decision models: the rule-based reference decider, operator-ablated deciders, chat endpoints, user factories.

SPEC strings (``robofollow owda eval --model SPEC``):
  ``reference``              parse the instruction with the template grammar and solve it exactly
  ``ignore:OP``              the same, but drop every OP constraint (N, E, Q or T) before solving; a
                              diagnostic that must lose accuracy exactly on tasks that use OP
  ``openai:URL?model=NAME``  an OpenAI-compatible /v1/chat/completions server at URL (vLLM, llama.cpp
                              server, Ollama), e.g. ``openai:http://127.0.0.1:8000/v1?model=qwen2.5-7b``;
                              the API key, if any, comes from the environment variable OPENAI_API_KEY
  ``module:function``        a Python factory called with ``--model-kwargs`` that returns a decider
                              (``interface.UserDecider``), found as ``robofollow eval``'s policies are
                              (``user_decider``); ``ignore:`` and ``openai:`` are the built-ins' prefixes

The interface every decider speaks, and what it may see, is in ``interface``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from robofollow_ros.decisions.anchors import Anchor
from robofollow_ros.decisions.chat_client import ChatClient
from robofollow_ros.decisions.errors import OwdaError
from robofollow_ros.decisions.interface import Answer, Decider
from robofollow_ros.decisions.language import parse
from robofollow_ros.decisions.prompt import SYSTEM_PROMPT, read_reply, user_prompt
from robofollow_ros.decisions.solver import OPS, TaskSpec, solve
from robofollow_ros.decisions.user_decider import is_factory_spec, load_factory_decider

#: Every ``--model`` form, for ``--help`` and error messages.
MODEL_FORMS = "reference, ignore:N|E|Q|T, openai:URL?model=NAME, module:function"


class ReferenceDecider:
    """Reads the instruction back through the template grammar and solves it; ``ignore`` drops one operator."""

    def __init__(self, ignore: str | None = None) -> None:
        self.ignore = ignore
        self.name = f"ignore:{ignore}" if ignore else "reference"

    def decide(self, anchor: Anchor, instruction: str) -> Answer:
        try:
            spec = parse(anchor, instruction)
            if self.ignore:
                spec = TaskSpec(spec.scope, tuple(c for c in spec.constraints if c.op != self.ignore))
            decision = solve(anchor, spec)
        except OwdaError as exc:
            return Answer(f"error: {exc}", None, "invalid_decision")
        return Answer(" ".join(decision), decision)


class ChatDecider:
    """A model behind an OpenAI-compatible chat endpoint; a reply that maps onto no decision is wrong."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.name = f"openai:{client.base_url}?model={client.model}"

    def decide(self, anchor: Anchor, instruction: str) -> Answer:
        reply = self.client.complete(SYSTEM_PROMPT, user_prompt(anchor, instruction))
        reading = read_reply(anchor, reply)
        return Answer(reply, reading.decision, reading.status)


def load_decider(spec: str, timeout_s: float = 120.0, kwargs: Mapping[str, Any] | None = None) -> Decider:
    """A decider from its SPEC string; ``OwdaError`` names the field and value on a bad spec.

    ``kwargs`` (``--model-kwargs``) go to a ``module:function`` factory; the built-ins take none.
    ``timeout_s`` bounds each request of a chat endpoint and each ``decide`` call of a factory's decider.
    """
    if kwargs and (spec == "reference" or spec.startswith(("ignore:", "openai:"))):
        raise OwdaError(f"--model-kwargs: {sorted(kwargs)} apply only to a module:function factory, not {spec!r}")
    if spec == "reference":
        return ReferenceDecider()
    if spec.startswith("ignore:"):
        op = spec.split(":", 1)[1]
        if op not in OPS:
            raise OwdaError(f"model: ignore:OP needs OP in {list(OPS)}, got {op!r}")
        return ReferenceDecider(ignore=op)
    if spec.startswith("openai:"):
        url = urlsplit(spec.split(":", 1)[1])
        if url.scheme not in ("http", "https") or not url.netloc:
            raise OwdaError(f"model: openai:URL needs an http(s) URL, got {spec!r}")
        model = parse_qs(url.query).get("model", [""])[0]
        if not model:
            raise OwdaError(f"model: openai:URL needs ?model=NAME, got {spec!r}")
        base = urlunsplit((url.scheme, url.netloc, url.path.rstrip("/"), "", ""))
        return ChatDecider(ChatClient(base, model, api_key=os.environ.get("OPENAI_API_KEY"), timeout_s=timeout_s))
    if is_factory_spec(spec):
        return load_factory_decider(spec, kwargs, timeout_s)
    raise OwdaError(f"model: unknown SPEC {spec!r}; expected one of {MODEL_FORMS}")
