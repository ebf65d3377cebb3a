"""Op schemas: for every OpKind, its inputs and outputs, attributes and data-type rules, as the
oneDNN Graph specification fixes them (``src/graph/interface/op_def.hpp``), and ``validate_op``.

Example:
    >>> from graph_api import DataType, LogicalTensor, Op, OpKind
    >>> get_schema(OpKind.MatMul).attrs["transpose_a"]
    AttrSpec(type='bool', required=False, default=False, allowed=(), fold_case=False)
    >>> a = LogicalTensor(0, DataType.f32, (2, 3)); b = LogicalTensor(1, DataType.f32, (3, 4))
    >>> validate_op(Op(7, OpKind.MatMul, [a, b], [LogicalTensor(2, DataType.f32, (2, 4))]))
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from .logical_tensor import DataType, GraphError
from .op import Op, OpKind

ATTR_TYPES = ("s64", "s64[]", "f32", "f32[]", "string", "bool")


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its oneDNN type, whether it is required, its default and (for strings) the
    values oneDNN allows. ``fold_case`` accepts any letter case (oneDNN's ``auto_pad``).

    Example:
        >>> AttrSpec("string", default="NXC", allowed=("NCX", "NXC")).accepts("NCX")
        True
    """
    type: str
    required: bool = False
    default: object = None
    allowed: tuple = ()
    fold_case: bool = False

    def accepts(self, value) -> bool:
        """True when ``value`` has this attribute's type (ints count as f32; bools are only bools).

        Example:
            >>> AttrSpec("s64[]").accepts([1, 2]), AttrSpec("s64").accepts(True)
            (True, False)
        """
        return _has_type(self.type, value)


@dataclass(frozen=True)
class Param:
    """An input or output slot: oneDNN's name and type variable (``"any"``: unconstrained).

    Example:
        >>> get_schema("Select").inputs[0]
        Param(name='cond', dtype='T1')
    """
    name: str
    dtype: str


@dataclass(frozen=True)
class OpSchema:
    """What an op of one kind must look like. ``num_inputs``/``num_outputs`` are the allowed
    counts (a set or a range); ``dtypes`` maps each type variable to its allowed data types
    (slots sharing a variable must share a data type); ``checks`` are extra rules, each a
    function of the op returning an error reason or None.

    Example:
        >>> s = get_schema(OpKind.Convolution)
        >>> sorted(s.num_inputs), s.attrs["weights_format"].default
        ([2, 3], 'XIO')
    """
    kind: OpKind
    inputs: tuple
    outputs: tuple
    num_inputs: object
    num_outputs: object
    attrs: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=dict)
    checks: tuple = ()
    variadic: bool = False
    open_attrs: bool = False

    def input_param(self, i: int) -> Param | None:
        """The slot of input ``i`` (variadic ops repeat their single slot; None past the end).

        Example:
            >>> get_schema("Concat").input_param(5).name
            'src_i'
        """
        if self.variadic and self.inputs:
            return self.inputs[0]
        return self.inputs[i] if i < len(self.inputs) else None

    def output_param(self, i: int) -> Param | None:
        """The slot of output ``i`` (None past the end).

        Example:
            >>> get_schema("SoftMax").output_param(1)
            Param(name='stats', dtype='T3')
        """
        if self.variadic and self.outputs:
            return self.outputs[0]
        return self.outputs[i] if i < len(self.outputs) else None


def get_schema(kind) -> OpSchema:
    """The schema of an op kind (an OpKind or its oneDNN spelling).

    Example:
        >>> get_schema("ReLU").inputs
        (Param(name='src', dtype='T'),)
    """
    return _SCHEMAS[OpKind.parse(kind)]


def get_attr(op: Op, name: str):
    """The op's attribute ``name``, or the schema default when the op does not set it.

    Example:
        >>> from graph_api import DataType, LogicalTensor
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
        >>> get_attr(Op(0, OpKind.SoftMax, [x], [y]), "axis")
        1
    """
    if name in op.attrs:
        return op.attrs[name]
    spec = get_schema(op.kind).attrs.get(name)
    if spec is None:
        raise GraphError(f"op {op.id} ({op.kind.value}): no attribute {name!r} in its schema")
    return spec.default


