"""A learned baseline: language-conditioned visuomotor behaviour cloning with action chunking.

``data`` loads a LeRobot v3.0 dataset into arrays; ``text`` turns an instruction into hashed word
and bigram ids; ``model`` is the network (a small CNN over the three cameras, FiLM-conditioned on
the instruction, spatial-softmax keypoints, an MLP head predicting a chunk of future joint targets);
``train`` fits it on the CPU; ``checkpoint`` saves and validates; ``policy`` serves it as
``learned:CKPT`` through the ordinary Policy interface. torch is imported only here.
"""
