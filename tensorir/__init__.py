"""tensorir: the algorithm IR (tensor expressions), the loop IR, the simplifier, LLVM codegen
and the runtime of tilefuse.

Example:
    >>> from tilefuse.tensorir import placeholder, compute, exp
    >>> A = placeholder((1024,), "float32", name="A")
    >>> B = compute((1024,), lambda i: exp(A[i]) * 2.0, name="B")
"""
from .dtype import DTypeError
from .errors import TilefuseError, Unsupported
from .expr import Buffer, Expr, IterVar, Var, const, var
from .intrinsics import abs, cast, ceil, erf, exp, floor, if_then_else, log, pow, rsqrt, sigmoid, sqrt, tanh
from .reduce import max, min, prod, reduce_axis, sum
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, compute, placeholder

__all__ = [
    "DTypeError", "TilefuseError", "Unsupported", "Buffer", "Expr", "IterVar", "Var", "const", "var",
    "abs", "cast", "ceil", "erf", "exp", "floor", "if_then_else", "log", "pow", "rsqrt", "sigmoid",
    "sqrt", "tanh", "max", "min", "prod", "reduce_axis", "sum",
    "ComputeOp", "Operation", "PlaceholderOp", "Tensor", "compute", "placeholder",
]