def validate_op(op: Op) -> None:
    """Check an op against its schema; GraphError("op <id> (<Kind>): <reason>") for a wrong input
    or output count, a missing required, unknown or ill-typed attribute, a value outside the
    allowed set, or a data-type mismatch.

    Example:
        >>> from graph_api import DataType, LogicalTensor
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> validate_op(Op(4, OpKind.Elu, [x], [y]))
        Traceback (most recent call last):
        ...
        graph_api.logical_tensor.GraphError: op 4 (Elu): missing required attribute 'alpha'
    """
    reason = _check(op, get_schema(op.kind))
    if reason:
        raise GraphError(f"op {op.id} ({op.kind.value}): {reason}")


def _check(op: Op, s: OpSchema) -> str | None:
    for what, n, allowed in (("inputs", len(op.inputs), s.num_inputs), ("outputs", len(op.outputs), s.num_outputs)):
        if n not in allowed:
            return f"expected {_counts(allowed)} {what}, got {n}"
    for name, value in op.attrs.items():
        spec = s.attrs.get(name)
        if spec is None and s.open_attrs:
            continue
        if spec is None:
            known = ", ".join(sorted(s.attrs)) or "none"
            return f"unknown attribute {name!r} (known: {known})"
        if not spec.accepts(value):
            return f"attribute {name!r} must be {spec.type}, got {value!r}"
        if spec.allowed and not _allowed(spec, value):
            return f"attribute {name!r} is {value!r}; expected one of {list(spec.allowed)}"
    for name, spec in s.attrs.items():
        if spec.required and name not in op.attrs:
            return f"missing required attribute {name!r}"
    reason = _check_dtypes(op, s)
    if reason:
        return reason
    for check in s.checks:
        reason = check(op)
        if reason:
            return reason
    return None


def _check_dtypes(op: Op, s: OpSchema) -> str | None:
    seen: dict[str, tuple[DataType, str]] = {}
    slots = [("input", i, t, s.input_param(i)) for i, t in enumerate(op.inputs)]
    slots += [("output", i, t, s.output_param(i)) for i, t in enumerate(op.outputs)]
    for where, i, t, param in slots:
        if param is None or param.dtype == "any":
            continue
        label = f"{where} {i} ({param.name}, tensor {t.id})"
        allowed = s.dtypes[param.dtype]
        if t.dtype not in allowed:
            names = [d.value for d in DataType if d in allowed]
            return f"{label} has data type {t.dtype.value}; expected one of {names}"
        if param.dtype in seen and seen[param.dtype][0] is not t.dtype:
            first_dtype, first_label = seen[param.dtype]
            return f"{label} has data type {t.dtype.value} but {first_label} has {first_dtype.value}"
        seen.setdefault(param.dtype, (t.dtype, label))
    return None


def _allowed(spec: AttrSpec, value: str) -> bool:
    if spec.fold_case:
        return value.upper() in {a.upper() for a in spec.allowed}
    return value in spec.allowed


def _counts(allowed) -> str:
    if isinstance(allowed, range):
        if allowed.stop >= sys.maxsize:
            return f"at least {allowed.start}"
        return f"{allowed.start} to {allowed.stop - 1}"
    return " or ".join(str(n) for n in sorted(allowed))


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _has_type(t: str, v) -> bool:
    if t.endswith("[]"):
        return isinstance(v, (list, tuple)) and all(_has_type(t[:-2], x) for x in v)
    if t == "s64":
        return _is_int(v)
    if t == "f32":
        return _is_int(v) or isinstance(v, (float, np.floating))
    if t == "bool":
        return isinstance(v, (bool, np.bool_))
    if t == "string":
        return isinstance(v, str)
    raise GraphError(f"unknown attribute type {t!r}; expected one of {ATTR_TYPES}")


# ---- extra rules (oneDNN's op_def_constraint functions) -------------------------------------------

