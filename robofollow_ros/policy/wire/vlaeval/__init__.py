"""allenai vla-evaluation-harness's model-server protocol (PyPI ``vla-eval``), both sides; see docs/protocols.md.

``codec`` (the msgpack envelope, ``__ndarray__`` arrays and ``__image__`` raw/jpeg/png images, decoded
defensively, never unpickled), ``specs`` (the DimSpec action/observation specs announced in ``hello``,
checked against ours), ``observation`` (RoboFollow ↔ vla-eval's ``images`` / ``task_description`` /
``state`` convention, the chunk back), ``client`` (the ``vla-eval://HOST:PORT`` policy) and ``server``
(``robofollow serve --protocol vla-eval``). Imports nothing of the other protocols.
"""
