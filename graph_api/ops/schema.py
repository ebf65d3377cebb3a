"""Op schemas: what an op of each kind must look like (inputs and outputs, attributes and
data-type rules, as the oneDNN Graph specification fixes them), ``validate_op`` and the
builders the op families (``graph_api/ops/<family>.py``) declare their schemas with.

Example:
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
    >>> get_schema(OpKind.MatMul).attrs["transpose_a"]
    AttrSpec(type='bool', required=False, default=False, allowed=(), fold_case=False)
    >>> a = LogicalTensor(0, DataType.f32, (2, 3)); b = LogicalTensor(1, DataType.f32, (3, 4))
    >>> validate_op(Op(7, OpKind.MatMul, [a, b], [LogicalTensor(2, DataType.f32, (2, 4))]))
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from ..logical_tensor import DataType, GraphError
from ..op import Op, OpKind
from .registry import op_def

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
    return op_def(kind).schema


def get_attr(op: Op, name: str):
    """The op's attribute ``name``, or the schema default when the op does not set it.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor
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
        >>> from tilefuse.graph_api import DataType, LogicalTensor
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> validate_op(Op(4, OpKind.Elu, [x], [y]))
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: op 4 (Elu): missing required attribute 'alpha'
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


# ---- builders for the families' declarations -------------------------------------------------------

_D = DataType
FP = frozenset({_D.f32, _D.f64, _D.bf16, _D.f16})
FP_S32 = FP | {_D.s32}
F32 = frozenset({_D.f32})
FP_PARAMS = frozenset({_D.f32, _D.f64, _D.bf16})     # norms' scale and shift
S32 = frozenset({_D.s32})
QUANT = frozenset({_D.u8, _D.s8, _D.f8_e5m2, _D.f8_e4m3})
ALL_TYPES = frozenset({_D.f32, _D.f64, _D.f16, _D.bf16, _D.s32, _D.s64, _D.s8, _D.u8, _D.u32, _D.u64, _D.boolean})


def optional(type_, default=None, allowed=(), fold_case=False) -> AttrSpec:
    """An optional attribute with its default.

    Example:
        >>> optional("s64", 1).default
        1
    """
    return AttrSpec(type_, False, default, tuple(allowed), fold_case)


def required(type_, allowed=()) -> AttrSpec:
    """A required attribute.

    Example:
        >>> required("f32").required
        True
    """
    return AttrSpec(type_, True, None, tuple(allowed))


def schema(kind, ins: str, outs: str, attrs=None, dtypes=None, n_in=None, n_out=None, checks=(),
           **flags) -> OpSchema:
    """An OpSchema from a compact spelling: ``ins``/``outs`` are ``"name:typevar ..."``,
    ``dtypes`` maps type variables to data types (default: ``T`` is any float), ``n_in``/``n_out``
    the allowed counts (default: every slot).

    Example:
        >>> s = schema("ReLU", "src:T", "dst:T")
        >>> s.inputs, sorted(s.num_inputs)
        ((Param(name='src', dtype='T'),), [1])
    """
    ins, outs = _params(ins), _params(outs)
    dtypes = dtypes if dtypes is not None else {"T": FP}
    return OpSchema(OpKind.parse(kind), ins, outs, _count_set(n_in, len(ins)), _count_set(n_out, len(outs)),
                    dict(attrs or {}), dtypes, tuple(checks), **flags)


def _params(spec: str) -> tuple:
    return tuple(Param(*p.split(":")) for p in spec.split())


def _count_set(counts, default):
    if counts is None:
        return frozenset({default})
    return counts if isinstance(counts, range) else frozenset(counts)


AUTO_PAD = optional("string", "None", ("None", "SAME_UPPER", "SAME_LOWER", "VALID"), fold_case=True)
DATA_FORMAT = optional("string", "NXC", ("NCX", "NXC"))
AUTO_BROADCAST = optional("string", "numpy", ("none", "numpy"))