def _check_pads(op):
    pb, pe = op.attrs.get("pads_begin"), op.attrs.get("pads_end")
    if pb is not None and pe is not None and len(pb) != len(pe):
        return f"pads_begin {list(pb)} and pads_end {list(pe)} differ in length"
    return None


def _check_stats_outputs(op):
    keep_stats = get_attr(op, "keep_stats")
    want = 3 if keep_stats else 1
    if len(op.outputs) != want:
        return f"keep_stats={keep_stats} needs {want} outputs, got {len(op.outputs)}"
    return None


def _check_reduce_axes(op):
    has_axes = bool(op.attrs.get("axes"))
    if len(op.inputs) == 1 and not has_axes:
        return "axes must be given, as a non-empty attribute or as a second input"
    if len(op.inputs) == 2 and has_axes:
        return "axes given both as an attribute and as a second input"
    return None


def _check_interpolate(op):
    sizes, scales = op.attrs.get("sizes"), op.attrs.get("scales")
    if sizes and scales:
        return "only one of sizes and scales may be given"
    n_sizes_inputs = {OpKind.Interpolate: 2, OpKind.InterpolateBackward: 3}[op.kind]
    if not sizes and not scales and len(op.inputs) < n_sizes_inputs:
        return "one of sizes, scales or a sizes input must be given"
    return None


def _check_typecast(op):
    src, dst = op.inputs[0].dtype, op.outputs[0].dtype
    if src is dst:
        return f"input and output have the same data type {src.value}"
    if {src, dst} == {DataType.bf16, DataType.f16}:
        return "casting between bf16 and f16 is not supported"
    return None


def _check_pow(op):
    has_beta = op.attrs.get("beta") is not None
    if has_beta == (len(op.inputs) == 2):
        return "exactly one of the attribute 'beta' and an exponent input must be given"
    return None


def _check_cast(op):
    to = op.attrs.get("to")
    if op.outputs and to is not None and op.outputs[0].dtype.value != to:
        return f"attribute to={to!r} but the output has data type {op.outputs[0].dtype.value}"
    return None


def _check_slice(op):
    starts, ends = op.attrs.get("starts", ()), op.attrs.get("ends", ())
    axes, steps = op.attrs.get("axes"), op.attrs.get("steps")
    if len(starts) != len(ends):
        return f"starts {list(starts)} and ends {list(ends)} differ in length"
    for name, v in (("axes", axes), ("steps", steps)):
        if v is not None and len(v) != len(starts):
            return f"{name} {list(v)} must have one entry per start ({len(starts)})"
    if steps is not None and 0 in steps:
        return f"steps {list(steps)} must not be 0"
    return None


def _check_scales_zps(op):
    scales, zps = op.attrs.get("scales"), op.attrs.get("zps")
    if get_attr(op, "qtype") == "per_tensor" and scales is not None and len(scales) != 1:
        return f"per_tensor quantization takes one scale, got {len(scales)}"
    if scales is not None and zps is not None and len(zps) != len(scales):
        return f"{len(scales)} scales but {len(zps)} zero points"
    return None


# ---- the table --------------------------------------------------------------------------------------

_D = DataType
FP = frozenset({_D.f32, _D.bf16, _D.f16})
FP_S32 = FP | {_D.s32}
F32 = frozenset({_D.f32})
F32_BF16 = frozenset({_D.f32, _D.bf16})
S32 = frozenset({_D.s32})
QUANT = frozenset({_D.u8, _D.s8, _D.f8_e5m2, _D.f8_e4m3})


def _a(type_, default=None, allowed=(), fold_case=False):
    return AttrSpec(type_, False, default, tuple(allowed), fold_case)


def _req(type_, allowed=()):
    return AttrSpec(type_, True, None, tuple(allowed))


def _params(spec: str) -> tuple:
    return tuple(Param(*p.split(":")) for p in spec.split())


_SCHEMAS: dict[OpKind, OpSchema] = {}


def _def(kind, ins, outs, attrs=None, dtypes=None, n_in=None, n_out=None, checks=(), **flags):
    ins, outs = _params(ins), _params(outs)
    dtypes = dtypes if dtypes is not None else {"T": FP}
    _SCHEMAS[OpKind(kind)] = OpSchema(OpKind(kind), ins, outs, _count_set(n_in, len(ins)),
                                      _count_set(n_out, len(outs)), dict(attrs or {}), dtypes, tuple(checks),
                                      **flags)


