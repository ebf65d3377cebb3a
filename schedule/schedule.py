"""Schedules: one stage per compute op, and the loop-transforming primitives on stages.

A stage starts with one loop per axis (output axes, then reduce axes) in row-major order.
``split``, ``tile`` and ``fuse`` replace loops by new ones (recorded as relations, so lowering
can rebuild each original axis from them); ``reorder`` permutes loops; ``vectorize``,
``unroll`` and ``parallel`` set a loop's kind.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.expr import IterVar
from tensorir.tensor import ComputeOp, PlaceholderOp, Tensor

MAX_VECTOR_LANES = 256
MAX_UNROLL = 1024


class ScheduleError(ValueError):
    """An illegal scheduling request; the message names the stage, the axis and the reason."""


@dataclass(frozen=True)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int


@dataclass(frozen=True)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


def _axis(name: str, extent: int, kind: str) -> IterVar:
    return IterVar(name, "int64", 0, 0, extent, kind)


class Stage:
    """The schedule of one compute op: its loops, their order and kinds.

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((100,), name="A")
        >>> B = compute((100,), lambda i: A[i] * 2.0, name="B")
        >>> s = create_schedule(B)
        >>> outer, inner = s[B].split(B.op.axis[0], factor=16)
        >>> s[B].vectorize(inner)
        >>> [a.name for a in s[B].leaf_iter_vars]
        ['i.outer', 'i.inner']
    """

    def __init__(self, op: ComputeOp):
        self.op = op
        self.leaf_iter_vars: list[IterVar] = list(op.axis) + list(op.reduce_axis)
        self.all_iter_vars: list[IterVar] = list(self.leaf_iter_vars)
        self.relations: list[Split | Fuse] = []
        self.iter_var_kinds: dict[int, str] = {}   # uid -> "vectorized" | "unrolled" | "parallel"

    def __repr__(self):
        return f"Stage({self.op.name})"

    # ------------------------------------------------------------------ checks
    def _error(self, axis, reason: str) -> ScheduleError:
        name = getattr(axis, "name", repr(axis))
        return ScheduleError(f"stage {self.op.name}, axis {name}: {reason}")

    def _leaf(self, axis, primitive: str) -> IterVar:
        if not isinstance(axis, IterVar):
            raise self._error(axis, f"{primitive} needs an axis of this stage (an IterVar), got {type(axis).__name__}")
        if axis in self.leaf_iter_vars:
            return axis
        if axis in self.all_iter_vars:
            raise self._error(axis, f"{primitive}: the axis was already split or fused; use the axes that replaced it")
        raise self._error(axis, f"{primitive}: the axis does not belong to this stage")

    # ------------------------------------------------------------------ primitives
    def split(self, parent: IterVar, factor: int | None = None, nparts: int | None = None):
        """Split ``parent`` into (outer, inner) with ``inner`` of extent ``factor`` (or ``outer``
        of extent ``nparts``). A factor that does not divide the extent leaves a guarded tail.

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((10,), name="A"); B = compute((10,), lambda i: A[i], name="B")
            >>> s = create_schedule(B); xo, xi = s[B].split(B.op.axis[0], factor=4)
            >>> xo.dom_extent, xi.dom_extent
            (3, 4)
        """
        parent = self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise self._error(parent, "split needs exactly one of factor= or nparts=")
        value = factor if factor is not None else nparts
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise self._error(parent, f"split factor must be an int, got {value!r}")
        value = int(value)
        if value < 1:
            raise self._error(parent, f"split {'factor' if factor is not None else 'nparts'} must be >= 1, got {value}")
        extent = parent.dom_extent
        if factor is not None:
            inner_extent = value
            outer_extent = -(-extent // value)
        else:
            inner_extent = -(-extent // value) if extent else 1
            outer_extent = -(-extent // inner_extent) if extent else value
        outer = _axis(f"{parent.name}.outer", outer_extent, parent.kind)
        inner = _axis(f"{parent.name}.inner", inner_extent, parent.kind)
        self._replace(parent, [outer, inner])
        self.relations.append(Split(parent, outer, inner, inner_extent))
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: int, y_factor: int):
        """Split two axes and order the result (x.outer, y.outer, x.inner, y.inner).

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((64, 64), name="A"); B = compute((64, 64), lambda i, j: A[i, j], name="B")
            >>> s = create_schedule(B); i, j = B.op.axis
            >>> [a.name for a in s[B].tile(i, j, 8, 16)]
            ['i.outer', 'j.outer', 'i.inner', 'j.inner']
        """
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse consecutive loops (outermost first) into one.

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((4, 8), name="A"); B = compute((4, 8), lambda i, j: A[i, j], name="B")
            >>> s = create_schedule(B); f = s[B].fuse(*B.op.axis)
            >>> f.name, f.dom_extent
            ('i.j.fused', 32)
        """
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if not axes:
            raise ScheduleError(f"stage {self.op.name}: fuse needs at least one axis")
        leaves = [self._leaf(a, "fuse") for a in axes]
        positions = [self.leaf_iter_vars.index(a) for a in leaves]
        if positions != list(range(positions[0], positions[0] + len(positions))):
            raise self._error(leaves[0], f"fuse needs consecutive loops in order, outermost first; "
                                         f"the loop order is {[a.name for a in self.leaf_iter_vars]}")
        kinds = {a.kind for a in leaves}
        if len(kinds) > 1:
            raise self._error(leaves[0], "cannot fuse a reduce axis with a data axis")
        fused = leaves[0]
        for inner in leaves[1:]:
            new = _axis(f"{fused.name}.{inner.name}.fused" if not fused.name.endswith(".fused")
                        else f"{fused.name[:-6]}.{inner.name}.fused",
                        fused.dom_extent * inner.dom_extent, fused.kind)
            self._replace_pair(fused, inner, new)
            self.relations.append(Fuse(fused, inner, new))
            fused = new
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put the given loops in this order, in the positions they occupy together.

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((4, 8), name="A"); B = compute((4, 8), lambda i, j: A[i, j], name="B")
            >>> s = create_schedule(B); i, j = B.op.axis; s[B].reorder(j, i)
            >>> [a.name for a in s[B].leaf_iter_vars]
            ['j', 'i']
        """
        leaves = [self._leaf(a, "reorder") for a in axes]
        if len(set(a.uid for a in leaves)) != len(leaves):
            raise self._error(leaves[0], "reorder got the same axis twice")
        positions = sorted(self.leaf_iter_vars.index(a) for a in leaves)
        for pos, axis in zip(positions, leaves):
            self.leaf_iter_vars[pos] = axis

    def _annotate(self, axis, kind: str):
        axis = self._leaf(axis, kind)
        if axis.kind == "reduce" and kind in ("vectorized", "parallel"):
            raise self._error(axis, f"cannot make a reduce axis {kind}: the iterations update the same "
                                    f"output element (a data race / a horizontal reduction)")
        if kind == "vectorized" and axis.dom_extent > MAX_VECTOR_LANES:
            raise self._error(axis, f"vectorize needs an extent <= {MAX_VECTOR_LANES}, got {axis.dom_extent}; split it first")
        if kind == "unrolled" and axis.dom_extent > MAX_UNROLL:
            raise self._error(axis, f"unroll needs an extent <= {MAX_UNROLL}, got {axis.dom_extent}; split it first")
        self.iter_var_kinds[axis.uid] = kind

    def vectorize(self, axis: IterVar) -> None:
        """Run the loop as one vector operation of ``extent`` lanes (explicit LLVM vectors;
        a tail under a guard becomes masked loads and stores).

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] + 1.0, name="B")
            >>> s = create_schedule(B); outer, inner = s[B].split(B.op.axis[0], factor=16)
            >>> s[B].vectorize(inner)
        """
        self._annotate(axis, "vectorized")

    def unroll(self, axis: IterVar) -> None:
        """Replicate the loop body ``extent`` times.

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((8, 4), name="A"); B = compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
            >>> s = create_schedule(B); s[B].unroll(B.op.axis[1])
        """
        self._annotate(axis, "unrolled")

    def parallel(self, axis: IterVar) -> None:
        """Run the loop's iterations on the thread pool, in one contiguous chunk per thread.

        Example:
            >>> from tensorir import placeholder, compute
            >>> A = placeholder((8, 4), name="A"); B = compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
            >>> s = create_schedule(B); s[B].parallel(B.op.axis[0])
        """
        self._annotate(axis, "parallel")

    # ------------------------------------------------------------------ bookkeeping
    def _replace(self, old: IterVar, new: list[IterVar]):
        pos = self.leaf_iter_vars.index(old)
        self.leaf_iter_vars[pos:pos + 1] = new
        self.all_iter_vars.extend(new)
        self.iter_var_kinds.pop(old.uid, None)

    def _replace_pair(self, outer, inner, new):
        pos = self.leaf_iter_vars.index(outer)
        self.leaf_iter_vars[pos:pos + 2] = [new]
        self.all_iter_vars.append(new)


class Schedule:
    """Stages for every compute op reachable from the outputs, producers first.

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((4,), name="A")
        >>> B = compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> C = compute((4,), lambda i: B[i] * 2.0, name="C")
        >>> [st.op.name for st in create_schedule(C).stages]
        ['B', 'C']
    """

    def __init__(self, outputs: list[Tensor]):
        self.outputs = outputs
        self.stages: list[Stage] = []
        self._by_op: dict[int, Stage] = {}
        seen: set[int] = set()

        def visit(t: Tensor):
            if id(t.op) in seen:
                return
            seen.add(id(t.op))
            for inp in t.op.input_tensors:
                visit(inp)
            if isinstance(t.op, ComputeOp):
                stage = Stage(t.op)
                self.stages.append(stage)
                self._by_op[id(t.op)] = stage
        for out in outputs:
            visit(out)

    def __getitem__(self, tensor) -> Stage:
        op = tensor.op if isinstance(tensor, Tensor) else tensor
        stage = self._by_op.get(id(op))
        if stage is None:
            if isinstance(op, PlaceholderOp):
                raise ScheduleError(f"{op.name} is an input placeholder; it has no stage to schedule")
            raise ScheduleError(f"{getattr(op, 'name', op)} is not part of this schedule")
        return stage


def create_schedule(outputs) -> Schedule:
    """A default schedule for one output tensor or a list of them: every stage computed in full,
    before its consumers, with row-major serial loops.

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i], name="B")
        >>> s = create_schedule(B); s[B]
        Stage(B)
    """
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs:
        raise ScheduleError("create_schedule needs at least one output tensor")
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"create_schedule takes tensors, got {type(t).__name__}")
        if not isinstance(t.op, ComputeOp):
            raise ScheduleError(f"output {t.name} is a placeholder; outputs must be computed tensors")
    return Schedule(outputs)
