"""A minimal client for OpenAI-compatible ``POST {base}/chat/completions`` (stdlib only).

Greedy decoding as the benchmark prescribes: temperature 0, top_p 1, one choice, at most 512 new
tokens. A transport failure (no server, HTTP error, malformed envelope) is not a model answer: it
raises ``ChatError`` so an evaluation stops rather than scoring the outage as wrong answers.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from robofollow_ros.decisions.errors import ModelError

MAX_NEW_TOKENS = 512


class ChatError(ModelError):
    """The endpoint could not be reached or did not speak the chat-completions protocol."""


class ChatClient:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s

    def request_body(self, system: str, user: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "top_p": 1,
            "n": 1,
            "max_tokens": MAX_NEW_TOKENS,
            "stream": False,
        }

    def complete(self, system: str, user: str) -> str:
        """The assistant message's content."""
        data = json.dumps(self.request_body(system, user)).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            raise ChatError(f"endpoint {self.base_url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ChatError(f"endpoint {self.base_url}: {getattr(exc, 'reason', exc)}") from None
        try:
            envelope = json.loads(body)
            content = envelope["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise ChatError(f"endpoint {self.base_url}: reply is not a chat completion: {body[:200]!r}") from None
        return content if isinstance(content, str) else ""
