"""What a compute DAG is made of: its ops in order, who reads whom, and each op's class.

Operator classes, derived from the compute body (not from a table):

* injective - no reduction (elementwise, broadcast, index maps);
* complex - a sum over reduce axes of a product whose factors both read a reduce axis and
  each read an output axis the other does not (matmul, batch matmul, dense, convolution):
  the "complex-out-fusable" anchor;
* reduction - any other reduction (sum, max, mean-like rows).

A tag equal to a class name on an op ("injective", "reduction", "complex", "opaque") overrides
what the body says.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tilefuse.tensorir.expr import Cast, IterVar, Mul, Reduce, TensorLoad
from tilefuse.tensorir.tensor import ComputeOp, Tensor, post_order
from tilefuse.tensorir.walk import walk

OP_CLASSES = ("injective", "reduction", "complex", "opaque")
"""The operator classes of single ops. A whole DAG has one more kind, "window" (a pooling or
depthwise convolution with its elementwise epilogue), which partitioning sees as the class of
its window op (reduction or complex) and a template of its own schedules."""


def op_class(op: ComputeOp) -> str:
    """The class of one compute op.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
        >>> A = placeholder((4, 8), name="A"); B = placeholder((8, 3), name="B")
        >>> r = reduce_axis((0, 8), name="r")
        >>> op_class(compute((4, 3), lambda i, j: sum(A[i, r] * B[r, j], axis=r)).op)
        'complex'
    """
    if op.tag in OP_CLASSES:
        return op.tag
    body = op.body
    if not isinstance(body, Reduce):
        return "injective"
    source = body.source
    while isinstance(source, Cast):
        source = source.value
    if body.combiner == "sum" and isinstance(source, Mul):
        # an outer product under the sum: each factor reads a reduce axis, and each has an
        # output axis of its own (i only on the left, j only on the right), as in
        # A[i, r] * B[r, j] -- unlike a variance, (X[i, r] - m[i]) * (X[i, r] - m[i])
        reduce_axes = {a.uid for a in body.axis}
        data_axes = {a.uid for a in op.axis}

        def axes_read(e, wanted):
            return {v.uid for n in walk(e) if isinstance(n, TensorLoad)
                    for index in n.indices for v in walk(index) if isinstance(v, IterVar) and v.uid in wanted}
        left, right = axes_read(source.a, data_axes), axes_read(source.b, data_axes)
        if axes_read(source.a, reduce_axes) and axes_read(source.b, reduce_axes) and left - right and right - left:
            return "complex"
    return "reduction"


def is_window(op: ComputeOp) -> bool:
    """Whether ``op`` slides a small window over its input: a sum, max or min whose reduce axes
    (those longer than 1) each index some dimension of one input together with an output axis
    (``x[y * stride + k * dilation]``), where that input is read along every output axis longer
    than 1. Pooling and depthwise convolution are; a convolution over input channels, a matmul
    or a row reduction are not (some reduce axis indexes a dimension alone, or the input lacks
    an output axis, the output channel).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, max
        >>> X = placeholder((4, 16), name="X"); k = reduce_axis((0, 3), name="k")
        >>> is_window(compute((4, 14), lambda c, x: max(X[c, x + k], axis=k)).op)
        True
    """
    body = op.body
    if not isinstance(body, Reduce) or body.combiner not in ("sum", "max", "min", "max_skip_nan"):
        return False
    window = {a.uid for a in body.axis if a.dom_extent > 1}
    data = {a.uid for a in op.axis if a.dom_extent > 1}
    if not window:
        return False

    def uids(e):
        return {v.uid for v in walk(e) if isinstance(v, IterVar)}
    for load in (n for n in walk(body.source) if isinstance(n, TensorLoad)):
        read = [uids(index) for index in load.indices]
        if data <= set().union(*read) if read else not data:
            slid = {u for axes in read if axes & data for u in axes & window}
            if slid == window:
                return True
    return False


@dataclass
class Dag:
    """The compute DAG under some output tensors."""
    outputs: list[Tensor]
    ops: list[ComputeOp] = field(default_factory=list)          # producers first
    placeholders: list[Tensor] = field(default_factory=list)    # in order of first use
    readers: dict[int, list[ComputeOp]] = field(default_factory=dict)
    classes: dict[int, str] = field(default_factory=dict)

    @staticmethod
    def of(outputs) -> "Dag":
        """Walk the DAG under ``outputs``.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] + 1.0, name="B")
            >>> d = Dag.of([B]); [op.name for op in d.ops], [t.name for t in d.placeholders]
            (['B'], ['A'])
        """
        dag = Dag(list(outputs))
        for op in post_order(dag.outputs):
            if not isinstance(op, ComputeOp):
                dag.placeholders.append(op.output(0))
                continue
            dag.ops.append(op)
            dag.classes[id(op)] = op_class(op)
            for inp in op.input_tensors:
                dag.readers.setdefault(id(inp.op), []).append(op)
        return dag

    def of_class(self, cls: str) -> list[ComputeOp]:
        return [op for op in self.ops if self.classes[id(op)] == cls]

    def is_output(self, op) -> bool:
        return any(t.op is op for t in self.outputs)

    def downstream(self, op) -> list[ComputeOp]:
        """Ops that read ``op``, directly or not, in DAG order."""
        found, frontier = set(), [op]
        while frontier:
            for reader in self.readers.get(id(frontier.pop()), []):
                if id(reader) not in found:
                    found.add(id(reader))
                    frontier.append(reader)
        return [o for o in self.ops if id(o) in found]

    def upstream(self, op) -> list[ComputeOp]:
        """Compute ops that ``op`` reads, directly or not, in DAG order."""
        found, frontier = set(), [op]
        while frontier:
            for t in frontier.pop().input_tensors:
                if isinstance(t.op, ComputeOp) and id(t.op) not in found:
                    found.add(id(t.op))
                    frontier.append(t.op)
        return [o for o in self.ops if id(o) in found]

    def window_anchor(self):
        """The one sliding-window op (``is_window``) of a DAG whose other ops are injective,
        with one output of the window's rank that is the window or reads it, elementwise or
        through unit dims (bias, activations, a depthwise convolution's channel layout); else
        None.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, max
            >>> X = placeholder((4, 16), name="X"); k = reduce_axis((0, 3), name="k")
            >>> M = compute((4, 14), lambda c, x: max(X[c, x + k], axis=k))
            >>> Dag.of([compute((4, 14), lambda c, x: M[c, x] * 2.0)]).window_anchor() is M.op
            True
        """
        if len(self.outputs) != 1:
            return None
        others = [op for op in self.ops if self.classes[id(op)] != "injective"]
        if len(others) != 1 or not is_window(others[0]):
            return None
        anchor, out = others[0], self.outputs[0].op
        if anchor is not out and out not in self.downstream(anchor):
            return None
        squeeze = [n for n in anchor.output(0).shape if n != 1]
        if [n for n in out.output(0).shape if n != 1] != squeeze or out.output(0).shape[-1] != anchor.output(0).shape[-1]:
            return None
        return anchor

    def attention(self):
        """(scores, row max, row sum, context) ops of a scaled dot-product attention, the
        DAG ``tensorir.ops.scaled_dot_product_attention`` builds (with an elementwise epilogue
        after it, if any): two complex ops, the second downstream of the first; between them
        exactly two row reductions (a max, then a sum) over the first's last axis, every other
        op injective, one output downstream of the second; else None.

        Example:
            >>> from tilefuse.tensorir import placeholder
            >>> from tilefuse.tensorir.ops import scaled_dot_product_attention
            >>> q, k, v = placeholder((8, 4)), placeholder((4, 8)), placeholder((8, 4))
            >>> [op.name for op in Dag.of([scaled_dot_product_attention(q, k, v, key_transposed=True)]).attention()]
            ['attention_scores', 'attention_max', 'attention_sum', 'attention_context']
        """
        complex_ops, reductions = self.of_class("complex"), self.of_class("reduction")
        if len(self.outputs) != 1 or len(complex_ops) != 2 or len(reductions) != 2 or self.of_class("opaque"):
            return None
        scores, context = complex_ops
        combiners = {op.body.combiner: op for op in reductions}
        row_max, row_sum = combiners.get("max_skip_nan", combiners.get("max")), combiners.get("sum")
        out = self.outputs[0].op
        rows = tuple(scores.output(0).shape[:-1])
        if row_max is None or row_sum is None or \
                any(tuple(op.output(0).shape) != rows or len(op.reduce_axis) != 1 for op in reductions):
            return None
        after, before = self.downstream(scores), self.upstream(context)
        if context not in after or row_max not in after or row_max not in before or row_sum not in after or \
                row_sum in self.downstream(context) or (out is not context and out not in self.downstream(context)):
            return None
        return scores, row_max, row_sum, context

    def kind(self) -> str:
        """The operator class of the whole DAG, as the partitioner would group it.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] + 1.0, name="B")
            >>> Dag.of([B]).kind()
            'injective'
        """
        if self.of_class("opaque"):      # an op tagged opaque (op_class honours class tags)
            return "opaque"
        if self.window_anchor() is not None:
            return "window"
        if self.attention() is not None:
            return "attention"
        complex_ops, reductions = self.of_class("complex"), self.of_class("reduction")
        if not complex_ops and not reductions:
            return "injective"
        if len(complex_ops) == 1 and not reductions:
            anchor = complex_ops[0]
            epilogue = self.downstream(anchor)
            if all(self.classes[id(op)] == "injective" for op in epilogue) and \
                    all(t.op is anchor or t.op in epilogue for t in self.outputs):
                return "complex"
        if reductions and not complex_ops and len(self.outputs) == 1:
            return "reduction"
        return "opaque"
