"""Tensors and the operations that produce them: ``placeholder`` inputs and ``compute`` stages."""
from __future__ import annotations

import inspect

from . import dtype as dt
from .dtype import DTypeError
from .expr import Const, Expr, FloorDiv, FloorMod, IterVar, Reduce, Select, TensorLoad, Var, as_expr, next_uid
from .node import children
from .simplify import Linear, bound, simplify
from .walk import walk


class Operation:
    """Base of the operations that produce tensors; compared by identity."""

    def __init__(self, name: str, shape: tuple, dtype: str, tag: str = ""):
        self.name, self.shape, self.dtype, self.tag = name, shape, dtype, tag
        self.uid = next_uid()

    def output(self, index: int = 0) -> "Tensor":
        """The tensor this operation produces.

        Example:
            >>> A = placeholder((2,), name="A")
            >>> A.op.output(0) is A
            True
        """
        if index != 0:
            raise IndexError(f"operation {self.name} has one output, asked for output {index}")
        return self._output

    @property
    def input_tensors(self) -> list["Tensor"]:
        return []

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    """An input tensor: data supplied by the caller."""


class ComputeOp(Operation):
    """A tensor defined elementwise by an expression over its axes (and reduce axes)."""

    def __init__(self, name, shape, dtype, tag, axis, body):
        super().__init__(name, shape, dtype, tag)
        self.axis: tuple[IterVar, ...] = axis
        self.body: Expr = body
        self.reduce_axis: tuple[IterVar, ...] = body.axis if isinstance(body, Reduce) else ()

    @property
    def input_tensors(self) -> list["Tensor"]:
        """Tensors read by the body, in order of first use.

        Example:
            >>> A = placeholder((4,), name="A")
            >>> B = compute((4,), lambda i: A[i] * 2.0, name="B")
            >>> [t.name for t in B.op.input_tensors]
            ['A']
        """
        seen: dict[int, Tensor] = {}
        for node in walk(self.body):
            if isinstance(node, TensorLoad) and id(node.tensor) not in seen:
                seen[id(node.tensor)] = node.tensor
        return list(seen.values())


class Tensor:
    """The output of an operation. Index it to read an element: ``A[i, j]``."""

    __slots__ = ("op", "__weakref__")

    def __init__(self, op: Operation):
        self.op = op

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices) -> TensorLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimension(s) {self.shape} "
                             f"but was indexed with {len(indices)} index(es)")
        exprs = []
        for d, index in enumerate(indices):
            if isinstance(index, slice):
                raise TypeError(f"tensor {self.name}: slices are not supported in tensor "
                                f"expressions (dimension {d}); index with an expression")
            e = as_expr(index, dt.INDEX_DTYPE) if not isinstance(index, Expr) else index
            if not dt.is_int(e.dtype):
                raise DTypeError(f"tensor {self.name}: index {d} has dtype {e.dtype}; indices must be integers")
            if isinstance(e, Const) and not 0 <= e.value < self.shape[d]:
                raise IndexError(f"tensor {self.name}: constant index {e.value} is out of bounds "
                                 f"for dimension {d} of size {self.shape[d]}")
            exprs.append(e)
        return TensorLoad(self, tuple(exprs), self.dtype)

    def __iter__(self):
        raise TypeError(f"tensor {self.name} is not iterable; index it with A[i, ...]")

    def __repr__(self):
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


def post_order(outputs) -> list[Operation]:
    """Every operation under ``outputs`` (tensors), each after the operations it reads.

    Example:
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> [op.name for op in post_order([B])]
        ['A', 'B']
    """
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(t: Tensor):
        if id(t.op) in seen:
            return
        seen.add(id(t.op))
        for inp in t.op.input_tensors:
            visit(inp)
        order.append(t.op)
    for out in outputs:
        visit(out)
    return order


def _check_shape(shape, name: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of ints, got {shape!r}") from None
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, int) and not hasattr(n, "__index__"):
            raise TypeError(f"{name}: shape must be a tuple of ints, got {shape!r}")
        if int(n) < 0:
            raise ValueError(f"{name}: negative extent in shape {shape!r}")
    return tuple(int(n) for n in shape)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder", constant: bool = False) -> Tensor:
    """An input tensor of the given shape and dtype. ``constant`` marks an input whose values
    stay the same from call to call (weights): stages reading only constants may then run
    once per weight array instead of on every call (``schedule.hoist``); its tag says so.

    Example:
        >>> A = placeholder((3, 4), "float32", name="A")
        >>> A.shape, A.dtype, placeholder((4,), name="W", constant=True).op.tag
        ((3, 4), 'float32', 'constant')
    """
    op = PlaceholderOp(name, _check_shape(shape, f"placeholder {name!r}"), dt.check_dtype(dtype),
                       "constant" if constant else "")
    op._output = Tensor(op)
    return op._output


