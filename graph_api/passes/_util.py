"""Helpers shared by the passes: copying ops and rebuilding graphs (never touching the input)."""
from __future__ import annotations

import numpy as np

from ..ir import GraphIR
from ..logical_tensor import GraphError, LogicalTensor, PropertyType
from ..op import Op, OpKind
from ..ops.schema import get_attr


OIX_TO_XIO = (2, 3, 1, 0)      # a 2-D convolution's weights (O, C, kh, kw) -> (kh, kw, C, O)


def copy_attrs(attrs: dict) -> dict:
    """A copy of an attribute dict deep enough that list values are not shared."""
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in attrs.items()}


def clone_op(op: Op, *, kind=None, inputs=None, outputs=None, attrs=None, folded=()) -> Op:
    """A new Op like ``op`` (same id, name and covers, with those of the ops ``folded`` into
    it) with some parts replaced."""
    return Op(op.id, op.kind if kind is None else kind,
              list(op.inputs if inputs is None else inputs),
              list(op.outputs if outputs is None else outputs),
              copy_attrs(op.attrs if attrs is None else attrs), name=op.name, covers=covered_by([op, *folded]))


def covered_by(ops) -> tuple:
    """The names of the user's ops that ``ops`` stand for, in order, once each.

    Example:
        >>> from tilefuse.graph_api import Op, OpKind
        >>> covered_by([Op(0, OpKind.ReLU, name="a"), Op(1, OpKind.Abs, name="b", covers=["b", "a"])])
        ('a', 'b')
    """
    return tuple(dict.fromkeys(name for op in ops for name in op.covers))


def as_ir(graph, pass_name: str) -> GraphIR:
    """The IR a pass works on: ``graph`` itself, or the IR of a finalized ``Graph``."""
    if not graph.is_finalized:
        raise GraphError(f"{pass_name} needs a finalized graph")
    return graph if isinstance(graph, GraphIR) else graph.ir()


def output_ids(graph: GraphIR) -> list[int]:
    """The ids of the graph's output ports (unconsumed produced tensors and End inputs)."""
    return [t.id for t in graph.get_output_ports()]


def substitute(graph: GraphIR, op: Op, subst: dict) -> Op:
    """A copy of ``op`` whose inputs are renamed through ``subst`` (tensor id -> tensor id)."""
    ins = [graph.tensor(subst[t.id]) if t.id in subst else t for t in op.inputs]
    return clone_op(op, inputs=ins)


class FreshIds:
    """New tensor and op ids for a pass, past the ones a graph uses."""

    def __init__(self, graph: GraphIR):
        self._tensor = max(graph.tensors, default=-1) + 1
        self._op = max((op.id for op in graph.ops), default=-1) + 1

    def constant(self, like: LogicalTensor, shape) -> LogicalTensor:
        """A new constant logical tensor of ``like``'s type."""
        self._tensor += 1
        return LogicalTensor(self._tensor - 1, like.dtype, tuple(shape), property_type=PropertyType.constant)

    def variable(self, like: LogicalTensor, shape=None) -> LogicalTensor:
        """A new variable logical tensor of ``like``'s type, with ``like``'s shape or ``shape``."""
        self._tensor += 1
        return LogicalTensor(self._tensor - 1, like.dtype, like.shape if shape is None else tuple(shape))

    def op_id(self) -> int:
        self._op += 1
        return self._op - 1


def permuted_constant(fresh: FreshIds, like: LogicalTensor, value: np.ndarray, order, new_values: dict) -> LogicalTensor:
    """A new constant of ``like``'s type holding ``value`` transposed by ``order`` (contiguous,
    read-only), its value put in ``new_values`` (tensor id -> value).

    Example:
        >>> from tilefuse.graph_api import DataType
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> w, new_values = LogicalTensor(0, DataType.f32, (4, 3, 1, 2)), {}
        >>> t = permuted_constant(FreshIds(GraphIR([])), w, np.zeros((4, 3, 1, 2)), (2, 3, 1, 0), new_values)
        >>> t.shape, new_values[t.id].shape, new_values[t.id].flags.c_contiguous
        ((1, 2, 3, 4), (1, 2, 3, 4), True)
    """
    array = frozen(np.ascontiguousarray(np.asarray(value).transpose(order)))
    new = fresh.constant(like, array.shape)
    new_values[new.id] = array
    return new


def transpose_order(op: Op) -> list:
    """A StaticTranspose's order with every entry an axis in [0, rank), its input's rank known
    (empty, the default, reverses the axes).

    Example:
        >>> from tilefuse.graph_api import DataType
        >>> x, y = LogicalTensor(0, DataType.f32, (2, 3, 4)), LogicalTensor(1, DataType.f32, (4, 2, 3))
        >>> transpose_order(Op(0, OpKind.StaticTranspose, [x], [y], {"order": [-1, 0, 1]}))
        [2, 0, 1]
    """
    rank = len(op.inputs[0].shape)
    return [a % rank for a in get_attr(op, "order")] or list(range(rank))[::-1]


def reshape(fresh: FreshIds, t: LogicalTensor, out: LogicalTensor, name: str) -> Op:
    """A StaticReshape of ``t`` into ``out`` (its shape), named ``name``: a view when its
    partition holds nothing else.

    Example:
        >>> from tilefuse.graph_api import DataType
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> x, y = LogicalTensor(0, DataType.f32, (2, 6)), LogicalTensor(1, DataType.f32, (12,))
        >>> reshape(FreshIds(GraphIR([])), x, y, "flat").attrs
        {'shape': [12], 'special_zero': False}
    """
    return Op(fresh.op_id(), OpKind.StaticReshape, [t], [out], {"shape": list(out.shape), "special_zero": False},
              name=name)


def view_before(fresh: FreshIds, replaced: dict, t: LogicalTensor, shape, into: Op) -> LogicalTensor:
    """A new tensor, ``t`` reshaped to ``shape``, its StaticReshape put in ``replaced`` (op id ->
    the ops that stand in its place) before op ``into`` and named after it.

    Example:
        >>> from tilefuse.graph_api import DataType
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> x, replaced = LogicalTensor(0, DataType.f32, (2, 6)), {}
        >>> view_before(FreshIds(GraphIR([])), replaced, x, (12,), Op(7, OpKind.ReLU, name="relu")).shape
        (12,)
        >>> [(op.kind.value, op.name) for op in replaced[7]]
        [('StaticReshape', 'relu')]
    """
    view = fresh.variable(t, shape)
    replaced.setdefault(into.id, []).append(reshape(fresh, t, view, into.name))
    return view


def frozen(array: np.ndarray) -> np.ndarray:
    """``array``, made read-only (a bound constant's value)."""
    array.setflags(write=False)
    return array
