"""A plain numpy interpreter of the oneDNN Graph op set: the oracle that every test compares
compiled code against.

Two entry points:

* :func:`evaluate` runs one :class:`~graph_api.op.Op` on numpy arrays;
* :func:`run` runs a whole graph (a list of ops, or any object with ``topological_ops()``) from
  a dict of feeds and returns every graph output.

Semantics follow oneDNN's op definitions: attribute names, defaults and input/output order are
oneDNN's. Each op kind's numpy meaning is the ``reference`` of its record in the op registry
(``graph_api.ops``), run on the op with normalized attributes; arithmetic is done in float64
and cast once to each output's data type (``op.outputs[i].dtype``). A kind without one raises
``GraphError("op <id> (<Kind>): the reference interpreter does not implement this op")``.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api.logical_tensor import DataType, LogicalTensor
    >>> from tilefuse.graph_api.op import Op, OpKind
    >>> a, b = LogicalTensor(0, DataType.f32, (2,)), LogicalTensor(1, DataType.f32, (2,))
    >>> evaluate(Op(0, OpKind.Exp, [a], [b]), [np.zeros(2, np.float32)])[0]
    array([1., 1.], dtype=float32)
"""
from __future__ import annotations

import heapq

import numpy as np

from .logical_tensor import DataType, GraphError, LogicalTensor
from .op import Op, OpKind
from .ops import REGISTRY, RuleError, normalize_op, op_def
from .ops._numpy import _err, _out_dtype

__all__ = ["evaluate", "run", "SUPPORTED_KINDS"]


# --------------------------------------------------------------------------- evaluate / run

SUPPORTED_KINDS: frozenset = frozenset(k for k, d in REGISTRY.items() if d.reference is not None)
"""The op kinds :func:`evaluate` implements."""

# outputs holding statistics: oneDNN dumps sometimes give them keep-dims shapes
_STATS_OUTPUTS = {OpKind.LayerNorm, OpKind.GroupNorm, OpKind.RMSNorm, OpKind.SoftMax}


_DEFAULT_DTYPES = {
    (OpKind.GreaterEqual, 0): np.dtype(np.bool_), (OpKind.Greater, 0): np.dtype(np.bool_),
    (OpKind.Equal, 0): np.dtype(np.bool_), (OpKind.IsNaN, 0): np.dtype(np.bool_), (OpKind.Quantize, 0): np.dtype(np.int8),
    (OpKind.DynamicQuantize, 0): np.dtype(np.int8), (OpKind.Dequantize, 0): np.dtype(np.float32),
    (OpKind.DynamicDequantize, 0): np.dtype(np.float32), (OpKind.GenIndex, 0): np.dtype(np.int32),
    (OpKind.Dropout, 1): np.dtype(np.uint8),
}


def _shape_matches(shape: tuple, lt: LogicalTensor) -> bool:
    if lt.shape is None:
        return True
    return len(shape) == len(lt.shape) and all(d < 0 or d == s for s, d in zip(shape, lt.shape))


def _cast(value: np.ndarray, dt: np.dtype) -> np.ndarray:
    value = np.asarray(value)
    if np.issubdtype(dt, np.integer) and not np.issubdtype(value.dtype, np.integer) \
            and value.dtype != np.bool_:
        info = np.iinfo(dt)
        value = np.clip(np.rint(value), info.min, info.max)
    with np.errstate(all="ignore"):
        return value.astype(dt)


def evaluate(op: Op, inputs: list) -> list:
    """Run one op on numpy arrays (in ``op.inputs`` order) and return its outputs (in
    ``op.outputs`` order), each cast to its logical tensor's data type.

    Raises GraphError naming the op when the op kind is not implemented, the input count or a
    shape does not fit, or an attribute is missing or bad.

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api.logical_tensor import DataType, LogicalTensor
        >>> from tilefuse.graph_api.op import Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (2, 3)); b = LogicalTensor(1, DataType.f32, (3, 2))
        >>> c = LogicalTensor(2, DataType.f32, (2, 2))
        >>> op = Op(0, OpKind.MatMul, [a, b], [c])
        >>> evaluate(op, [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)])[0]
        array([[3., 3.],
               [3., 3.]], dtype=float32)
        >>> evaluate(Op(1, OpKind.Wildcard, [a], [c]), [np.ones((2, 3))])
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: op 1 (Wildcard): the reference interpreter does not implement this op
    """
    handler = op_def(op.kind).reference
    if handler is None:
        raise _err(op, "the reference interpreter does not implement this op")
    inputs = list(inputs)
    if len(inputs) != len(op.inputs):
        raise _err(op, f"was given {len(inputs)} input arrays for its {len(op.inputs)} inputs")
    arrays = []
    for i, (lt, x) in enumerate(zip(op.inputs, inputs)):
        x = np.asarray(x)
        if not _shape_matches(x.shape, lt):
            raise _err(op, f"input {i} (tensor {lt.id}) has shape {x.shape} but the logical tensor "
                           f"says {lt.shape}")
        arrays.append(x)
    op = normalize_op(op, [a.shape for a in arrays])
    try:
        results = handler(op, arrays)
    except RuleError as e:
        raise _err(op, str(e)) from None
    if len(results) != len(op.outputs):
        raise _err(op, f"produces {len(results)} outputs but the op declares {len(op.outputs)}")
    # output dtype when the logical tensor's is undef: the data input's
    fallback = arrays[1 if op.kind is OpKind.Select else 0].dtype if arrays else np.dtype(np.float32)
    outs = []
    for i, (lt, value) in enumerate(zip(op.outputs, results)):
        value = np.asarray(value)
        if not _shape_matches(value.shape, lt):
            if op.kind in _STATS_OUTPUTS and i > 0 and lt.is_known() and \
                    int(np.prod(lt.shape, dtype=np.int64)) == value.size:
                value = value.reshape(lt.shape)
            else:
                raise _err(op, f"output {i} (tensor {lt.id}) has shape {value.shape} but the logical "
                               f"tensor says {lt.shape}")
        default = _DEFAULT_DTYPES.get((op.kind, i), fallback)
        if op.kind in _STATS_OUTPUTS and i > 0:
            default = np.dtype(np.float32)
        outs.append(_cast(value, _out_dtype(op, i, default)))
    return outs


