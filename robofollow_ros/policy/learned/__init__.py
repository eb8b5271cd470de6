"""The learned policy family: ``learned:CKPT``, a language-conditioned visuomotor chunk policy
trained by ``robofollow train``. See docs/learning.md.

Everything a checkpoint needs at run time lives here, as LeRobot keeps its models under
``policies/``: ``model`` (the network), ``checkpoint`` (the file format: saved, loaded with
``weights_only=True``, validated), ``text`` (instructions as hashed word and bigram ids),
``scaling`` (image scaling and the state/offset ``Normaliser``) and ``policy`` (``LearnedPolicy``
behind the ordinary Policy interface). Training (``robofollow_ros.learning``) imports these; nothing
here imports training, datasets or anything above ``policy/``.

torch is imported by ``model``, ``checkpoint`` and ``scaling`` and, lazily, by ``policy``; this
package's face imports nothing, so naming ``learned:CKPT`` costs torch only when the policy is built.
"""
