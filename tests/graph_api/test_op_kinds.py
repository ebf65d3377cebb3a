"""Every op kind that ``lower_op`` supports, alone in a small graph (shapes like 7, 13, 37 that
no tile size divides), compiles through ``compile_graph`` as supported partitions (no op falls
back to the reference interpreter) and matches ``graph_api.reference.run``, over the attribute
variants that change the compute (strides, pads, dilations, groups, layouts, axes, keep_dims,
transposes, broadcasts, use_dst, ...). A kind added to the lowering without a case here fails
``test_every_lowered_kind_has_a_case``."""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType, compile_graph, reference
from tilefuse.graph_api.lowering import COMPILED_DTYPES, LOWERED_KINDS

F32, S8, U8, S32, S64, BOOL = DataType.f32, DataType.s8, DataType.u8, DataType.s32, DataType.s64, DataType.boolean
U32, U64, F64 = DataType.u32, DataType.u64, DataType.f64

# lowered kinds no valid graph can compile: every data type their schema admits is one we do not compile
UNCOMPILABLE = {OpKind.TypeCast: "oneDNN's TypeCast converts between f32, bf16 and f16 only"}


class GraphMaker:
    """A graph of fresh tensors, with random feeds for its inputs."""

    def __init__(self, seed: int):
        self.graph = Graph()
        self.rng = np.random.default_rng(seed)
        self.feeds: dict[int, np.ndarray] = {}
        self.next_id = 0

    def _tensor(self, dtype, shape, constant=False) -> LogicalTensor:
        t = LogicalTensor(self.next_id, dtype, None if shape is None else tuple(shape),
                          property_type=PropertyType.constant if constant else PropertyType.variable)
        self.next_id += 1
        return t

    def input(self, shape, dtype=F32, low=-2.0, high=2.0, constant=False) -> LogicalTensor:
        t = self._tensor(dtype, shape, constant)
        if dtype is BOOL:
            value = self.rng.random(shape) > 0.5
        elif dtype in (S8, U8, S32, S64):
            info = np.iinfo(dtype.numpy)
            value = self.rng.integers(max(info.min, -100), min(info.max, 200), shape, endpoint=True)
        else:
            value = self.rng.uniform(low, high, shape)
        self.feeds[t.id] = np.asarray(value).astype(dtype.numpy)
        return t

    def given(self, value, dtype) -> LogicalTensor:
        """An input fed with ``value``."""
        t = self._tensor(dtype, np.shape(value))
        self.feeds[t.id] = np.asarray(value, dtype.numpy)
        return t

    def positive(self, shape) -> LogicalTensor:
        return self.input(shape, low=0.5, high=2.0)

    def op(self, kind, inputs, outputs=(F32,), out_shapes=None, **attrs) -> list[LogicalTensor]:
        shapes = out_shapes or [None] * len(outputs)
        outs = [self._tensor(d, s) for d, s in zip(outputs, shapes)]
        self.graph.add_op(Op(self.next_id + 1000, OpKind.parse(kind), list(inputs), outs, attrs))
        return outs


@dataclass
class Case:
    kind: OpKind
    name: str
    build: object                       # GraphMaker -> None
    rtol: float = 1e-4
    atol: float = 1e-4
    marks: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.kind.value}-{self.name}" if self.name else self.kind.value


CASES: list[Case] = []


def case(kind, name="", rtol=1e-4, atol=1e-4):
    def register(build):
        CASES.append(Case(OpKind.parse(kind), name, build, rtol, atol))
        return build
    return register


def cases(kind, variants: dict, rtol=1e-4, atol=1e-4):
    """One case per (name, build) of ``variants``."""
    for name, build in variants.items():
        CASES.append(Case(OpKind.parse(kind), name, build, rtol, atol))


# ---------------------------------------------------------------------------- unary elementwise

UNARY = {
    "Abs": {}, "Exp": {}, "Square": {}, "ReLU": {}, "Sigmoid": {}, "Tanh": {}, "HardSwish": {}, "Mish": {},
    "Round": {}, "Reorder": {}, "LeakyReLU": {"alpha": 0.1}, "Elu": {"alpha": 0.7}, "Clamp": {"min": -0.5, "max": 1.5},
    "HardSigmoid": {"alpha": 0.3, "beta": 0.4},
}
for _kind, _attrs in UNARY.items():
    cases(_kind, {"": lambda m, k=_kind, a=_attrs: m.op(k, [m.input((7, 13, 37))], **a)})
for _kind in ("Log", "Sqrt", "Reciprocal"):
    cases(_kind, {"": lambda m, k=_kind: m.op(k, [m.positive((7, 37))])})
cases("GELU", {mode: lambda m, mode=mode: m.op("GELU", [m.input((13, 37))], mode=mode)
               for mode in ("gelu_erf", "gelu_tanh")})
cases("SoftPlus", {f"beta={beta}": lambda m, beta=beta: m.op("SoftPlus", [m.input((13, 37))], beta=beta)
                   for beta in (1.0, -2.0)})
cases("Pow", {f"beta={beta}": lambda m, beta=beta: m.op("Pow", [m.positive((7, 37))], beta=beta)
              for beta in (2.0, 0.5, -1.5)})
cases("Pow", {f"beta={beta}-negative-base": lambda m, beta=beta: m.op("Pow", [m.input((7, 37))], beta=beta)
              for beta in (3.0, -2.0, 4.0)})          # whole exponents multiply: any sign of base

# ---------------------------------------------------------------------------- binary elementwise

BROADCASTS = {"same": ((7, 13, 37), (7, 13, 37)), "row": ((7, 13, 37), (37,)), "col": ((7, 13, 1), (13, 37)),
              "both": ((7, 1, 37), (13, 1)), "scalar": ((13, 37), ())}
