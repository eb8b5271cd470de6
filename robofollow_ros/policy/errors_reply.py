"""How servers describe a failure to the caller without leaking their internals.

Both protocols need the same rule (issue 6): the caller always gets the exception's type and
message; the full server traceback only when the operator started the server with ``--debug``.
"""

from __future__ import annotations

import traceback

DEBUG_HINT = "full traceback withheld; start the server with --debug to include it"


def describe_error(exc: BaseException, debug: bool) -> tuple[str, str]:
    """``(error, traceback)`` for an error reply. The traceback is one line unless ``debug``."""
    error = str(exc) or type(exc).__name__
    if debug:
        return error, "".join(traceback.format_exception(exc))
    return error, f"{type(exc).__name__}: {error} ({DEBUG_HINT})"
