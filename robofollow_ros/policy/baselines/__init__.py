"""Baselines: the reference points a model's score is read against. See docs/oracle.md.

``hold`` (the robot asks every joint to stay put: the floor, and the plumbing smoke test) and
``mirage`` (``memorizer``, which hears the words but never looks, and ``blind``, which looks but
never listens; both act through the expert's planner). All are built-in SPECs (``policy.spec``).

May import the policy core and ``policy.expert``; never ``policy.spec``, ``wire``, ``drills`` or
anything above ``policy/``.
"""
