"""Build: schedule -> loop IR -> native Kernel for a target (the host CPU by default)."""
from __future__ import annotations

from tilefuse.tensorir.codegen import build_prim_func
from tilefuse.tensorir.runtime.kernel import Kernel
from tilefuse.tensorir.runtime.target import Target

from .lower import lower
from .schedule import Schedule


def build(sch: Schedule, args: list, name: str = "main", fast_math: bool = False,
          target: Target | str | None = None) -> Kernel:
    """Lower ``sch`` with parameters ``args`` and compile it for ``target`` (default: the
    host CPU, ``Target.host()``; or a Target, or a string ``Target.parse`` reads, such as
    ``"llvm -mcpu=skylake-avx512"``). Code for a target whose features this host lacks is
    built but not run here: ``f.source("asm")`` shows it, ``artifact.save`` keeps it.

    ``fast_math=True`` lets LLVM reassociate float arithmetic and assume no NaN/inf.

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> A = placeholder((3,), name="A"); B = compute((3,), lambda i: A[i] * A[i], name="B")
        >>> f = build(create_schedule(B), [A, B])
        >>> b = np.empty(3, "float32"); f(np.array([1, 2, 3], "float32"), b); b.tolist()
        [1.0, 4.0, 9.0]
        >>> X = placeholder((64,), name="X"); Y = compute((64,), lambda i: X[i] * 2.0, name="Y")
        >>> s = create_schedule(Y); _, lanes = s[Y].split(Y.op.axis[0], factor=16); s[Y].vectorize(lanes)
        >>> "zmm" in build(s, [X, Y], target="llvm -mcpu=skylake-avx512").source("asm")   # AVX-512 anywhere
        True
    """
    return build_prim_func(lower(sch, args, name), fast_math=fast_math, target=target)
