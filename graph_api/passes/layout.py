"""Layout planning: 2-D convolutions run channels-last, and so does what lies between them.

A convolution in NCHW reads its input one pixel at a time across channel planes and writes
each tile of its channels-last accumulator back with a scatter. Channels-last (NHWC) gives
it contiguous pixels and a contiguous store. This pass rewrites every 2-D ``Convolution``
in ``NCX`` without groups, in groups of at least ``CHANNELS_LAST_GROUP_WIDTH`` channels or
of 2 to 4 (run as diagonals), or depthwise with bound weights (which it permutes to HWIO,
``XIO``: a vector of channels reads one contiguous row of them), to ``NXC``, and carries the
channels-last tensors through the ops that do not care about the order of their axes, so
that a chain of convolutions converts once at its start and once where something needs
NCHW again (TVM's layout alteration,
oneDNN's channels-last tags). A model's own permutes between the layouts (ConvNeXt's, around
each block's norm and dense layers) fold away. Carried through, when their activation input
is channels-last:

* elementwise unary ops, and binary ones whose other operand is channels-last too, a
  constant (permuted here) or a scalar; a 4-D operand in NCHW is converted;
* ``MaxPool``, ``AvgPool``, ``BatchNormInference`` and ``BiasAdd`` (their ``data_format``
  becomes ``NXC``);
* ``Concat`` along the channels (its axis becomes the last), and a ``Slice`` of channels;
* reductions over exactly the two spatial axes (global pooling): their result keeps the
  channels last, or is the NCHW result itself when the reduced axes are dropped.

The pass leaves a graph alone unless at least two thirds of its NCHW convolutions can run
channels-last: with narrow grouped convolutions between them, tensors would flip between
the layouts at each one, and the transposes cost more than the convolutions gain. For the
same reason it drops a plan that transposes a tensor of some size between two of its ops
more than once per four convolutions (ZFNet's local response normalizations flip twice
each, among five convolutions). Nor does it convert a graph whose only convolutions are
depthwise: they run about as fast in NCHW, and would only add the transposes.

Anything else that reads a channels-last tensor, and every graph output, gets it back in
NCHW from a ``StaticTranspose`` that produces the original tensor id, so the graph's outputs
keep their ids, shapes and values. Channels-last tensors are new tensors with new ids.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> f = DataType.f32
    >>> x = LogicalTensor(0, f, (1, 2, 5, 5)); w = LogicalTensor(1, f, (4, 2, 3, 3), property_type=PropertyType.constant)
    >>> y = LogicalTensor(2, f, (1, 4, 3, 3)); z = LogicalTensor(3, f, (1, 4, 3, 3))
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.Convolution, [x, w], [y], {"strides": [1, 1], "pads_begin": [0, 0],
    ...     "pads_end": [0, 0], "dilations": [1, 1], "data_format": "NCX", "weights_format": "OIX"}))
    >>> _ = g.add_op(Op(1, OpKind.ReLU, [y], [z])); g.bind_constant(1, np.ones((4, 2, 3, 3))); g.finalize()
    >>> [(op.kind.value, op.attrs.get("order")) for op in plan_layouts(g).topological_ops()]
    [('StaticTranspose', [0, 2, 3, 1]), ('Convolution', None), ('ReLU', None), ('StaticTranspose', [0, 3, 1, 2])]
"""
from __future__ import annotations

import math

from tilefuse.tensorir.ops.window import runs_as_diagonals

from ..ir import GraphIR
from ..logical_tensor import LogicalTensor
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import OIX_TO_XIO, FreshIds, as_ir, clone_op, output_ids, permuted_constant, transpose_order

TO_CHANNELS_LAST = [0, 2, 3, 1]      # NCHW -> NHWC
FLIP_MIN_ELEMENTS = 4096             # a transpose of fewer elements (a pooled vector) costs next to nothing
FLIPS_PER_CONVOLUTION = 4            # a plan with a flip for every 4 convolutions or fewer is dropped
TO_CHANNELS_FIRST = [0, 3, 1, 2]     # NHWC -> NCHW
CHANNELS_LAST_GROUP_WIDTH = 8        # grouped convolutions with groups this wide run channels-last
LAYOUT_TRANSPOSE = "(layout transpose)"   # the name of the transposes the plan adds: no op of the model

