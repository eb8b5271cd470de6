"""How policies travel between processes: one subfolder per wire protocol, plus what they share.

- ``common``: what every protocol shares (wire errors, size and time bounds, the error text a
  server may show a caller). See its docstring for what belongs there.
- ``sessions``, ``batching`` and ``budget``: the serving machinery every server uses (one policy
  session per connection, a timed-out one dropped; dynamic batching of a shareable policy's
  concurrent requests; one memory budget across a server's connections, charged as bytes arrive).
- ``robofollow/``: RoboFollow's TCP protocol (length-prefixed JSON). ``openpi/``: openpi's
  websocket protocol (msgpack, ALOHA observations). Each has ``codec``, a client (``tcp://`` or
  ``openpi://`` SPECs) and a server (``robofollow serve --protocol``); a new peer protocol gets a
  folder of its own beside them.

Imports point downward: a protocol folder imports ``common``, ``sessions``, ``batching``, ``budget``
and the policy core (``policy.interface``, ``policy.guard``, ``policy.observation``: every server
checks observations against the contract there), never another protocol folder, never
``policy.spec`` (spec builds clients, not the other way round), nor anything above ``policy/``.
Nothing here unpickles network data; every message size, every wait and the memory all connections
of a server hold together are bounded; a refused client always reads why before the close.
"""