def _count_set(counts, default):
    if counts is None:
        return frozenset({default})
    return counts if isinstance(counts, range) else frozenset(counts)


AUTO_PAD = _a("string", "None", ("None", "SAME_UPPER", "SAME_LOWER", "VALID"), fold_case=True)
DATA_FORMAT = _a("string", "NXC", ("NCX", "NXC"))
AUTO_BROADCAST = _a("string", "numpy", ("none", "numpy"))
GELU_MODE = _a("string", "gelu_erf", ("gelu_erf", "gelu_tanh"))
QTYPE = _a("string", "per_tensor", ("per_tensor", "per_channel"))
_WINDOW = {"strides": _req("s64[]"), "pads_begin": _req("s64[]"), "pads_end": _req("s64[]"), "auto_pad": AUTO_PAD,
           "data_format": DATA_FORMAT}
CONV_ATTRS = {**_WINDOW, "dilations": _req("s64[]"), "groups": _a("s64", 1),
              "weights_format": _a("string", "XIO", ("XIO", "OIX"))}
CONVT_ATTRS = {**CONV_ATTRS, "weights_format": _a("string", "XOI", ("XOI", "IOX"))}
POOL_ATTRS = {**_WINDOW, "kernel": _req("s64[]")}
REDUCE_ATTRS = {"axes": _a("s64[]", ()), "keep_dims": _a("bool", False)}
INTERP_ATTRS = {"mode": _req("string", ("nearest", "linear", "bilinear", "trilinear")),
                "sizes": _a("s64[]"), "scales": _a("f32[]"),
                "coordinate_transformation_mode": _a("string", "half_pixel", ("half_pixel", "align_corners")),
                "data_format": DATA_FORMAT}
NORM_ATTRS = {"keep_stats": _a("bool", True), "use_affine": _a("bool", True), "epsilon": _a("f32", 1e-5)}

# unary element-wise, forward: src:T -> dst:T
for _k, _attrs in {
        "Abs": {}, "Exp": {}, "HardSwish": {}, "Log": {}, "Mish": {}, "Reciprocal": {}, "ReLU": {},
        "Round": {}, "Sigmoid": {}, "Sqrt": {}, "Square": {}, "Tanh": {}, "Reorder": {},
        "Clamp": {"min": _req("f32"), "max": _req("f32")}, "Elu": {"alpha": _req("f32")},
        "GELU": {"mode": GELU_MODE}, "HardSigmoid": {"alpha": _req("f32"), "beta": _req("f32")},
        "LeakyReLU": {"alpha": _req("f32")},
        "SoftPlus": {"beta": _a("f32", 1.0)}, "LogSoftmax": {"axis": _a("s64", -1)}, "Erf": {}}.items():
    _def(_k, "src:T", "dst:T", _attrs)
# Pow: oneDNN's unary form (attribute beta) or the binary form of older oneDNN versions (and ONNX)
_def("Pow", "src:T exponent:T", "dst:T", {"beta": _a("f32"), "auto_broadcast": AUTO_BROADCAST}, n_in={1, 2},
     checks=[_check_pow])
_def("Neg", "src:T", "dst:T", {}, {"T": FP | {_D.s32, _D.s64, _D.s8}})

# unary element-wise, backward: src(or dst):T, diff_dst:T -> diff_src:T
USE_DST = {"use_dst": _a("bool", True)}
for _k, _attrs in {
        "AbsBackward": {}, "HardSwishBackward": {}, "MishBackward": {},
        "ClampBackward": {"min": _req("f32"), "max": _req("f32"), **USE_DST},
        "EluBackward": {"alpha": _req("f32"), **USE_DST}, "GELUBackward": {"mode": GELU_MODE},
        "HardSigmoidBackward": {"alpha": _req("f32"), "beta": _req("f32")}, "ReLUBackward": USE_DST,
        "SigmoidBackward": USE_DST, "SoftPlusBackward": {"beta": _a("f32", 1.0)}, "SqrtBackward": USE_DST,
        "TanhBackward": USE_DST}.items():
    _def(_k, "src:T diff_dst:T", "diff_src:T", _attrs)