# every broadcast for Add; each other kind gets equal shapes and one broadcast, in turn
_NAMES = list(BROADCASTS)
for _n, _kind in enumerate(("Add", "Subtract", "Multiply", "Maximum", "Minimum", "SquaredDifference")):
    _chosen = _NAMES if _kind == "Add" else ["same", _NAMES[1 + _n % (len(_NAMES) - 1)]]
    cases(_kind, {name: lambda m, k=_kind, s=BROADCASTS[name]: m.op(k, [m.input(s[0]), m.input(s[1])])
                  for name in _chosen})
cases("Divide", {name: lambda m, s=BROADCASTS[name]: m.op("Divide", [m.input(s[0]), m.positive(s[1])])
                 for name in ("same", "both")})
cases("GreaterEqual", {name: lambda m, s=s: m.op("GreaterEqual", [m.input(s[0]), m.input(s[1])], outputs=(BOOL,))
                       for name, s in list(BROADCASTS.items())[:3]})
cases("Add", {
    "s32": lambda m: m.op("Add", [m.input((7, 37), S32), m.input((37,), S32)], outputs=(S32,)),
    "auto_broadcast=none": lambda m: m.op("Add", [m.input((7, 37)), m.input((7, 37))], auto_broadcast="none")})
for _kind in ("Subtract", "Multiply", "Maximum", "Minimum", "SquaredDifference"):
    cases(_kind, {"auto_broadcast=none": lambda m, k=_kind: m.op(k, [m.input((7, 37)), m.input((7, 37))],
                                                                 auto_broadcast="none")})
cases("Divide", {"auto_broadcast=none": lambda m: m.op("Divide", [m.input((7, 37)), m.positive((7, 37))],
                                                       auto_broadcast="none")})
cases("GreaterEqual", {"auto_broadcast=none": lambda m: m.op("GreaterEqual", [m.input((7, 37)), m.input((7, 37))],
                                                             outputs=(BOOL,), auto_broadcast="none")})
# comparisons and logic: bool outputs, every input type they take, both broadcast modes
cases("Equal", {
    "f32-col": lambda m: m.op("Equal", [m.given(np.round(m.rng.uniform(-2, 2, (7, 13, 1))), F32),
                                        m.given(np.round(m.rng.uniform(-2, 2, (13, 37))), F32)], outputs=(BOOL,)),
    "s64-row": lambda m: m.op("Equal", [m.given(m.rng.integers(0, 3, (7, 37)), S64), m.given(m.rng.integers(0, 3, 37), S64)],
                              outputs=(BOOL,)),
    "bool-auto_broadcast=none": lambda m: m.op("Equal", [m.input((7, 37), BOOL), m.input((7, 37), BOOL)],
                                               outputs=(BOOL,), auto_broadcast="none")})
cases("Greater", {
    "f32-both": lambda m: m.op("Greater", [m.input((7, 1, 37)), m.input((13, 1))], outputs=(BOOL,)),
    "s64-row": lambda m: m.op("Greater", [m.input((7, 37), S64), m.input((37,), S64)], outputs=(BOOL,)),
    "s8-auto_broadcast=none": lambda m: m.op("Greater", [m.input((7, 37), S8), m.input((7, 37), S8)],
                                             outputs=(BOOL,), auto_broadcast="none")})
for _kind in ("LogicalAnd", "LogicalOr", "LogicalXor"):
    cases(_kind, {
        "col": lambda m, k=_kind: m.op(k, [m.input((7, 13, 1), BOOL), m.input((13, 37), BOOL)], outputs=(BOOL,)),
        "auto_broadcast=none": lambda m, k=_kind: m.op(k, [m.input((7, 37), BOOL), m.input((7, 37), BOOL)],
                                                       outputs=(BOOL,), auto_broadcast="none")})
cases("LogicalNot", {"": lambda m: m.op("LogicalNot", [m.input((7, 13, 37), BOOL)], outputs=(BOOL,))})
cases("IsNaN", {"": lambda m: m.op("IsNaN", [m.given(np.where(m.rng.random((13, 37)) > 0.7, np.nan,
                                                               m.rng.uniform(-2, 2, (13, 37))), F32)],
                                   outputs=(BOOL,))})
cases("Select", {
    "s64-mask": lambda m: m.op("Select", [m.input((7, 1), BOOL), m.input((7, 37), S64), m.input((37,), S64)],
                               outputs=(S64,)),
    "bool": lambda m: m.op("Select", [m.input((13, 37), BOOL), m.input((13, 37), BOOL), m.input((37,), BOOL)],
                           outputs=(BOOL,))})
cases("Pow", {"binary-auto_broadcast=none": lambda m: m.op("Pow", [m.positive((7, 37)), m.input((7, 37))],
                                                           auto_broadcast="none")})
cases("Select", {
    "auto_broadcast=none": lambda m: m.op("Select", [m.input((7, 37), BOOL), m.input((7, 37)), m.input((7, 37))],
                                          auto_broadcast="none"),
    "same": lambda m: m.op("Select", [m.input((7, 37), BOOL), m.input((7, 37)), m.input((7, 37))]),
    "broadcast": lambda m: m.op("Select", [m.input((37,), BOOL), m.input((7, 1)), m.input((13, 7, 37))])})
cases("BiasAdd", {fmt: lambda m, fmt=fmt, s=s: m.op("BiasAdd", [m.input(s), m.input((13,))], data_format=fmt)
                  for fmt, s in (("NCX", (2, 13, 7, 5)), ("NXC", (2, 7, 5, 13)))})