_UNARY = frozenset(OpKind.parse(k) for k in (
    "Abs", "Exp", "Log", "ReLU", "Round", "Sigmoid", "Sqrt", "Square", "Tanh", "Reciprocal", "Mish", "HardSwish",
    "Clamp", "Elu", "LeakyReLU", "HardSigmoid", "SoftPlus", "GELU", "Erf", "Neg"))
_BINARY = frozenset(OpKind.parse(k) for k in (
    "Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "SquaredDifference"))
ELEMENTWISE = _UNARY | _BINARY      # the kinds that read every input at the output's index (broadcast)
_WITH_FORMAT = frozenset({OpKind.MaxPool, OpKind.AvgPool, OpKind.BatchNormInference, OpKind.BiasAdd})
_REDUCTIONS = frozenset(k for k in OpKind if k.value.startswith("Reduce"))


def plan_layouts(graph) -> GraphIR:
    """A new IR in which 2-D NCHW convolutions, and the ops between them that allow it, run
    channels-last (see the module docstring); the input graph is not modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); plan_layouts(g).ops
        []
    """
    graph = as_ir(graph, "plan_layouts")
    convs = [op for op in graph.ops if op.kind is OpKind.Convolution and get_attr(op, "data_format") == "NCX"]
    values = graph.constant_values
    dense = sum(_is_nchw_conv(op) for op in convs)
    converted = dense + sum(_is_depthwise(op, values) for op in convs)
    if not dense or 3 * converted < 2 * len(convs):
        return graph            # depthwise ones alone gain too little to pay for the transposes
    planned = _Planner(graph).run()
    ends = {t.id for t in graph.get_input_ports()} | set(output_ids(graph))    # converted once, needed anyway
    flips = [op for op in planned.ops if op.kind is OpKind.StaticTranspose
             and op.inputs[0].id not in ends and op.outputs[0].id not in ends
             and math.prod(op.inputs[0].shape) >= FLIP_MIN_ELEMENTS]
    return graph if FLIPS_PER_CONVOLUTION * len(flips) > converted else planned


def _is_nchw_conv(op: Op) -> bool:
    """A 2-D NCHW convolution without groups, or in groups of at least
    ``CHANNELS_LAST_GROUP_WIDTH`` input and output channels each (RegNet's, ResNeXt's later
    stages): the complex template tiles a group's channels in channels-last; or of 2 to 4
    (ResNeXt's first stage), computed as diagonals (``ops.window.runs_as_diagonals``): in
    ResNeXt-50 its three ran 239-255 us in-model, where in NCHW they took 119-130 us and the
    two transposes around each 230-350 us. Depthwise ones are ``_is_depthwise``; groups of 5
    to 7 channels have no fast channels-last schedule."""
    if op.kind is not OpKind.Convolution or get_attr(op, "data_format") != "NCX" or \
            not (_is_4d(op.inputs[0]) and _is_4d(op.outputs[0])):
        return False
    groups = get_attr(op, "groups")
    if groups == 1:
        return True
    weights = op.inputs[1]
    if not weights.is_known():
        return False
    icg, ocg = weights.shape[1], op.outputs[0].shape[1] // groups
    return min(icg, ocg) >= CHANNELS_LAST_GROUP_WIDTH or runs_as_diagonals(groups, icg, ocg, "NXC")


def _is_depthwise(op: Op, values: dict) -> bool:
    """A 2-D NCHW depthwise convolution (one input and one output channel per group) with
    bound weights in OIX: channels-last, the window template vectorizes its channels, with
    the weights permuted to XIO so that a vector of channels reads one contiguous row."""
    if op.kind is not OpKind.Convolution or get_attr(op, "data_format") != "NCX" or \
            get_attr(op, "weights_format") != "OIX" or \
            not (_is_4d(op.inputs[0]) and _is_4d(op.outputs[0]) and _is_4d(op.inputs[1])):
        return False
    weights, groups = op.inputs[1], get_attr(op, "groups")
    return weights.id in values and groups > 1 and weights.shape[:2] == (groups, 1) and \
        op.inputs[0].shape[1] == groups == op.outputs[0].shape[1]


def _is_4d(t: LogicalTensor) -> bool:
    return t.is_known() and len(t.shape) == 4


def _permuted(shape, order) -> tuple:
    return tuple(shape[k] for k in order)


class _Planner:
    """One walk over the ops in topological order, deciding each op's layout."""

    def __init__(self, graph: GraphIR):
        self.graph = graph
        self.values = graph.constant_values
        self.new_values: dict = {}
        self.fresh = FreshIds(graph)
        self.last: dict[int, LogicalTensor] = {}     # NCHW tensor id -> its channels-last tensor
        self.first: set[int] = set()                 # ids whose NCHW form is produced (by the op or a transpose)
        self.ops: list[Op] = []
        self.alias: dict[int, LogicalTensor] = {}    # a model's permute to NHWC -> the channels-last tensor

    def _folds_permute(self, op: Op, outputs: set) -> bool:
        """Whether ``op`` is a model's own permute between the layouts that the plan makes
        needless (ConvNeXt's blocks permute each convolution's output to NHWC for their norm
        and dense layers, and back): to NHWC, of a tensor whose channels-last form exists,
        is that form; back to NCHW, of a tensor no op carried, has that tensor as its
        channels-last form (a transpose is made where the NCHW one is needed, as for any)."""
        if op.kind is not OpKind.StaticTranspose or not (_is_4d(op.inputs[0]) and _is_4d(op.outputs[0])):
            return False
        order = transpose_order(op)
        source, out = op.inputs[0], op.outputs[0]
        if order == TO_CHANNELS_LAST and source.id in self.last and out.id not in outputs:
            self.alias[out.id] = self.last[source.id]
            return True
        if order == TO_CHANNELS_FIRST and source.id not in self.last:
            self.last[out.id] = source
            return True
        return False

    def run(self) -> GraphIR:
        outputs = set(output_ids(self.graph))
        for op in self.graph.topological_ops():
            if self.alias and any(t.id in self.alias for t in op.inputs):
                op = clone_op(op, inputs=[self.alias.get(t.id, t) for t in op.inputs])
            if self._folds_permute(op, outputs):
                continue
            converted = self._convert(op)
            if converted is None:
                self.ops.append(clone_op(op, inputs=[self._nchw(t) for t in op.inputs]))
                self.first.update(t.id for t in op.outputs)
            else:
                self.ops.append(converted)
        for tid in output_ids(self.graph):
            self._nchw(self.graph.tensor(tid))
        return self.graph.with_ops(self.ops, self.new_values)

    # ---- the two conversions -----------------------------------------------------------------

    def _nchw(self, t: LogicalTensor) -> LogicalTensor:
        """``t`` itself, after a transpose back from channels-last when only that form exists."""
        if t.id in self.last and t.id not in self.first:
            self.ops.append(Op(self.fresh.op_id(), OpKind.StaticTranspose, [self.last[t.id]], [t],
                               {"order": list(TO_CHANNELS_FIRST)}, name=LAYOUT_TRANSPOSE))
            self.first.add(t.id)
        return t

    def _channels_last(self, t: LogicalTensor) -> LogicalTensor:
        """The channels-last form of the 4-D NCHW tensor ``t``: known, a permuted constant, or
        a new transpose."""
        if t.id in self.last:
            return self.last[t.id]
        if t.id in self.values:
            new = permuted_constant(self.fresh, t, self.values[t.id], TO_CHANNELS_LAST, self.new_values)
        else:
            new = self.fresh.variable(t, _permuted(t.shape, TO_CHANNELS_LAST))
            self.ops.append(Op(self.fresh.op_id(), OpKind.StaticTranspose, [t], [new],
                               {"order": list(TO_CHANNELS_LAST)}, name=LAYOUT_TRANSPOSE))
        self.last[t.id] = new
        return new

    def _operand(self, t: LogicalTensor, rank: int):
        """A binary op's operand in channels-last: a 4-D tensor converted, a constant of lower
        rank broadcast to 4-D and permuted, a one-element tensor as it is; None otherwise."""
        if not t.is_known():
            return None
        if t.id in self.last or (_is_4d(t) and rank == 4):
            return self._channels_last(t)
        size = math.prod(t.shape)
        if size == 1:
            return t
        if t.id in self.values and len(t.shape) < rank:
            value = self.values[t.id].reshape((1,) * (rank - len(t.shape)) + tuple(t.shape))
            return permuted_constant(self.fresh, t, value, TO_CHANNELS_LAST, self.new_values)
        return None

    # ---- which ops run channels-last ---------------------------------------------------------

    def _convert(self, op: Op):
        """The op rewritten to channels-last, or None when it stays as it is."""
        if _is_nchw_conv(op):
            return self._rewrite(op, [self._channels_last(op.inputs[0]), *op.inputs[1:]], {"data_format": "NXC"})
        if _is_depthwise(op, self.values):
            weights = op.inputs[1]
            xio = permuted_constant(self.fresh, weights, self.values[weights.id], OIX_TO_XIO, self.new_values)
            return self._rewrite(op, [self._channels_last(op.inputs[0]), xio, *op.inputs[2:]],
                                 {"data_format": "NXC", "weights_format": "XIO"})
        ins = op.inputs
        if not any(t.id in self.last for t in ins):
            return None
        if len(op.outputs) != 1 or not _is_4d(op.outputs[0]):
            return self._convert_reduction(op)
        if op.kind in _UNARY and len(ins) == 1:
            return self._rewrite(op, [self.last[ins[0].id]], {})
        if op.kind in _BINARY and len(ins) == 2:
            operands = [self._operand(t, 4) for t in ins]
            return None if None in operands else self._rewrite(op, operands, {})
        if op.kind in _WITH_FORMAT and ins[0].id in self.last and get_attr(op, "data_format") == "NCX":
            return self._rewrite(op, [self.last[ins[0].id], *ins[1:]], {"data_format": "NXC"})
        if op.kind is OpKind.Concat and get_attr(op, "axis") % 4 == 1 and all(_is_4d(t) for t in ins):
            return self._rewrite(op, [self._channels_last(t) for t in ins], {"axis": 3})
        if op.kind is OpKind.Slice and ins[0].id in self.last and [a % 4 for a in get_attr(op, "axes") or ()] == [1] \
                and all(s == 1 for s in get_attr(op, "steps") or [1]):
            return self._rewrite(op, [self.last[ins[0].id]], {"axes": [3]})
        return self._convert_reduction(op)

    def _convert_reduction(self, op: Op):
        """A reduction over the two spatial axes of a channels-last tensor, or None."""
        if op.kind not in _REDUCTIONS or len(op.inputs) != 1 or op.inputs[0].id not in self.last:
            return None
        axes = sorted(a % 4 for a in get_attr(op, "axes"))
        if axes != [2, 3]:
            return None
        if get_attr(op, "keep_dims"):
            return self._rewrite(op, [self.last[op.inputs[0].id]], {"axes": [1, 2]})
        self.first.add(op.outputs[0].id)          # (N, C) either way
        return clone_op(op, inputs=[self.last[op.inputs[0].id]], attrs={**op.attrs, "axes": [1, 2]})

    def _rewrite(self, op: Op, inputs: list, attrs: dict) -> Op:
        """``op`` on channels-last ``inputs``, writing a new channels-last output."""
        out = op.outputs[0]
        new = self.fresh.variable(out, _permuted(out.shape, TO_CHANNELS_LAST))
        self.last[out.id] = new
        return clone_op(op, inputs=inputs, outputs=[new], attrs={**op.attrs, **attrs})