_def("LogSoftmaxBackward", "diff_dst:T dst:T", "diff_src:T", {"axis": _a("s64", -1)})
_def("SoftMax", "src:T1", "dst:T2 stats:T3",
     {"axis": _a("s64", 1), "mode": _a("string", "none", ("none", "inf_as_zero"))},
     {"T1": FP, "T2": FP, "T3": F32}, n_out={1, 2})
_def("SoftMaxBackward", "diff_dst:T1 dst:T1", "diff_src:T2", {"axis": _a("s64", 1)}, {"T1": FP, "T2": FP})

# binary element-wise: both inputs and the output share one data type
for _k in ("Add", "Subtract"):
    _def(_k, "src_0:T src_1:T", "dst:T", {"auto_broadcast": AUTO_BROADCAST}, {"T": FP_S32})
for _k in ("Multiply", "Divide", "Maximum", "Minimum", "SquaredDifference"):
    _def(_k, "src_0:T src_1:T", "dst:T", {"auto_broadcast": AUTO_BROADCAST})
_def("GreaterEqual", "src_0:T1 src_1:T1", "dst:T2", {"auto_broadcast": AUTO_BROADCAST},
     {"T1": FP_S32, "T2": frozenset({_D.boolean})})
_def("Select", "cond:T1 src_0:T2 src_1:T2", "dst:T2", {"auto_broadcast": AUTO_BROADCAST},
     {"T1": frozenset({_D.boolean}), "T2": FP})
_def("PReLU", "src:T slope:T", "dst:T", {"data_format": DATA_FORMAT, "per_channel_broadcast": _a("bool", True)})
_def("PReLUBackward", "src:T slope:T diff_dst:T", "diff_src:T diff_slope:T", {"data_format": DATA_FORMAT})
_def("BiasAdd", "src:T bias:T", "dst:T", {"data_format": DATA_FORMAT})
for _k in ("BiasAddBackward", "BiasAddBackprop"):
    _def(_k, "diff_dst:T", "diff_bias:T", {"data_format": DATA_FORMAT})

# convolutions and pooling
_def("Convolution", "src:T weights:T bias:T", "dst:T", CONV_ATTRS, n_in={2, 3}, checks=[_check_pads])
_def("ConvolutionBackwardData", "diff_dst:T1 weights:T1 dst_shape:T2", "diff_src:T1",
     {**CONV_ATTRS, "output_padding": _a("s64[]"), "dst_shape": _a("s64[]")}, {"T1": FP, "T2": S32},
     n_in={2, 3}, checks=[_check_pads])
_def("ConvolutionBackwardWeights", "src:T1 diff_dst:T1 weights_shape:T2", "diff_weights:T1",
     {**CONV_ATTRS, "weights_shape": _a("s64[]")}, {"T1": FP, "T2": S32}, n_in={2, 3}, checks=[_check_pads])
_def("ConvTranspose", "src:T weights:T bias:T", "dst:T", {**CONVT_ATTRS, "output_padding": _a("s64[]")},
     n_in={2, 3}, checks=[_check_pads])
_def("ConvTransposeBackwardData", "diff_dst:T weights:T", "diff_src:T", CONVT_ATTRS, checks=[_check_pads])
_def("ConvTransposeBackwardWeights", "src:T1 diff_dst:T1 weights_shape:T2", "diff_weights:T1",
     {**CONVT_ATTRS, "weights_shape": _a("s64[]")}, {"T1": FP, "T2": S32}, n_in={2, 3}, checks=[_check_pads])
_def("MaxPool", "src:T", "dst:T",
     {**POOL_ATTRS, "dilations": _a("s64[]"), "rounding_type": _a("string", "floor", ("floor", "ceil"))},
     checks=[_check_pads])
_def("MaxPoolBackward", "src:T diff_dst:T", "diff_src:T", {**POOL_ATTRS, "dilations": _a("s64[]")},
     checks=[_check_pads])
