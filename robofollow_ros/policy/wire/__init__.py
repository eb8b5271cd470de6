"""How policies travel between processes: one subfolder per wire protocol, plus what they share.

- ``common``: what every protocol shares (wire errors, size and time bounds, the error text a
  server may show a caller). See its docstring for what belongs there.
- ``sessions`` and ``batching``: the serving machinery every server uses (one policy session per
  connection; dynamic batching of a shareable policy's concurrent requests).
- ``robofollow/``: RoboFollow's TCP protocol (length-prefixed JSON). ``openpi/``: openpi's
  websocket protocol (msgpack, ALOHA observations). Each has ``codec``, a client (``tcp://`` or
  ``openpi://`` SPECs) and a server (``robofollow serve --protocol``); a new peer protocol gets a
  folder of its own beside them.

Imports point downward: a protocol folder imports ``common``, ``sessions``, ``batching`` and the
policy core (``policy.interface``, ``policy.guard``), never another protocol folder, never
``policy.spec`` (spec builds clients, not the other way round), nor anything above ``policy/``.
Nothing here unpickles network data; every message size and every wait is bounded.
"""
