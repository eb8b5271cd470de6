"""How policies travel between processes: one subfolder per wire protocol, plus what they share.

- ``common``: what every protocol shares (wire errors, size and time bounds, the error text a
  server may show a caller). See its docstring for what belongs there.
- ``sessions``, ``batching`` and ``budget``: the serving machinery every server uses (one policy
  session per connection, a timed-out one dropped; dynamic batching of a shareable policy's
  concurrent requests; one memory budget across a server's connections, charged as bytes arrive).
- ``robofollow/``: RoboFollow's TCP protocol (length-prefixed JSON). ``openpi/``: openpi's
  websocket protocol (msgpack, ALOHA observations; RoboArena's dialect in ``openpi/roboarena``).
  ``gr00t/``: Isaac-GR00T's ZMQ protocol. ``act/``: the json_numpy ``POST /act`` family (openvla-oft,
  X-VLA, GR00T's http server). ``vlaeval/``: vla-evaluation-harness model servers. ``xpolicylab/``:
  XPolicyLab's websocket (client only). Each has a ``codec``, a client (its SPEC scheme, one row in
  ``policy/remote.py``) and, where offered, a server (one row in ``cli/serve.py``'s ``SERVERS``); a new
  peer protocol gets a folder of its own beside them.

Imports point downward: a protocol folder imports ``common``, ``sessions``, ``batching``, ``budget``
and the policy core (``policy.interface``, ``policy.guard``, ``policy.observation``: every server
checks observations against the contract there), never another protocol folder, never
``policy.spec`` (spec builds clients, not the other way round), nor anything above ``policy/``.
Nothing here unpickles network data; every message size, every wait and the memory all connections
of a server hold together are bounded; a refused client always reads why before the close.
"""
