"""Build: schedule -> loop IR -> native Kernel for the host CPU."""
from __future__ import annotations

from tilefuse.tensorir.codegen import build_prim_func
from tilefuse.tensorir.runtime.kernel import Kernel
from tilefuse.tensorir.runtime.target import Target

from .lower import lower
from .schedule import Schedule


def build(sch: Schedule, args: list, name: str = "main", fast_math: bool = False,
          target: Target | None = None) -> Kernel:
    """Lower ``sch`` with parameters ``args`` and compile it for ``target`` (default: the
    host CPU, ``Target.host()``).

    ``fast_math=True`` lets LLVM reassociate float arithmetic and assume no NaN/inf.

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> A = placeholder((3,), name="A"); B = compute((3,), lambda i: A[i] * A[i], name="B")
        >>> f = build(create_schedule(B), [A, B])
        >>> b = np.empty(3, "float32"); f(np.array([1, 2, 3], "float32"), b); b.tolist()
        [1.0, 4.0, 9.0]
    """
    return build_prim_func(lower(sch, args, name), fast_math=fast_math, target=target)
