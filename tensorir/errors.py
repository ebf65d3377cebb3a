"""The exception roots of tilefuse.

Every error the project raises on purpose derives from ``TilefuseError``. ``Unsupported`` is
the one error that means "this is valid, but not compiled here": a lowering or a template
raises it on purpose, and it alone makes a caller fall back (to another template, or to the
numpy reference interpreter). Any other exception is a bug or bad input and propagates with
its traceback.

Example:
    >>> try:
    ...     raise Unsupported("Interpolate mode 'cubic' has no compute definition")
    ... except TilefuseError as err:
    ...     print(type(err).__name__, err)
    Unsupported Interpolate mode 'cubic' has no compute definition
"""
from __future__ import annotations


class TilefuseError(Exception):
    """The root of every error tilefuse raises on purpose.

    Example:
        >>> issubclass(Unsupported, TilefuseError)
        True
    """


class Unsupported(TilefuseError):
    """A valid request that this compiler does not handle (an op kind, attribute value, data
    type or DAG shape without a compute definition or schedule). The one error that leads to a
    fallback.

    Example:
        >>> str(Unsupported("no compute definition for Wildcard"))
        'no compute definition for Wildcard'
    """


class LoweringError(TilefuseError, ValueError):
    """A loop nest the loop passes cannot turn into code, e.g. an unrolled loop whose extent
    is not a constant.

    Example:
        >>> issubclass(LoweringError, ValueError)
        True
    """


class IRVerifyError(TilefuseError):
    """Loop IR that breaks an invariant the passes and code generation rely on
    (``tensorir.verify``): a bug in the pass named in the message, or in what built the IR.

    Example:
        >>> issubclass(IRVerifyError, TilefuseError)
        True
    """
