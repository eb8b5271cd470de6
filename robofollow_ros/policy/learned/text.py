"""Instructions as hashed bags of words and word bigrams: no vocabulary file, no downloads.

The hash is MD5-based (stable across processes and machines, unlike Python's salted ``hash``), so
a checkpoint keeps meaning the same ids wherever it is loaded. Unseen words still get ids: the
model simply never learned them, which is part of what the benchmark's L2/L3 wording probes.
"""

from __future__ import annotations

import hashlib
import re
from itertools import pairwise

DEFAULT_BUCKETS = 4096
MAX_TOKENS = 64


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _bucket(token: str, buckets: int) -> int:
    return int(hashlib.md5(token.encode("utf-8")).hexdigest()[:8], 16) % (buckets - 1) + 1  # 0 = padding


def token_ids(text: str, buckets: int = DEFAULT_BUCKETS, max_tokens: int = MAX_TOKENS) -> list[int]:
    """Ids of the words and adjacent word pairs of ``text``, padded with 0 to ``max_tokens``."""
    ws = words(text)
    tokens = [f"w:{w}" for w in ws] + [f"b:{a}_{b}" for a, b in pairwise(ws)]
    ids = [_bucket(t, buckets) for t in tokens][:max_tokens]
    return ids + [0] * (max_tokens - len(ids))
