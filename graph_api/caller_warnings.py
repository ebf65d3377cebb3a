"""Warnings of a compile told at the caller's line: ``warned_at_caller(work)`` runs ``work``,
keeps the warnings it raises, and raises them again when it is done, each once, at the first
frame outside tilefuse (the user's ``InferenceSession(...)`` or ``sess.run(...)`` line, not a
line of ``graph_api/session.py``). A category with a ``summary(warnings)`` classmethod (the
autotuner's ``MissingRecordWarning``) becomes one warning for all of its kind.

Warnings are caught with ``warnings.catch_warnings``, which is process-wide: compiles that
collect warnings take turns (a lock), and a warning another thread raises meanwhile is told
with them.

Example:
    >>> import warnings
    >>> def work():
    ...     warnings.warn("twice"); warnings.warn("twice")
    ...     return 7
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warned_at_caller(work)
    7
    >>> [(str(w.message), w.filename == __file__) for w in caught]
    [('twice', False)]
"""
from __future__ import annotations

import os
import sys
import threading
import warnings

_PACKAGES = ("tilefuse", "tilefuse.tensorir", "tilefuse.schedule", "tilefuse.graph_api", "tilefuse.autotune")
_lock = threading.RLock()


def warned_at_caller(work, *args, quiet: bool = False):
    """``work(*args)``, its warnings raised again at the caller (see the module docstring);
    ``quiet``: dropped instead.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warned_at_caller(lambda: warnings.warn("dropped"), quiet=True)
        >>> caught
        []
    """
    with _lock:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = work(*args)
    if quiet:
        return result
    by_category = {}
    for w in caught:
        by_category.setdefault(w.category, []).append(w.message)
    for category, messages in by_category.items():
        if len(messages) > 1 and hasattr(category, "summary"):
            messages = [category.summary(messages)]
        for text in dict.fromkeys(str(m) for m in messages):
            warnings.warn(text, category, stacklevel=_outside_level())
    return result


def _outside_level() -> int:
    """The ``stacklevel`` of the first frame outside tilefuse's packages, for a
    ``warnings.warn`` called from the function that calls this one."""
    roots = tuple(os.path.dirname(m.__file__) + os.sep for m in map(sys.modules.get, _PACKAGES)
                  if m is not None and getattr(m, "__file__", None))
    frame, level = sys._getframe(1), 1        # warned_at_caller: warn's stacklevel 1
    while frame is not None and frame.f_code.co_filename.startswith(roots):
        frame, level = frame.f_back, level + 1
    return level
