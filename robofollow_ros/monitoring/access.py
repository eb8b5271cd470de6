"""Who may control the rig through the live view: this machine, unless the operator opts in.

The Foxglove protocol has no authentication, and the live view's services include ``take_over`` and
``hand_back``, which move an arm. So the rule is by bind address: a server bound to loopback offers the
operator's services (a viewer elsewhere reaches it through ``ssh -L``); bound beyond loopback it is
read-only unless ``--foxglove-control`` (``remote_control``) says otherwise. No Foxglove import here: bringup
reads the same rule to record it in run.json.
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from this machine only: a loopback address
    (127.0.0.0/8, ``::1``) or ``localhost``. Anything else — ``0.0.0.0``, ``::``, a LAN address, another
    name — counts as beyond loopback (a name is not resolved: when in doubt, the stricter answer)."""
    text = host.strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def offers_control(host: str, remote_control: bool) -> bool:
    """Whether a server bound to ``host`` offers the operator's services: on loopback always, beyond it only
    when the operator asked for it (``--foxglove-control``)."""
    return remote_control or is_loopback(host)