_def("AvgPool", "src:T", "dst:T",
     {**POOL_ATTRS, "exclude_pad": _req("bool"), "rounding_type": _a("string", "floor", ("floor", "ceil"))},
     checks=[_check_pads])
_def("AvgPoolBackward", "diff_dst:T src_shape:T1", "diff_src:T",
     {**POOL_ATTRS, "exclude_pad": _req("bool"), "src_shape": _a("s64[]")}, {"T": FP, "T1": S32},
     n_in={1, 2}, checks=[_check_pads])
_def("MatMul", "src:T weights:T bias:T", "dst:T1",
     {"transpose_a": _a("bool", False), "transpose_b": _a("bool", False),
      "accumulation_mode": _a("string", "strict", ("strict", "relaxed", "any", "f32", "s32", "f16"))},
     {"T": FP, "T1": FP}, n_in={2, 3})

# normalizations
BN = {"epsilon": _req("f32"), "data_format": DATA_FORMAT}
_def("BatchNormInference", "src:T1 gamma:T2 beta:T2 mean:T2 variance:T2", "dst:T1", BN, {"T1": FP, "T2": F32_BF16})
_def("BatchNormForwardTraining", "src:T1 mean:T2 variance:T2 gamma:T2 beta:T2",
     "dst:T1 running_mean:T2 running_variance:T2 batch_mean:T2 batch_variance:T2",
     {**BN, "momentum": _a("f32")}, {"T1": FP, "T2": F32_BF16}, n_in={3, 4, 5})
_def("BatchNormTrainingBackward", "src:T1 diff_dst:T1 mean:T2 variance:T2 gamma:T2",
     "diff_src:T1 diff_gamma:T2 diff_beta:T2", BN, {"T1": FP, "T2": F32_BF16}, n_in={4, 5}, n_out={1, 2, 3})
_def("LayerNorm", "src:T1 gamma:T2 beta:T2", "dst:T1 mean:T2 variance:T2",
     {**NORM_ATTRS, "begin_norm_axis": _a("s64", -1)}, {"T1": FP, "T2": F32_BF16}, n_in={1, 3}, n_out={1, 3},
     checks=[_check_stats_outputs])
_def("LayerNormBackward", "src:T1 diff_dst:T1 mean:T2 variance:T2 gamma:T2 beta:T2",
     "diff_src:T1 diff_gamma:T2 diff_beta:T2",
     {"begin_norm_axis": _a("s64", -1), "use_affine": _a("bool", True), "epsilon": _a("f32", 1e-5)},
     {"T1": FP, "T2": F32_BF16}, n_in={4, 5, 6}, n_out={1, 3})
_def("GroupNorm", "src:T1 gamma:T2 beta:T2", "dst:T1 mean:T2 variance:T2",
     {**NORM_ATTRS, "groups": _req("s64"), "data_format": DATA_FORMAT}, {"T1": FP, "T2": F32_BF16},
     n_in={1, 3}, n_out={1, 3}, checks=[_check_stats_outputs])
_def("RMSNorm", "src:T1 gamma:T2", "dst:T1", {"begin_norm_axis": _a("s64", -1), "epsilon": _a("f32", 1e-5)},
     {"T1": FP, "T2": FP}, n_in={1, 2})

# reductions
for _k in ("ReduceL1", "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum"):
    _def(_k, "src:T1 axes:T2", "dst:T1", REDUCE_ATTRS, {"T1": FP, "T2": S32}, n_in={1, 2},
         checks=[_check_reduce_axes])

# data movement
_def("Concat", "src_i:T", "dst:T", {"axis": _req("s64")}, n_in=range(1, 65), variadic=True)
_def("StaticReshape", "src:T", "dst:T", {"shape": _req("s64[]"), "special_zero": _req("bool")})
_def("StaticTranspose", "src:T", "dst:T", {"order": _req("s64[]")})
_def("TypeCast", "src:T1", "dst:T2", {}, {"T1": FP, "T2": FP}, checks=[_check_typecast])
_def("Interpolate", "src:T1 sizes:T2", "dst:T1", INTERP_ATTRS, {"T1": FP, "T2": S32}, n_in={1, 2},
     checks=[_check_interpolate])