cases("PReLU", {
    "NCX-per-channel": lambda m: m.op("PReLU", [m.input((2, 13, 7)), m.input((13,))], data_format="NCX"),
    "NXC-per-channel": lambda m: m.op("PReLU", [m.input((2, 7, 13)), m.input((13,))]),
    "last-axis": lambda m: m.op("PReLU", [m.input((2, 13, 7)), m.input((7,))], data_format="NCX",
                                per_channel_broadcast=False),
    "broadcast": lambda m: m.op("PReLU", [m.input((2, 13, 7)), m.input((13, 1))])})

# ---------------------------------------------------------------------------- data movement

cases("StaticReshape", {
    "minus-one": lambda m: m.op("StaticReshape", [m.input((7, 13, 37))], shape=[13, -1], special_zero=False),
    "special-zero": lambda m: m.op("StaticReshape", [m.input((7, 13, 37))], shape=[0, 37, 13], special_zero=True),
    "bool": lambda m: m.op("StaticReshape", [m.input((7, 13, 37), BOOL)], shape=[7, 1, 481], special_zero=False,
                           outputs=(BOOL,)),
    # the index arithmetic pairs dims into groups of equal size: shared, split, merged, unit
    "unit-dims": lambda m: m.op("StaticReshape", [m.input((13, 37))], shape=[1, 13, 1, 37], special_zero=False),
    "split-last": lambda m: m.op("StaticReshape", [m.input((7, 13, 36))], shape=[7, 13, 4, 9], special_zero=False),
    "merge-then-split": lambda m: m.op("StaticReshape", [m.input((7, 4, 6))], shape=[7, 3, 8], special_zero=False),
    "merge-across-units": lambda m: m.op("StaticReshape", [m.input((5, 1, 7, 1, 3))], shape=[35, 3],
                                         special_zero=False)})
cases("StaticTranspose", {
    "order": lambda m: m.op("StaticTranspose", [m.input((7, 13, 37))], order=[2, 0, 1]),
    "negative": lambda m: m.op("StaticTranspose", [m.input((7, 13, 37))], order=[-1, 1, 0]),
    "s64": lambda m: m.op("StaticTranspose", [m.input((7, 13, 37), S64)], order=[1, 2, 0], outputs=(S64,))})
cases("Concat", {
    "axis=1": lambda m: m.op("Concat", [m.input((7, 5, 3)), m.input((7, 13, 3)), m.input((7, 1, 3))], axis=1),
    "axis=-1": lambda m: m.op("Concat", [m.input((7, 13)), m.input((7, 37))], axis=-1),
    "one": lambda m: m.op("Concat", [m.input((7, 13))], axis=0),
    "s64": lambda m: m.op("Concat", [m.input((7, 5), S64), m.input((7, 13), S64)], axis=1, outputs=(S64,))})
cases("GenIndex", {f"axis={a}": lambda m, a=a: m.op("GenIndex", [m.input((7, 13, 37))], outputs=(S32,), axis=a)
                   for a in (0, -1)})


def _dropout_inputs(m, shape):
    return [m.input(shape), m.input((), S64), m.input((), S64), m.input((), F32, 0.1, 0.5)]


cases("Dropout", {
    "dst": lambda m: m.op("Dropout", _dropout_inputs(m, (7, 13, 37))),
    "dst-and-mask": lambda m: m.op("Dropout", _dropout_inputs(m, (7, 37)), outputs=(F32, U8))})

# ---------------------------------------------------------------------------- reductions, norms, softmax

REDUCE_KINDS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2")
for _kind in REDUCE_KINDS:
    low = 0.7 if _kind == "ReduceProd" else -2.0          # a product of many values stays in range
    high = 1.3 if _kind == "ReduceProd" else 2.0
    cases(_kind, {
        f"axes={axes}-keep_dims={keep}": (lambda m, k=_kind, axes=axes, keep=keep, lo=low, hi=high:
                                          m.op(k, [m.input((7, 13, 37), low=lo, high=hi)], axes=axes, keep_dims=keep))
        for axes, keep in ((([-1], False), ([0, 2], True), ([1], True), ([0, 1, 2], False)) if _kind == "ReduceSum"
                           else (([-1], False), ([0, 2], True)))})

cases("SoftMax", {
    "axis=-1": lambda m: m.op("SoftMax", [m.input((7, 13, 37))], axis=-1),
    "axis=1": lambda m: m.op("SoftMax", [m.input((7, 13, 37))], axis=1),
    "inf_as_zero": lambda m: m.op("SoftMax", [m.input((13, 37))], axis=-1, mode="inf_as_zero"),
    "stats": lambda m: m.op("SoftMax", [m.input((7, 13, 37))], outputs=(F32, F32), axis=-1),
    "stats-axis=0": lambda m: m.op("SoftMax", [m.input((7, 13))], outputs=(F32, F32), axis=0)})
cases("LogSoftmax", {f"axis={a}": lambda m, a=a: m.op("LogSoftmax", [m.input((7, 13, 37))], axis=a)
                     for a in (-1, 1)})


def _bn(m, fmt, shape, c):
    params = [m.input((c,)), m.input((c,)), m.input((c,)), m.positive((c,))]
    return m.op("BatchNormInference", [m.input(shape)] + params, epsilon=1e-5, data_format=fmt)


cases("BatchNormInference", {"NCX": lambda m: _bn(m, "NCX", (2, 13, 7, 5), 13),
                             "NXC": lambda m: _bn(m, "NXC", (2, 7, 5, 13), 13)})
cases("LayerNorm", {
    "stats": lambda m: m.op("LayerNorm", [m.input((7, 13, 37)), m.input((37,)), m.input((37,))],
                            outputs=(F32, F32, F32)),
    "two-axes": lambda m: m.op("LayerNorm", [m.input((7, 13, 37)), m.input((13, 37)), m.input((13, 37))],
                               outputs=(F32, F32, F32), begin_norm_axis=1),
    "no-affine-no-stats": lambda m: m.op("LayerNorm", [m.input((7, 37))], use_affine=False, keep_stats=False,
                                         epsilon=1e-3)})
