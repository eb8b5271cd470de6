"""Drills: policies that exist to exercise a serving stack end to end, never to be scored.

``scripted`` (record calls, fail in a chosen way, die, wait at a gate; the synthetic observation
they are fed), ``echo`` (chunks that encode the instruction and step, so crossed sessions
show) and ``spy`` (writes down every key path of every observation it is handed, so the
observation contract can be checked on every path). Named as ``module:function`` SPECs, e.g.
``robofollow_ros.policy.drills.scripted:faulty``.

A folder of their own rather than a place among the baselines: a baseline's score means something
(``hold``, ``memorizer`` and ``blind`` appear in results), a drill's never does, and some drills
abort, SIGKILL or exhaust their own process on purpose; they must not be mistaken for a policy to
evaluate. May import the policy core, ``policy.spec`` (a gate wraps another SPEC) and
``baselines.hold``; nothing imports the drills but tests, benches and users.
"""