_def("InterpolateBackward", "src:T1 diff_dst:T1 sizes:T2", "diff_src:T1", INTERP_ATTRS, {"T1": FP, "T2": S32},
     n_in={2, 3}, checks=[_check_interpolate])
_def("GenIndex", "src:T1", "dst:T2", {"axis": _req("s64")}, {"T1": FP, "T2": S32})
_def("Dropout", "src:T seed:T_seed offset:T_offset probability:T_p", "dst:T mask:T_mask", {},
     {"T": FP, "T_seed": frozenset({_D.s64}), "T_offset": frozenset({_D.s64}), "T_p": F32,
      "T_mask": frozenset({_D.u8})}, n_out={1, 2})

# our own kinds for the ONNX front end (see OpKind)
ALL_TYPES = frozenset({_D.f32, _D.f16, _D.bf16, _D.s32, _D.s64, _D.s8, _D.u8, _D.boolean})
_def("Identity", "src:T", "dst:T", {}, {"T": ALL_TYPES})
_def("Cast", "src:T1", "dst:T2", {"to": _req("string", tuple(d.value for d in sorted(ALL_TYPES, key=str)))},
     {"T1": ALL_TYPES, "T2": ALL_TYPES}, checks=[_check_cast])
_def("Gather", "src:T1 indices:T2", "dst:T1", {"axis": _a("s64", 0)},
     {"T1": ALL_TYPES, "T2": frozenset({_D.s32, _D.s64})})
_def("Slice", "src:T", "dst:T", {"starts": _req("s64[]"), "ends": _req("s64[]"), "axes": _a("s64[]"),
                                 "steps": _a("s64[]")}, {"T": ALL_TYPES}, checks=[_check_slice])
_def("Pad", "src:T", "dst:T", {"pads_begin": _req("s64[]"), "pads_end": _req("s64[]"),
                               "mode": _a("string", "constant", ("constant", "reflect", "edge", "wrap")),
                               "value": _a("f32", 0.0)}, {"T": ALL_TYPES}, checks=[_check_pads])
_def("Expand", "src:T", "dst:T", {"shape": _req("s64[]")}, {"T": ALL_TYPES})

# quantization
Q_ATTRS = {"qtype": QTYPE, "axis": _a("s64", 1), "scales": _req("f32[]"), "zps": _a("s64[]")}
_def("Quantize", "src:T1", "dst:T2", Q_ATTRS, {"T1": F32, "T2": QUANT}, checks=[_check_scales_zps])
_def("Dequantize", "src:T1", "dst:T2", Q_ATTRS, {"T1": QUANT, "T2": F32}, checks=[_check_scales_zps])
_def("DynamicQuantize", "src:T1 scales:T1 zps:T2", "dst:T3",
     {"qtype": QTYPE, "axis": _a("s64", 1), "mask": _a("s64")},
     {"T1": F32, "T2": frozenset({_D.u8, _D.s8, _D.s32}), "T3": QUANT}, n_in={2, 3})
_def("DynamicDequantize", "src:T1 scales:T2 zps:T3", "dst:T2",
     {"qtype": _a("string", "per_tensor", ("per_tensor", "per_channel", "per_group")), "axis": _a("s64", 1),
      "mask": _a("s64"), "group_shape": _a("s64[]")},
     {"T1": QUANT | {_D.s4, _D.u4}, "T2": FP, "T3": frozenset({_D.u4, _D.s4, _D.u8, _D.s8, _D.s32})}, n_in={2, 3})

# graph plumbing
_def("End", "src:any", "", {}, {}, n_in={1}, n_out={0})
_def("Wildcard", "src:any", "dst:any", {}, {}, n_in=range(0, sys.maxsize), n_out=range(0, sys.maxsize),
     variadic=True, open_attrs=True)

_missing = set(OpKind) - set(_SCHEMAS)
assert not _missing, f"op kinds without a schema: {sorted(k.value for k in _missing)}"
