"""What a fuzz case may end in, and the classifier that puts an exception into its class.

Outcome classes (``OUTCOMES``), allowed first:

* ``clean``: an error raised on purpose by tilefuse (a ``TilefuseError``, or a plain
  ``ValueError``/``TypeError`` whose innermost frame is a ``raise`` statement in tilefuse's
  packages) with a message that names the input where one is expected;
* ``clean-unnamed``: the same, but the message does not name the file or model it is about;
* ``equal-ort``: an ONNX model whose outputs equal onnxruntime's;
* ``ort-rejects``: an ONNX model onnxruntime refuses but tilefuse runs (counted and listed:
  some are fine, tilefuse may honour what onnxruntime cannot);
* ``ok``: accepted and consistent (a graph whose compiled outputs equal the reference
  interpreter's, a command whose files stay consistent, an ONNX model too large to run);
* ``LEAK``: any other exception: one from protobuf, onnx, numpy, sqlite or json, an
  ``IndexError``/``KeyError``/``AttributeError``/``AssertionError``/``MemoryError``..., a
  ``ValueError``/``TypeError`` raised by Python or a library rather than by a ``raise`` of
  tilefuse, an error without a message, a command that prints a traceback;
* ``WRONG``: a result that differs from onnxruntime's or the reference interpreter's, an
  invalid input accepted, a valid one refused, files left inconsistent;
* ``CRASH``, ``HANG``: the process died or ran over its time (found by the campaign script,
  which runs cases in subprocesses).

Example:
    >>> outcome = classify_exception(ValueError("bad"), "import")
    >>> outcome.kind, outcome.allowed      # raised here, not by tilefuse: a leak
    ('LEAK', False)
"""
from __future__ import annotations

import linecache
import traceback
from dataclasses import dataclass
from pathlib import Path

from tilefuse.tensorir.errors import TilefuseError

REPO = Path(__file__).resolve().parents[2]
TILEFUSE_PACKAGES = ("tensorir", "schedule", "graph_api", "autotune")
TILEFUSE_DIRS = tuple(str(REPO / package) + "/" for package in TILEFUSE_PACKAGES)

CLEAN, UNNAMED, EQUAL_ORT, ORT_REJECTS, OK = "clean", "clean-unnamed", "equal-ort", "ort-rejects", "ok"
LEAK, WRONG, CRASH, HANG = "LEAK", "WRONG", "CRASH", "HANG"
OUTCOMES = (CLEAN, UNNAMED, EQUAL_ORT, ORT_REJECTS, OK, LEAK, WRONG, CRASH, HANG)
BAD_OUTCOMES = frozenset({LEAK, WRONG, CRASH, HANG})
NOTABLE_OUTCOMES = frozenset({UNNAMED, ORT_REJECTS})
"""Allowed, but counted and listed."""

_SEVERITY = {kind: rank for rank, kind in enumerate((OK, EQUAL_ORT, CLEAN, UNNAMED, ORT_REJECTS, WRONG, LEAK,
                                                     HANG, CRASH))}


@dataclass(frozen=True)
class Outcome:
    """The class a case ended in and what happened (the error or the difference).

    Example:
        >>> Outcome(CLEAN, "import: GraphError: ...").allowed, Outcome(WRONG, "differs").allowed
        (True, False)
    """
    kind: str
    message: str = ""

    @property
    def allowed(self) -> bool:
        """False for LEAK, WRONG, CRASH and HANG.

        Example:
            >>> Outcome(HANG).allowed
            False
        """
        return self.kind not in BAD_OUTCOMES


def worst(outcomes) -> Outcome:
    """The most severe of several outcomes (a crash over a leak over a wrong result over the
    allowed ones).

    Example:
        >>> worst([Outcome(CLEAN, "a"), Outcome(LEAK, "b"), Outcome(OK)]).kind
        'LEAK'
    """
    return max(outcomes, key=lambda outcome: _SEVERITY[outcome.kind])


def is_tilefuse_file(filename: str) -> bool:
    """Whether a source file belongs to one of tilefuse's packages.

    Example:
        >>> is_tilefuse_file(str(REPO / "graph_api" / "graph.py")), is_tilefuse_file("/usr/lib/json/decoder.py")
        (True, False)
    """
    return filename.startswith(TILEFUSE_DIRS)