cases("GroupNorm", {
    "NCX-stats": lambda m: m.op("GroupNorm", [m.input((2, 12, 7, 5)), m.input((12,)), m.input((12,))],
                                outputs=(F32, F32, F32), groups=3, data_format="NCX"),
    "NXC": lambda m: m.op("GroupNorm", [m.input((2, 7, 5, 12)), m.input((12,)), m.input((12,))],
                          groups=4, keep_stats=False),
    "no-affine": lambda m: m.op("GroupNorm", [m.input((2, 6, 13))], groups=2, use_affine=False, keep_stats=False,
                                data_format="NCX")})
cases("RMSNorm", {
    "gamma": lambda m: m.op("RMSNorm", [m.input((7, 13, 37)), m.input((37,))], epsilon=1e-3),
    "two-axes": lambda m: m.op("RMSNorm", [m.input((7, 13, 37)), m.input((13, 37))], begin_norm_axis=1),
    "no-gamma": lambda m: m.op("RMSNorm", [m.input((7, 37))])})

# ---------------------------------------------------------------------------- MatMul

MATMULS = {
    # name: (a shape, b shape, transpose_a, transpose_b, bias shape)
    "plain": ((7, 13), (13, 37), False, False, None),
    "transpose_a": ((13, 7), (13, 37), True, False, None),
    "transpose_b": ((7, 13), (37, 13), False, True, None),
    "both-transposed": ((13, 7), (37, 13), True, True, None),
    "batch-broadcast": ((2, 1, 7, 13), (3, 13, 37), False, False, None),
    "bias-row": ((7, 13), (13, 37), False, False, (37,)),
    "bias-full": ((3, 7, 13), (13, 37), False, False, (3, 7, 37)),
    "1d-a": ((13,), (2, 13, 37), False, False, None),
    "1d-b": ((7, 13), (13,), False, False, None),
}


def _matmul(m, a, b, ta, tb, bias, constant_b=False):
    ins = [m.input(a), m.input(b, constant=constant_b)] + ([m.input(bias)] if bias else [])
    return m.op("MatMul", ins, transpose_a=ta, transpose_b=tb)


cases("MatMul", {name: lambda m, c=c: _matmul(m, *c) for name, c in MATMULS.items()})
cases("MatMul", {"constant-weights": lambda m: _matmul(m, (7, 13), (13, 37), False, False, (37,), True)})

# ---------------------------------------------------------------------------- convolutions

CONVS = {
    # name: (src, weights, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format, extra)
    "NCX-OIX": ((2, 5, 7, 13), (6, 5, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "OIX", {}),
    "NXC-XIO-strided": ((2, 7, 13, 5), (3, 2, 5, 6), [2, 3], [1, 0], [0, 1], [1, 1], 1, "NXC", "XIO", {}),
    "dilated": ((1, 3, 13, 7), (4, 3, 3, 2), [1, 1], [2, 0], [2, 1], [2, 3], 1, "NCX", "OIX", {}),
    "groups": ((2, 6, 7, 7), (9, 2, 3, 3), [1, 2], [1, 1], [1, 1], [1, 1], 3, "NCX", "OIX", {}),
    "depthwise": ((1, 7, 9, 4), (3, 3, 1, 4), [1, 1], [1, 1], [1, 1], [1, 1], 4, "NXC", "XIO", {}),
    "bias": ((2, 5, 7, 13), (6, 5, 3, 3), [1, 1], [0, 0], [0, 0], [1, 1], 1, "NCX", "OIX", {"bias": True}),
    "same_upper": ((1, 13, 7, 3), (3, 3, 3, 5), [2, 2], [0, 0], [0, 0], [1, 1], 1, "NXC", "XIO",
                   {"auto_pad": "SAME_UPPER"}),
    "valid": ((1, 3, 13, 7), (5, 3, 3, 3), [1, 1], [2, 2], [2, 2], [1, 1], 1, "NCX", "OIX", {"auto_pad": "VALID"}),
    # SAME with dilations pads for the dilated kernel, in shape inference, the reference and the compiled code
    "same_upper-dilated": ((1, 3, 13, 8), (4, 3, 3, 3), [1, 1], [0, 0], [0, 0], [2, 3], 1, "NCX", "OIX",
                           {"auto_pad": "SAME_UPPER"}),
    "same_lower-dilated-strided": ((1, 13, 8, 3), (3, 2, 3, 5), [2, 3], [0, 0], [0, 0], [2, 2], 1, "NXC", "XIO",
                                   {"auto_pad": "same_lower"}),
    "1d": ((2, 5, 37), (7, 5, 3), [2], [1], [1], [1], 1, "NCX", "OIX", {}),
    "3d": ((1, 3, 5, 7, 6), (4, 3, 2, 3, 2), [1, 2, 1], [0, 1, 1], [1, 0, 0], [1, 1, 2], 1, "NCX", "OIX", {}),
}


def _conv(m, kind, src, wei, strides, pb, pe, dil, groups, fmt, wfmt, extra, constant_w=False):
    extra = dict(extra)
    ins = [m.input(src), m.input(wei, constant=constant_w)]
    if extra.pop("bias", False):
        if kind == "Convolution":
            oc = wei[0] if wfmt == "OIX" else wei[-1]
        else:
            o = wei[1] if wfmt == "IOX" else wei[-2]
            oc = o * groups
        ins.append(m.input((oc,)))
    return m.op(kind, ins, strides=strides, pads_begin=pb, pads_end=pe, dilations=dil, groups=groups,
                data_format=fmt, weights_format=wfmt, **extra)


cases("Convolution", {name: lambda m, c=c: _conv(m, "Convolution", *c) for name, c in CONVS.items()})
cases("Convolution", {"constant-weights": lambda m: _conv(m, "Convolution", *CONVS["NCX-OIX"], constant_w=True)})

CONVTS = {
    # weights: IOX (C, O/groups, *K) or XOI (*K, O/groups, C)
    "NCX-IOX": ((2, 5, 7, 6), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "IOX", {}),
    "NXC-XOI-strided": ((2, 7, 6, 5), (3, 2, 4, 5), [2, 3], [1, 0], [0, 2], [1, 1], 1, "NXC", "XOI", {}),
    "output_padding": ((1, 4, 5, 7), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], [1, 1], 1, "NCX", "IOX",
                       {"output_padding": [1, 0]}),
    "dilated": ((1, 3, 7, 5), (3, 2, 3, 2), [1, 2], [0, 1], [1, 0], [2, 2], 1, "NCX", "IOX", {}),
    "groups-bias": ((2, 6, 5, 7), (6, 2, 3, 3), [2, 1], [1, 0], [0, 1], [1, 1], 3, "NCX", "IOX", {"bias": True}),
    "same_lower": ((1, 7, 5, 3), (3, 3, 4, 3), [2, 2], [0, 0], [0, 0], [1, 1], 1, "NXC", "XOI",
                   {"auto_pad": "SAME_LOWER"}),
    "same_upper": ((1, 3, 5, 7), (3, 2, 3, 2), [2, 1], [0, 0], [0, 0], [1, 1], 1, "NCX", "IOX",
                   {"auto_pad": "SAME_UPPER"}),
    "valid": ((1, 3, 5, 7), (3, 2, 3, 2), [2, 1], [1, 1], [1, 1], [1, 1], 1, "NCX", "IOX", {"auto_pad": "VALID"}),
    "1d": ((2, 5, 13), (5, 4, 3), [3], [2], [1], [1], 1, "NCX", "IOX", {"output_padding": [2]}),
    "3d": ((1, 2, 3, 4, 5), (2, 3, 2, 2, 3), [1, 2, 1], [0, 1, 0], [1, 0, 0], [1, 1, 1], 1, "NCX", "IOX", {}),
}
cases("ConvTranspose", {name: lambda m, c=c: _conv(m, "ConvTranspose", *c) for name, c in CONVTS.items()})

