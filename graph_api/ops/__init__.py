"""The op registry: every op kind defined once, in the module of its family, as one ``OpDef``
record (schema, attribute normalization, shape rule, numpy reference, tensorir lowering).

Adding an op kind means one record in one family module (plus its tests): validation, shape
inference, the reference interpreter, lowering and ``op_class`` all read the registry.

=============  ==========================================================================
module         kinds
=============  ==========================================================================
eltwise        unary and binary element-wise ops, Select, Pow, PReLU, BiasAdd
matmul         MatMul
conv           Convolution, ConvTranspose
pool           MaxPool, AvgPool
norm           BatchNormInference, LayerNorm, GroupNorm, RMSNorm
softmax        SoftMax, LogSoftmax
attention      ScaledDotProductAttention
reduce         Reduce*
movement       Reorder, Identity, TypeCast, Cast, reshape, transpose, Concat, Gather, Slice, Pad,
               Expand, GenIndex, Dropout
resample       Interpolate
quantize       Quantize, Dequantize and their dynamic forms
backward       gradient ops
plumbing       End, Wildcard
=============  ==========================================================================

Example:
    >>> from tilefuse.graph_api.op import OpKind
    >>> set(REGISTRY) == set(OpKind)
    True
"""
from __future__ import annotations

from . import eltwise, matmul, conv, pool, norm, softmax, attention, reduce, movement, resample, quantize  # noqa: F401
from . import backward, plumbing  # noqa: F401
from .normalize import normalize_op
from .registry import REGISTRY, OpDef, RuleError, define, op_def

__all__ = ["REGISTRY", "OpDef", "RuleError", "define", "normalize_op", "op_def"]

_missing = set(REGISTRY) ^ set(__import__("tilefuse.graph_api.op", fromlist=["OpKind"]).OpKind)
if _missing:
    raise ImportError(f"op kinds without a definition: {sorted(k.value for k in _missing)}")