def _op_list(graph_or_ops) -> list:
    ops = list(graph_or_ops.topological_ops()) if hasattr(graph_or_ops, "topological_ops") \
        else list(graph_or_ops)
    for op in ops:
        if not isinstance(op, Op):
            raise GraphError(f"run() expects Ops, got {type(op).__name__}")
    return ops


def _check_feed(tid: int, arr: np.ndarray, lt: LogicalTensor, op: Op) -> None:
    where = f"tensor {tid} (an input of op {op.id} ({op.kind.value}))"
    if lt.dtype is not DataType.undef:
        try:
            want = lt.dtype.numpy
        except GraphError:
            raise GraphError(f"{where} has data type {lt.dtype.value}, which the reference "
                             f"interpreter cannot hold") from None
        if arr.dtype != want:
            raise GraphError(f"{where}: the feed has dtype {arr.dtype} but the logical tensor is "
                             f"{lt.dtype.value}")
    if not _shape_matches(arr.shape, lt):
        raise GraphError(f"{where}: the feed has shape {arr.shape} but the logical tensor says {lt.shape}")


def run(graph_or_ops, feeds: dict) -> dict:
    """Run a graph and return ``{tensor id: array}`` for every graph output: each tensor an op
    produces and no op consumes, and each input of an End op.

    ``graph_or_ops`` is a list of Ops in any order (they are sorted by data dependence: an op
    runs once all its input tensors are available) or any object with a ``topological_ops()``
    method. ``feeds`` maps every graph input tensor id (consumed, never produced; constant
    tensors included) to an array matching its logical tensor's dtype and known shape.

    Raises GraphError naming the tensor and the op for a missing or mismatched feed, a feed for a
    tensor that is not a graph input, a tensor produced twice, or a cycle.

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api.logical_tensor import DataType, LogicalTensor
        >>> from tilefuse.graph_api.op import Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (3,)) for i in range(3)]
        >>> ops = [Op(1, OpKind.ReLU, [t[1]], [t[2]]), Op(0, OpKind.Abs, [t[0]], [t[1]])]
        >>> run(ops, {0: np.array([-1, 0, 2], np.float32)})
        {2: array([1., 0., 2.], dtype=float32)}
        >>> run(ops, {})
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: tensor 0 (input 0 of op 0 (Abs)) has no feed
    """
    ops = _op_list(graph_or_ops)
    producer: dict[int, Op] = {}
    consumed: dict[int, tuple] = {}      # tensor id -> (first consumer op, input index, lt)
    for op in ops:
        for lt in op.outputs:
            if lt.id in producer:
                raise GraphError(f"tensor {lt.id} is produced by both op {producer[lt.id].id} and op {op.id}")
            producer[lt.id] = op
    for op in ops:
        for i, lt in enumerate(op.inputs):
            consumed.setdefault(lt.id, (op, i, lt))

    values: dict[int, np.ndarray] = {}
    for tid, feed in feeds.items():
        if tid in producer:
            raise GraphError(f"tensor {tid} is produced by op {producer[tid].id} "
                             f"({producer[tid].kind.value}) and cannot be fed")
        if tid not in consumed:
            raise GraphError(f"feed for tensor {tid}, which no op of the graph uses")
        op, _, lt = consumed[tid]
        arr = np.asarray(feed)
        _check_feed(tid, arr, lt, op)
        values[tid] = arr
    for op in ops:
        for i, lt in enumerate(op.inputs):
            if lt.id not in producer and lt.id not in values:
                raise GraphError(f"tensor {lt.id} (input {i} of op {op.id} ({op.kind.value})) has no feed")

    # Kahn's algorithm, preferring the given order among ready ops
    waiting = {pos: {lt.id for lt in op.inputs if lt.id not in values} for pos, op in enumerate(ops)}
    users: dict[int, list[int]] = {}
    for pos, ids in waiting.items():
        for tid in ids:
            users.setdefault(tid, []).append(pos)
    ready = [pos for pos, ids in waiting.items() if not ids]
    heapq.heapify(ready)
    done = set()
    while ready:
        pos = heapq.heappop(ready)
        op = ops[pos]
        outs = evaluate(op, [values[lt.id] for lt in op.inputs])
        done.add(pos)
        for lt, v in zip(op.outputs, outs):
            values[lt.id] = v
            for user in users.get(lt.id, ()):
                waiting[user].discard(lt.id)
                if not waiting[user]:
                    heapq.heappush(ready, user)
    if len(done) != len(ops):
        pos = min(set(range(len(ops))) - done)
        op = ops[pos]
        tid = min(waiting[pos])
        raise GraphError(f"cycle: op {op.id} ({op.kind.value}) waits for tensor {tid}, "
                         f"which depends on the op's own outputs")

    result = {}
    for op in ops:
        for lt in op.outputs:
            if lt.id not in consumed:
                result[lt.id] = values[lt.id]
        if op.kind is OpKind.End:
            for lt in op.inputs:
                result[lt.id] = values[lt.id]
    return result