POOLS = {
    # name: (src, kernel, strides, pads_begin, pads_end, data_format, extra)
    "NCX": ((2, 3, 13, 7), [3, 3], [2, 2], [1, 1], [1, 1], "NCX", {}),
    "NXC-ceil": ((2, 13, 7, 3), [3, 2], [2, 2], [0, 1], [1, 0], "NXC", {"rounding_type": "ceil"}),
    "1d": ((2, 3, 37), [5], [3], [2], [2], "NCX", {}),
    "3d": ((1, 2, 7, 5, 6), [2, 3, 2], [2, 1, 2], [1, 1, 0], [0, 1, 1], "NCX", {}),
    "negative-pads": ((2, 3, 13, 11), [2, 3], [2, 2], [1, -1], [-1, 1], "NCX", {}),
    "same_upper": ((1, 13, 7, 2), [3, 3], [2, 2], [0, 0], [0, 0], "NXC", {"auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 13, 8), [3, 2], [2, 3], [0, 0], [0, 0], "NCX", {"auto_pad": "SAME_LOWER"}),
    "valid": ((1, 2, 13, 8), [3, 2], [2, 3], [1, 1], [1, 1], "NCX", {"auto_pad": "VALID"}),
}


def _pool(m, kind, src, kernel, strides, pb, pe, fmt, extra):
    return m.op(kind, [m.input(src)], kernel=kernel, strides=strides, pads_begin=pb, pads_end=pe, data_format=fmt,
                **extra)


cases("MaxPool", {name: lambda m, c=c: _pool(m, "MaxPool", *c) for name, c in POOLS.items()})
cases("MaxPool", {"dilated": lambda m: _pool(m, "MaxPool", (1, 2, 13, 9), [2, 3], [1, 2], [1, 0], [0, 2], "NCX",
                                             {"dilations": [2, 1]}),
                  "same_upper-dilated": lambda m: _pool(m, "MaxPool", (1, 2, 13, 9), [3, 2], [2, 1], [0, 0], [0, 0],
                                                        "NCX", {"dilations": [2, 3], "auto_pad": "SAME_UPPER"})})
def _max_pool_indices(m, src, kernel, strides, pb, pe, dilations, order, ties=False):
    """MaxPool then MaxPoolIndices of its result (``ties``: values from a few levels, so that
    windows hold their maximum more than once and the first one must win)."""
    x = m.given(m.rng.integers(0, 3, src).astype(np.float32), F32) if ties else m.input(src)
    attrs = dict(kernel=kernel, strides=strides, pads_begin=pb, pads_end=pe, dilations=dilations)
    [y] = m.op("MaxPool", [x], data_format="NCX", **attrs)
    return m.op("MaxPoolIndices", [x, y], outputs=(S64,), storage_order=order, **attrs)


cases("MaxPoolIndices", {
    "1d": lambda m: _max_pool_indices(m, (2, 3, 37), [3], [2], [1], [1], [1], 0),
    "2d-row-major-ties": lambda m: _max_pool_indices(m, (2, 3, 13, 7), [3, 2], [2, 1], [1, 0], [1, 1], [1, 1], 0,
                                                     ties=True),
    "2d-column-major-dilated": lambda m: _max_pool_indices(m, (1, 2, 13, 9), [2, 3], [1, 2], [1, 0], [0, 2], [2, 1], 1),
    "2d-windows-of-padding-only": lambda m: _max_pool_indices(m, (2, 3, 1, 4), [2, 1], [3, 1], [1, 0], [2, 0], [3, 1],
                                                              1),
    "2d-negative-pads": lambda m: _max_pool_indices(m, (1, 3, 9, 11), [1, 2], [3, 4], [-1, 0], [-1, 1], [1, 2], 1),
    "3d-column-major": lambda m: _max_pool_indices(m, (1, 2, 5, 7, 6), [2, 3, 2], [2, 2, 1], [0, 1, 1], [1, 1, 0],
                                                   [1, 1, 2], 1)})

cases("AvgPool", {f"{name}-exclude_pad={e}": lambda m, c=POOLS[name], e=e:
                  _pool(m, "AvgPool", *c[:-1], {**c[-1], "exclude_pad": e})
                  for name, e in (("NCX", True), ("NCX", False), ("NXC-ceil", False), ("1d", False), ("3d", True),
                                  ("negative-pads", True), ("negative-pads", False), ("same_upper", False),
                                  ("same_lower", True), ("valid", False))})

# ---------------------------------------------------------------------------- Interpolate, quantization

INTERPOLATES = {
    "nearest-sizes-NCX": ((2, 3, 7, 13), {"mode": "nearest", "sizes": [13, 5], "data_format": "NCX"}),
    "nearest-scales-NXC": ((2, 7, 13, 3), {"mode": "nearest", "scales": [1.5, 0.5]}),
    "nearest-1d-pattern-scale": ((2, 17, 21), {"mode": "nearest", "scales": [0.809524], "data_format": "NCX"}),
    "linear-half_pixel": ((2, 3, 7, 13), {"mode": "linear", "sizes": [13, 6], "data_format": "NCX"}),
    "bilinear-align_corners-NXC": ((1, 7, 13, 2), {"mode": "bilinear", "sizes": [5, 37],
                                                   "coordinate_transformation_mode": "align_corners"}),
    "trilinear-scales": ((1, 2, 3, 5, 4), {"mode": "trilinear", "scales": [2.0, 0.6, 1.0], "data_format": "NCX"}),
}
cases("Interpolate", {name: lambda m, s=s, a=a: m.op("Interpolate", [m.input(s)], **a)
                      for name, (s, a) in INTERPOLATES.items()})
cases("Interpolate", {"sizes-input": lambda m: m.op(
    "Interpolate", [m.input((2, 3, 7, 13)), m.given([9, 5], S32)], out_shapes=[(2, 3, 9, 5)], mode="linear",
    data_format="NCX")})

RESIZES = {    # src, sizes, attributes: every coordinate transformation, every nearest mode, up and down
    f"{mode}-{ctm}-{nearest}": ((1, 3, 7, 11), (1, 3, 12, 16) if k % 2 else (1, 3, 5, 22),
                                {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest})
    for k, (mode, ctm, nearest) in enumerate(
        [("nearest", c, "round_prefer_floor") for c in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                                        "align_corners", "asymmetric")] +
        [("nearest", "asymmetric", n) for n in ("round_prefer_ceil", "floor", "ceil")] +
        [("linear", c, "round_prefer_floor") for c in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                                       "align_corners", "asymmetric")])}
