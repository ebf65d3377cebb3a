"""Layer and RMS norms written out op by op, as one norm op.

Exporters before ONNX opset 17 (and T5's own code at any opset) spell a norm over the last axis
as a chain: for a layer norm ``ReduceMean -> Subtract -> Pow 2 -> ReduceMean -> Add eps -> Sqrt
-> Divide [-> Multiply gamma] [-> Add beta]``, for an RMS norm ``Pow 2 -> ReduceMean -> Add eps
-> Sqrt -> Divide 1 by it (or Reciprocal) -> Multiply x [-> Multiply gamma]``. Fused as they
come, those are four partitions (two reductions and the elementwise steps between them, each
writing and reading the activation again); as one LayerNorm or RMSNorm op they are one
reduction kernel.

Rules: every intermediate tensor is read by the chain alone and is no graph output; both
reductions average the last axis only, keeping it; ``eps`` is a bound scalar, as are the
exponent 2 (or the chain squares by a Multiply of a tensor with itself) and the 1 divided by
the root; gamma and beta are bound constants that broadcast along the last axis (a layer norm
given only one of them gets ones or zeros for the other).

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> t = lambda i, s, c=False: LogicalTensor(i, DataType.f32, s, property_type=PropertyType.constant if c else PropertyType.variable)
    >>> x, eps = t(0, (4, 8)), t(1, (), True)
    >>> g = Graph()
    >>> _ = g.add_op(Op(0, OpKind.ReduceMean, [x], [t(2, (4, 1))], {"axes": [-1], "keep_dims": True}))
    >>> _ = g.add_op(Op(1, OpKind.Subtract, [x, t(2, (4, 1))], [t(3, (4, 8))]))
    >>> _ = g.add_op(Op(2, OpKind.Pow, [t(3, (4, 8))], [t(4, (4, 8))], {"beta": 2.0}))
    >>> _ = g.add_op(Op(3, OpKind.ReduceMean, [t(4, (4, 8))], [t(5, (4, 1))], {"axes": [-1], "keep_dims": True}))
    >>> _ = g.add_op(Op(4, OpKind.Add, [t(5, (4, 1)), eps], [t(6, (4, 1))]))
    >>> _ = g.add_op(Op(5, OpKind.Sqrt, [t(6, (4, 1))], [t(7, (4, 1))]))
    >>> _ = g.add_op(Op(6, OpKind.Divide, [t(3, (4, 8)), t(7, (4, 1))], [t(8, (4, 8))]))
    >>> g.bind_constant(1, np.array(1e-5, np.float32)); g.finalize()
    >>> [(op.kind.value, round(op.attrs["epsilon"], 9)) for op in recognize_norms(g).ops]
    [('LayerNorm', 1e-05)]
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import GraphIR
from ..op import Op, OpKind
from ..ops.schema import get_attr
from ._util import FreshIds, as_ir, covered_by, frozen
from .dead_code import eliminate_dead_ops


class _Chain:
    """Walks one candidate chain: the ops it took, what they read."""

    def __init__(self, graph: GraphIR, outs: set):
        self.graph, self.outs, self.ops = graph, outs, []

    def only_reader(self, tensor_id: int, kind: OpKind):
        """The one op reading ``tensor_id``, when it is of ``kind`` and the tensor no graph output."""
        readers = self.graph.consumers(tensor_id)
        if tensor_id in self.outs or len(readers) != 1 or readers[0].kind is not kind:
            return None
        self.ops.append(readers[0])
        return readers[0]

    def scalar(self, op: Op, skip: int):
        """The bound scalar ``op`` reads besides input ``skip``, or None."""
        others = [t for k, t in enumerate(op.inputs) if k != skip]
        value = self.graph.constant_values.get(others[0].id) if len(others) == 1 else None
        return float(np.asarray(value).reshape(-1)[0]) if value is not None and value.size == 1 else None

    def along_last(self, op: Op, skip: int, width: int):
        """The bound constant ``op`` reads besides input ``skip`` as a (width,) array, when it
        broadcasts along the last axis only; else None."""
        others = [t for k, t in enumerate(op.inputs) if k != skip]
        value = self.graph.constant_values.get(others[0].id) if len(others) == 1 else None
        if value is None or value.ndim < 1 or math.prod(value.shape[:-1]) != 1 or value.shape[-1] not in (1, width):
            return None
        return np.broadcast_to(value.reshape(-1), (width,))


def _mean_of_last(graph: GraphIR, op: Op) -> bool:
    x = graph.tensor(op.inputs[0].id)
    if op.kind is not OpKind.ReduceMean or len(op.inputs) != 1 or not x.is_known() or not x.ndim:
        return False
    axes = [a % x.ndim for a in (get_attr(op, "axes") or [])]
    return axes == [x.ndim - 1] and bool(get_attr(op, "keep_dims"))


def _squares(chain: _Chain, op: Op, src_id: int) -> bool:
    """Whether ``op`` squares tensor ``src_id``: Pow 2, or a Multiply of it by itself."""
    if op.kind is OpKind.Pow:
        beta = get_attr(op, "beta") if len(op.inputs) == 1 else chain.scalar(op, 0)
        return beta is not None and float(beta) == 2.0
    return op.kind is OpKind.Multiply and all(t.id == src_id for t in op.inputs)


def _root(chain: _Chain, variance_op: Op):
    """(epsilon, sqrt op) of ``ReduceMean -> Add eps -> Sqrt`` after ``variance_op``, or None."""
    add = chain.only_reader(variance_op.outputs[0].id, OpKind.Add)
    eps = chain.scalar(add, [t.id for t in add.inputs].index(variance_op.outputs[0].id)) if add else None
    sqrt = chain.only_reader(add.outputs[0].id, OpKind.Sqrt) if eps is not None else None
    return (eps, sqrt) if sqrt is not None and eps > 0 else None


def _affine(chain: _Chain, last: Op, width: int, with_beta: bool):
    """(gamma or None, beta or None, the chain's last op): the Multiply by a constant (and the
    Add of one) that follow ``last``."""
    gamma = beta = None
    for kind in (OpKind.Multiply, OpKind.Add) if with_beta else (OpKind.Multiply,):
        out = last.outputs[0].id
        readers = chain.graph.consumers(out)
        if out in chain.outs or len(readers) != 1 or readers[0].kind is not kind:
            continue
        nxt = readers[0]
        value = chain.along_last(nxt, [t.id for t in nxt.inputs].index(out), width)
        if value is None:
            continue
        chain.ops.append(nxt)
        gamma, beta = (value, beta) if kind is OpKind.Multiply else (gamma, value)
        last = nxt
    return gamma, beta, last


def _layer_norm(graph: GraphIR, mean: Op, outs: set):
    """(ops replaced, x, eps, gamma, beta, last op) of a layer norm starting at ``mean``."""
    x = graph.tensor(mean.inputs[0].id)
    chain = _Chain(graph, outs)
    sub = chain.only_reader(mean.outputs[0].id, OpKind.Subtract)
    if sub is None or [t.id for t in sub.inputs] != [x.id, mean.outputs[0].id]:
        return None
    readers = graph.consumers(sub.outputs[0].id)
    squares = [r for r in readers if _squares(chain, r, sub.outputs[0].id)]
    divides = [r for r in readers if r.kind is OpKind.Divide and r.inputs[0].id == sub.outputs[0].id]
    if len(readers) != 2 or len(squares) != 1 or len(divides) != 1 or sub.outputs[0].id in outs:
        return None
    chain.ops += [squares[0], divides[0]]
    variance = chain.only_reader(squares[0].outputs[0].id, OpKind.ReduceMean)
    if variance is None or not _mean_of_last(graph, variance):
        return None
    root = _root(chain, variance)
    if root is None or divides[0].inputs[1].id != root[1].outputs[0].id or root[1].outputs[0].id in outs or \
            len(graph.consumers(root[1].outputs[0].id)) != 1:
        return None
    gamma, beta, last = _affine(chain, divides[0], x.shape[-1], with_beta=True)
    return [mean, sub] + chain.ops, x, root[0], gamma, beta, last


def _rms_norm(graph: GraphIR, square: Op, outs: set):
    """(ops replaced, x, eps, gamma, last op) of an RMS norm starting at ``square``."""
    x = graph.tensor(square.inputs[0].id)
    chain = _Chain(graph, outs)
    mean = chain.only_reader(square.outputs[0].id, OpKind.ReduceMean)
    if mean is None or not _mean_of_last(graph, mean):
        return None
    root = _root(chain, mean)
    if root is None:
        return None
    sqrt_out = root[1].outputs[0].id
    readers = graph.consumers(sqrt_out)
    if sqrt_out in outs or len(readers) != 1:
        return None
    inverse = readers[0]
    if inverse.kind is OpKind.Divide:
        if inverse.inputs[1].id != sqrt_out or chain.scalar(inverse, 1) != 1.0:
            return None
    elif inverse.kind is not OpKind.Reciprocal:
        return None
    chain.ops.append(inverse)
    scale = chain.only_reader(inverse.outputs[0].id, OpKind.Multiply)
    if scale is None or {t.id for t in scale.inputs} != {x.id, inverse.outputs[0].id}:
        return None
    gamma, _, last = _affine(chain, scale, x.shape[-1], with_beta=False)
    return [square] + chain.ops, x, root[0], gamma, last


def recognize_norms(graph) -> GraphIR:
    """A new graph in which layer and RMS norms over the last axis written out op by op are
    LayerNorm and RMSNorm ops (see the module docstring); the input graph is not modified,
    its output tensors keep their ids.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize()
        >>> recognize_norms(g).ops
        []
    """
    graph = as_ir(graph, "recognize_norms")
    outs = {t.id for t in graph.get_output_ports()}
    fresh = FreshIds(graph)
    replaced, values, taken = {}, {}, set()

    def constant(array, like):
        t = fresh.constant(like, array.shape)
        values[t.id] = frozen(np.ascontiguousarray(array, like.dtype.numpy))
        return t
    for op in graph.topological_ops():
        if op.id in taken:
            continue
        found = None
        if _mean_of_last(graph, op):
            layer = _layer_norm(graph, op, outs)
            if layer is not None:
                ops, x, eps, gamma, beta, last = layer
                inputs, affine = [x], gamma is not None or beta is not None
                if affine:
                    width = x.shape[-1]
                    inputs += [constant(np.ones(width) if gamma is None else gamma, x),
                               constant(np.zeros(width) if beta is None else beta, x)]
                norm = Op(fresh.op_id(), OpKind.LayerNorm, inputs, [graph.tensor(last.outputs[0].id)],
                          {"begin_norm_axis": -1, "epsilon": eps, "use_affine": affine, "keep_stats": False},
                          name=last.name, covers=covered_by(ops))
                found = ops, norm, last
        elif op.kind in (OpKind.Pow, OpKind.Multiply) and graph.tensor(op.inputs[0].id).is_known():
            x_id = op.inputs[0].id
            chain = _Chain(graph, outs)
            rms = _rms_norm(graph, op, outs) if _squares(chain, op, x_id) else None
            if rms is not None:
                ops, x, eps, gamma, last = rms
                inputs = [x] + ([constant(gamma, x)] if gamma is not None else [])
                norm = Op(fresh.op_id(), OpKind.RMSNorm, inputs, [graph.tensor(last.outputs[0].id)],
                          {"begin_norm_axis": -1, "epsilon": eps}, name=last.name, covers=covered_by(ops))
                found = ops, norm, last
        if found is None or any(o.id in taken for o in found[0]):
            continue
        ops, norm, last = found
        taken.update(o.id for o in ops)
        replaced.update({o.id: None for o in ops})
        replaced[last.id] = norm          # where the chain ended: every input of the norm is made before
    if not replaced:
        return graph
    kept = [replaced.get(op.id, op) for op in graph.ops]
    return eliminate_dead_ops(graph.with_ops([op for op in kept if op is not None], values), outputs=outs)