def _index_names(fcompute, ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"ax{d}" for d in range(ndim)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return [f"ax{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not len(required) <= ndim <= len(positional):
        raise ValueError(f"compute {name!r}: the function takes {len(positional)} index argument(s) "
                         f"but the shape has {ndim} axis(es); it must take one index per output axis")
    return [p.name for p in positional[:ndim]]


def compute(shape, fcompute, name: str = "compute", tag: str = "") -> Tensor:
    """A tensor whose element at (i, j, ...) is ``fcompute(i, j, ...)``.

    A reduction (``sum``, ``max``, ...) must be the whole body.

    Example:
        >>> from tilefuse.tensorir import reduce_axis, sum
        >>> A = placeholder((4, 8), name="A")
        >>> r = reduce_axis((0, 8), name="r")
        >>> B = compute((4,), lambda i: sum(A[i, r] * 2.0, axis=r), name="B")
        >>> [str(a) for a in B.op.axis], [str(a) for a in B.op.reduce_axis]
        (['i'], ['r'])
    """
    shape = _check_shape(shape, f"compute {name!r}")
    if not callable(fcompute):
        raise TypeError(f"compute {name!r}: fcompute must be callable, got {type(fcompute).__name__}")
    axis = tuple(IterVar(n, dt.INDEX_DTYPE, 0, 0, extent, "data")
                 for n, extent in zip(_index_names(fcompute, len(shape), name), shape))
    body = fcompute(*axis)
    if isinstance(body, Tensor):
        raise TypeError(f"compute {name!r}: fcompute returned tensor {body.name}; return an element such as {body.name}[i]")
    body = as_expr(body)
    _check_body(name, axis, body)
    op = ComputeOp(name, shape, body.dtype, tag, axis, body)
    op._output = Tensor(op)
    return op._output


def _check_reads_in_bounds(name: str, axes, body: Expr) -> None:
    """Reject a read that goes out of bounds for some point of the iteration domain, where
    that is certain: the read is not under an if_then_else (which may guard it) and its index
    is affine in the axes (or a floordiv/floormod of an affine part), each axis in one term,
    so that interval bounds are exact."""
    if any(a.dom_extent == 0 for a in axes):
        return
    ranges = {a.uid: a.dom for a in axes}

    def visit(e):
        if isinstance(e, Select):
            visit(e.cond)
            return
        if isinstance(e, TensorLoad):
            for d, index in enumerate(e.indices):
                index = simplify(index, ranges)
                if not _exact_bounds(index):
                    continue
                lo, hi = bound(index, ranges)
                if lo < 0 or hi >= e.tensor.shape[d]:
                    raise IndexError(f"compute {name!r}: index {d} of {e.tensor.name} ({index}) ranges over "
                                     f"[{lo}, {hi}] but that dimension has size {e.tensor.shape[d]}; "
                                     f"guard the read with if_then_else or fix the index")
        for c in children(e):
            visit(c)
    visit(body)


def _exact_bounds(index: Expr) -> bool:
    seen: set[int] = set()
    for atom in Linear.of(index).terms:
        inner = atom.a if isinstance(atom, (FloorDiv, FloorMod)) and isinstance(atom.b, Const) else atom
        for v in (Linear.of(inner).terms if inner is not atom else (atom,)):
            if not isinstance(v, Var) or v.uid in seen:
                return False
            seen.add(v.uid)
    return True


def _check_body(name: str, axis: tuple[IterVar, ...], body: Expr) -> None:
    reduce_axes = set(body.axis) if isinstance(body, Reduce) else set()
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise ValueError(f"compute {name!r}: a reduction must be the whole body, found "
                             f"{node.combiner}(...) inside {body}; compute it as its own tensor first")
    source = body.source if isinstance(body, Reduce) else body
    own = set(axis)
    for node in walk(source):
        if isinstance(node, IterVar):
            if node.kind == "reduce" and node not in reduce_axes:
                raise ValueError(f"compute {name!r}: reduce axis {node.name} is used outside a reducer "
                                 f"(or by a reducer that does not list it in axis=)")
            if node.kind == "data" and node not in own:
                raise ValueError(f"compute {name!r}: axis {node.name} belongs to another compute")
    _check_reads_in_bounds(name, tuple(axis) + tuple(reduce_axes), body)