RESIZES["nearest-scales-channels"] = ((2, 3, 8, 5), (2, 6, 16, 5), {"mode": "nearest", "scales": [1.0, 2.0, 2.0, 1.0],
                                                                     "coordinate_transformation_mode": "asymmetric",
                                                                     "nearest_mode": "floor"})
RESIZES["linear-scales-third"] = ((1, 2, 9, 7), (1, 2, 3, 21), {"mode": "linear", "scales": [1.0, 1.0, 0.3333333, 3.0]})
cases("Resize", {name: lambda m, s=s, o=o, a=a: m.op("Resize", [m.input(s)], sizes=list(o), **a)
                 for name, (s, o, a) in RESIZES.items()})

QUANTS = {
    "per_tensor-u8": ((7, 13, 37), U8, {"scales": [0.02], "zps": [100]}),
    "per_tensor-s8-no-zps": ((7, 37), S8, {"scales": [0.015]}),
    "per_channel-axis=1-s8": ((7, 3, 37), S8, {"qtype": "per_channel", "axis": 1, "scales": [0.01, 0.02, 0.04],
                                              "zps": [0, 3, -5]}),
}


def _quantize(m, shape, dtype, attrs):
    return m.op("Quantize", [m.input(shape)], outputs=(dtype,), **attrs)


def _dequantize(m, shape, dtype, attrs):
    return m.op("Dequantize", [m.input(shape, dtype)], **attrs)


cases("Quantize", {name: lambda m, c=c: _quantize(m, *c) for name, c in QUANTS.items()}, atol=1)
cases("Dequantize", {name: lambda m, c=c: _dequantize(m, *c) for name, c in QUANTS.items()}, atol=1e-4)

cases("DynamicQuantize", {
    "per_tensor": lambda m: m.op("DynamicQuantize", [m.input((7, 13, 37)), m.input((1,), low=0.01, high=0.02)],
                                 outputs=(S8,)),
    "per_channel-zps": lambda m: m.op("DynamicQuantize", [m.input((7, 13, 3)), m.input((13,), low=0.01, high=0.02),
                                                          m.given(np.arange(13) % 5, U8)],
                                      outputs=(U8,), qtype="per_channel", axis=1)}, atol=1)
cases("DynamicDequantize", {
    "per_tensor": lambda m: m.op("DynamicDequantize", [m.input((7, 37), U8), m.input((1,), low=0.01, high=0.02)]),
    "per_channel-zps": lambda m: m.op("DynamicDequantize", [m.input((7, 13, 3), S8), m.input((3,), low=0.01, high=0.1),
                                                            m.given([1, -2, 3], S8)], qtype="per_channel", axis=-1)})

# ---------------------------------------------------------------------------- backward

