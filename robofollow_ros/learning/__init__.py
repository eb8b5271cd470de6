"""Training the learned baseline (``robofollow train``): behaviour cloning with action chunking.

``batches`` turns a loaded LeRobot v3.0 dataset (``datasets.reader``) into random mini-batches of
(three images, instruction ids, state) → normalised action chunk; ``train`` fits the network on the
CPU, resumable and seeded. The network, the checkpoint format, the text ids, the scaling and the
policy that serves a checkpoint as ``learned:CKPT`` live in ``policy/learned/``: training imports
them from there, and nothing in ``policy/`` imports this package. torch is imported only here and
in ``policy/learned/``.
"""