def innermost_frame(err: BaseException):
    """The ``traceback.FrameSummary`` where ``err`` was raised (None without a traceback).

    Example:
        >>> innermost_frame(ValueError("never raised")) is None
        True
    """
    frames = traceback.extract_tb(err.__traceback__)
    return frames[-1] if frames else None


def innermost_tilefuse_frame(err: BaseException):
    """The deepest frame of ``err``'s traceback in tilefuse's packages (None when there is none):
    where the exception left tilefuse's code.

    Example:
        >>> innermost_tilefuse_frame(KeyError("k")) is None
        True
    """
    frames = [f for f in traceback.extract_tb(err.__traceback__) if is_tilefuse_file(f.filename)]
    return frames[-1] if frames else None


def raised_on_purpose(err: BaseException) -> bool:
    """True when the innermost frame of ``err`` is a ``raise`` statement in tilefuse's code
    (not an error raised by Python, numpy, onnx or sqlite inside a tilefuse function).

    Example:
        >>> try:
        ...     int("x")
        ... except ValueError as e:
        ...     raised_on_purpose(e)
        False
    """
    frame = innermost_frame(err)
    if frame is None or not is_tilefuse_file(frame.filename):
        return False
    line = frame.line or linecache.getline(frame.filename, frame.lineno)
    return line.strip().startswith("raise")


def is_clean_error(err: BaseException) -> bool:
    """Whether ``err`` is an error tilefuse raises on purpose: a ``TilefuseError``, or exactly
    a ``ValueError`` or ``TypeError`` (no library subclass such as numpy's AxisError or json's
    JSONDecodeError) raised by a ``raise`` in tilefuse's code.

    Example:
        >>> from tilefuse.graph_api import GraphError
        >>> is_clean_error(GraphError("op 3: unknown op kind")), is_clean_error(KeyError("x"))
        (True, False)
    """
    if isinstance(err, TilefuseError):
        return True
    return type(err) in (ValueError, TypeError) and raised_on_purpose(err)


def first_line(text) -> str:
    """The first non-blank line of ``str(text)``, cut to 300 characters.

    Example:
        >>> first_line("\\n  boom\\nmore")
        'boom'
    """
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def describe_exception(err: BaseException) -> str:
    """``module.Type: first line of the message (raised at file:line; left tilefuse at
    file:line)``, paths relative to the repository.

    Example:
        >>> describe_exception(KeyError("k"))
        "builtins.KeyError: 'k'"
    """
    kind = type(err)
    text = f"{kind.__module__}.{kind.__qualname__}: {first_line(err)}"
    places = []
    frame = innermost_frame(err)
    if frame is not None:
        places.append(f"raised at {_where(frame)}")
    inside = innermost_tilefuse_frame(err)
    if inside is not None and inside is not frame:
        places.append(f"left tilefuse at {_where(inside)}")
    return text + (f" ({'; '.join(places)})" if places else "")


def _where(frame) -> str:
    path = Path(frame.filename)
    try:
        path = path.relative_to(REPO)
    except ValueError:
        parts = path.parts
        path = Path(*parts[-3:]) if len(parts) > 3 else path
    return f"{path}:{frame.lineno}"


def classify_exception(err: BaseException, stage: str, names=()) -> Outcome:
    """The outcome of a case that raised ``err`` at ``stage`` (import, compile, run, ...):
    LEAK unless ``err`` is a clean error with a message; a clean error whose message contains
    none of ``names`` (when some are given) is ``clean-unnamed``.

    Example:
        >>> from tilefuse.graph_api import GraphError
        >>> classify_exception(GraphError("model.onnx: bad"), "import", ["model.onnx"]).kind
        'clean'
        >>> classify_exception(GraphError("Conv node 'y': bad"), "import", ["model.onnx"]).kind
        'clean-unnamed'
    """
    text = f"{stage}: {describe_exception(err)}"
    if not is_clean_error(err):
        return Outcome(LEAK, text)
    if not str(err).strip():
        return Outcome(LEAK, f"{text} (an error without a message)")
    if names and not any(name in str(err) for name in names):
        return Outcome(UNNAMED, f"{text} (names none of {list(names)})")
    return Outcome(CLEAN, text)