BACKWARD = {
    "ReLUBackward": [{}, {"use_dst": False}], "SigmoidBackward": [{}, {"use_dst": False}],
    "TanhBackward": [{}, {"use_dst": False}], "SqrtBackward": [{}, {"use_dst": False}],
    "EluBackward": [{"alpha": 0.5}, {"alpha": 0.5, "use_dst": False}],
    "ClampBackward": [{"min": -0.5, "max": 1.0}, {"min": -0.5, "max": 1.0, "use_dst": False}],
    "GELUBackward": [{}, {"mode": "gelu_tanh"}], "HardSigmoidBackward": [{"alpha": 0.3, "beta": 0.4}],
    "HardSwishBackward": [{}], "MishBackward": [{}], "SoftPlusBackward": [{}, {"beta": -1.0}], "AbsBackward": [{}],
}
for _kind, _variants in BACKWARD.items():
    cases(_kind, {"-".join(f"{k}={v}" for k, v in a.items()) or "default":
                  (lambda m, k=_kind, a=a: m.op(k, [m.positive((7, 13, 37)) if k == "SqrtBackward"
                                                   else m.input((7, 13, 37), low=-4, high=4), m.input((7, 13, 37))],
                                                **a))
                  for a in _variants})
for _kind in ("SoftMaxBackward", "LogSoftmaxBackward"):
    cases(_kind, {f"axis={a}": lambda m, k=_kind, a=a: m.op(
        k, [m.input((7, 13, 37)), m.input((7, 13, 37), low=0.0, high=1.0)], axis=a) for a in (-1, 1)})


def _bn_backward(m, fmt, shape, n_out, gamma):
    c = shape[1] if fmt == "NCX" else shape[-1]
    ins = [m.input(shape), m.input(shape), m.input((c,)), m.positive((c,))] + ([m.input((c,))] if gamma else [])
    return m.op("BatchNormTrainingBackward", ins, outputs=(F32,) * n_out, epsilon=0.0625, data_format=fmt)


cases("BatchNormTrainingBackward", {
    "NCX-all-outputs": lambda m: _bn_backward(m, "NCX", (2, 13, 7, 5), 3, True),
    "NXC-diff_src-only": lambda m: _bn_backward(m, "NXC", (2, 7, 5, 13), 1, False)})
for _kind in ("BiasAddBackward", "BiasAddBackprop"):
    cases(_kind, {fmt: lambda m, k=_kind, fmt=fmt: m.op(k, [m.input((2, 13, 7, 5))], data_format=fmt)
                  for fmt in ("NCX", "NXC")})


cases("ScaledDotProductAttention", {
    "key-transposed-mask": lambda m: m.op("ScaledDotProductAttention", [
        m.input((2, 3, 13, 8)), m.input((2, 3, 8, 37)), m.input((2, 3, 37, 7)), m.input((2, 1, 1, 37), low=-9, high=0)],
        scale=0.35, key_transposed=True),
    "key-no-mask": lambda m: m.op("ScaledDotProductAttention", [m.input((3, 13, 8)), m.input((37, 8)), m.input((37, 5))],
                                  key_transposed=False)})


# ---------------------------------------------------------------------------- our own kinds (the ONNX front end)

cases("Neg", {"f32": lambda m: m.op("Neg", [m.input((7, 13, 37))]),
              "s32": lambda m: m.op("Neg", [m.input((7, 37), S32)], outputs=(S32,))})
cases("Erf", {"": lambda m: m.op("Erf", [m.input((7, 13, 37), low=-3, high=3)])})
cases("Identity", {"f32": lambda m: m.op("Identity", [m.input((7, 37))]),
                   "bool": lambda m: m.op("Identity", [m.input((13, 7), BOOL)], outputs=(BOOL,))})
cases("Cast", {
    "f32-to-s32": lambda m: m.op("Cast", [m.input((7, 37), low=-50, high=50)], outputs=(S32,), to="s32"),
    "s64-to-f32": lambda m: m.op("Cast", [m.input((7, 37), S64)], to="f32"),
    "f32-to-bool": lambda m: m.op("Cast", [m.given(np.arange(-3, 4) / 2, F32)], outputs=(BOOL,), to="boolean"),
    "bool-to-f32": lambda m: m.op("Cast", [m.input((13, 7), BOOL)], to="f32"),
    "same-type": lambda m: m.op("Cast", [m.input((7, 37))], to="f32"),
    "s32-to-s64": lambda m: m.op("Cast", [m.input((7, 37), S32)], outputs=(S64,), to="s64"),
    "f32-to-s8": lambda m: m.op("Cast", [m.input((7, 37), low=-100, high=100)], outputs=(S8,), to="s8"),
    "s32-to-u8": lambda m: m.op("Cast", [m.given(np.arange(0, 250, 7), S32)], outputs=(U8,), to="u8"),
    "f32-to-u32": lambda m: m.op("Cast", [m.input((7, 37), low=0, high=4e9)], outputs=(U32,), to="u32"),
    "u64-to-f32": lambda m: m.op("Cast", [m.given(m.rng.integers(0, 2 ** 64 - 1, (7, 37), np.uint64), U64)], to="f32"),
    "f32-to-f64": lambda m: m.op("Cast", [m.input((7, 37))], outputs=(F64,), to="f64"),
    "f64-to-s32": lambda m: m.op("Cast", [m.input((7, 37), F64, low=-9e4, high=9e4)], outputs=(S32,), to="s32"),
    "u32-to-u64": lambda m: m.op("Cast", [m.given(np.arange(2 ** 32 - 37, 2 ** 32, dtype=np.uint32), U32)],
                                 outputs=(U64,), to="u64")})
cases("Pow", {"binary-broadcast": lambda m: m.op("Pow", [m.positive((7, 13, 37)), m.input((13, 1))]),
              "binary-scalar": lambda m: m.op("Pow", [m.positive((7, 37)), m.input(())])})
def _constant(m, values, dtype):
    t = m._tensor(dtype, np.shape(values), constant=True)
    m.feeds[t.id] = np.asarray(values, dtype.numpy)
    return t


cases("Gather", {
    "axis=0-s64": lambda m: m.op("Gather", [m.input((7, 13, 37)), m.given([[3, -1], [0, 6]], S64)]),
    "axis=1-s32": lambda m: m.op("Gather", [m.input((7, 13, 37)), m.given([12, -13, 5], S32)], axis=1),
    "axis=-1-constant": lambda m: m.op("Gather", [m.input((7, 37)), _constant(m, [36, 0, -37, 2, 2], S64)],
                                       axis=-1)})
cases("Slice", {
    "steps": lambda m: m.op("Slice", [m.input((7, 13, 37))], starts=[1, -2], ends=[100, 0], axes=[2, 1],
                            steps=[3, -4]),
    "negative-axes-default-steps": lambda m: m.op("Slice", [m.input((7, 37))], starts=[-5], ends=[-1], axes=[-2]),
    "clamped": lambda m: m.op("Slice", [m.input((13, 7))], starts=[-1000, 5], ends=[1000, -1000],
                              steps=[1, -2])})
cases("Pad", {
    mode: lambda m, mode=mode: m.op("Pad", [m.input((7, 13, 5))], pads_begin=[1, 0, 3], pads_end=[2, 6, -1],
                                    mode=mode, value=1.5)
    for mode in ("constant", "reflect", "edge", "wrap")})
cases("Pad", {"crop-only": lambda m: m.op("Pad", [m.input((7, 13))], pads_begin=[-1, -3], pads_end=[0, -2])})
cases("Expand", {
    "both-ways": lambda m: m.op("Expand", [m.input((7, 1, 37))], shape=[2, 1, 13, 1]),
    "same": lambda m: m.op("Expand", [m.input((7, 13))], shape=[7, 13]),
    "bool": lambda m: m.op("Expand", [m.input((1,), BOOL)], outputs=(BOOL,), shape=[7, 13])})


# ---------------------------------------------------------------------------- the tests

def test_every_lowered_kind_has_a_case():
    covered = {c.kind for c in CASES}
    missing = sorted(k.value for k in LOWERED_KINDS - covered - set(UNCOMPILABLE))
    assert not missing, f"lowered op kinds without a case in test_op_kinds.py: {missing}"
    assert not {c.kind for c in CASES} - LOWERED_KINDS, "a case for a kind that is not lowered"


def test_uncompilable_kinds_really_admit_no_compiled_dtypes():
    for kind in UNCOMPILABLE:
        for src, dst in itertools.product(COMPILED_DTYPES, repeat=2):
            op = Op(0, kind, [LogicalTensor(0, src, (2, 3))], [LogicalTensor(1, dst, (2, 3))])
            assert Graph().add_op(op, allow_exception=False) != "success", \
                f"{kind.value} {src.value} -> {dst.value} is valid: give it a case and drop it from UNCOMPILABLE"


# attribute values with no case: their compute is another value's, or they are not compiled
NO_CASE = {(OpKind.MatMul, "accumulation_mode", None): "f32 accumulation in every mode",
           (OpKind.Cast, "to", "BF16"): "bf16 is not a compiled data type",
           (OpKind.Cast, "to", "F16"): "f16 is not a compiled data type",
           (OpKind.DynamicDequantize, "qtype", "PER_GROUP"): "not compiled: it runs in the reference interpreter"}


def test_cases_cover_each_kinds_attribute_space():
    """Walks the op registry: every value of every enumerable attribute (its allowed strings, both
    bools) of every lowered kind appears in some case, so that reference and compiled code are
    compared over each kind's attribute space."""
    from tilefuse.graph_api.ops import REGISTRY, normalize_op
    seen: dict = {}
    for case in CASES:
        maker = GraphMaker(seed=0)
        case.build(maker)
        for op in maker.graph.ops:
            for name, value in {**normalize_op(op).attrs, **op.attrs}.items():
                if isinstance(value, (str, bool)):
                    seen.setdefault((op.kind, name), set()).add(value.upper() if isinstance(value, str) else value)
    missing = []
    for kind in sorted(LOWERED_KINDS - set(UNCOMPILABLE), key=lambda k: k.value):
        for name, spec in REGISTRY[kind].schema.attrs.items():
            values = {True, False} if spec.type == "bool" else {a.upper() for a in spec.allowed}
            if (kind, name, None) in NO_CASE:
                continue
            for value in sorted(values - seen.get((kind, name), set()), key=str):
                if (kind, name, value) not in NO_CASE:
                    missing.append(f"{kind.value}.{name}={value}")
    assert not missing, f"attribute values no case compiles: {missing}"


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_compiles_and_matches_the_reference(case):
    maker = GraphMaker(seed=len(case.id))
    case.build(maker)
    graph = maker.graph
    graph.finalize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_graph(graph)
    fallbacks = [str(w.message) for w in caught if "reference interpreter" in str(w.message)]
    assert not fallbacks, fallbacks
    partitions = graph.get_partitions()
    assert partitions and all(p.is_supported() for p in partitions)
    assert case.kind in {op.kind for p in partitions for op in p.get_ops()}
    got = compiled.run(maker.feeds)
    want = reference.run(graph, maker.feeds)
    assert got.keys() == want.keys()
    for tid, expected in want.items():
        actual = np.asarray(got[tid])
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, \
            (tid, actual.shape, actual.dtype, expected.shape, expected.dtype)
        if expected.dtype == bool:
            np.testing.assert_array_equal(actual, expected, err_msg=f"output {tid}")
        else:
            np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol, err_msg=f"output {tid}")
