"""Schedules: one stage per compute op, and the loop-transforming primitives on stages.

A stage starts with one loop per axis (output axes, then reduce axes) in row-major order.
``split``, ``tile`` and ``fuse`` replace loops by new ones (recorded as relations, so lowering
can rebuild each original axis from them); ``reorder`` permutes loops; ``vectorize``,
``unroll`` and ``parallel`` set a loop's kind.
"""
from __future__ import annotations

from dataclasses import dataclass

from tilefuse.tensorir.expr import IterVar, Reduce, TensorLoad, as_expr
from tilefuse.tensorir.intrinsics import if_then_else
from tilefuse.tensorir.runtime.prepacked import PanelPack
from tilefuse.tensorir.tensor import ComputeOp, PlaceholderOp, Tensor, placeholder, post_order
from tilefuse.tensorir.walk import rewrite, substitute, walk
from tilefuse.tensorir.errors import TilefuseError

MAX_VECTOR_LANES = 256
MAX_UNROLL = 1024


class ScheduleError(TilefuseError, ValueError):
    """An illegal scheduling request; the message names the stage, the axis and the reason."""


@dataclass(frozen=True)
class Split:
    """``parent = outer * inner_extent + inner``; the inner extent is ``factor``, or follows
    from ``nparts`` (the outer extent) once the parent's extent is known at lowering."""
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None = None


@dataclass(frozen=True)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


def _axis(name: str, extent: int, kind: str) -> IterVar:
    return IterVar(name, "int64", 0, 0, extent, kind)


def _cache_level(level) -> int:
    """A prefetch's cache level, 1 or 2; ScheduleError otherwise."""
    if level not in (1, 2) or isinstance(level, bool):
        raise ScheduleError(f"a prefetch's cache level is 1 (L1) or 2 (L2), got {level!r}")
    return level


def split_extents(extent: int, factor: int | None, nparts: int | None) -> tuple[int, int]:
    """(outer, inner) extents of splitting an axis of ``extent`` by ``factor`` or ``nparts``.

    Example:
        >>> split_extents(10, 4, None), split_extents(10, None, 3)
        ((3, 4), (3, 4))
    """
    if factor is not None:
        return -(-extent // factor), factor
    inner = -(-extent // nparts) if extent else 1
    return (-(-extent // inner) if extent else nparts), inner


class Stage:
    """The schedule of one compute op: its loops, their order and kinds.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((100,), name="A")
        >>> B = compute((100,), lambda i: A[i] * 2.0, name="B")
        >>> s = create_schedule(B)
        >>> outer, inner = s[B].split(B.op.axis[0], factor=16)
        >>> s[B].vectorize(inner)
        >>> [a.name for a in s[B].leaf_iter_vars]
        ['i.outer', 'i.inner']
    """

    def __init__(self, op: ComputeOp, schedule: "Schedule"):
        self.op = op
        self.schedule = schedule
        # what lowering computes: the op's own definition until cache_write, cache_read,
        # rfactor or pack rewrite it
        self.axis: tuple[IterVar, ...] = tuple(op.axis)
        self.reduce_axis: tuple[IterVar, ...] = tuple(op.reduce_axis)
        self.body = op.body
        # (tensor, op axis, iterations ahead, write) of ``prefetch``; (tensor, None, a function of
        # the trip's coordinates, write) of ``prefetch_at``
        self.prefetches: list[tuple] = []
        self._reset_loops()
        # where the stage is computed: "root", "inline", or "at" a loop of another stage
        self.attach_type = "root"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.round_up: tuple = ()                   # data axes whose region is not shifted inside
        self.storage_shape: tuple | None = None     # the buffer's shape when storage_align pads it

    def _reset_loops(self):
        self.leaf_iter_vars: list[IterVar] = list(self.axis) + list(self.reduce_axis)
        self.all_iter_vars: list[IterVar] = list(self.leaf_iter_vars)
        self.relations: list[Split | Fuse] = []
        self.iter_var_kinds: dict[int, str] = {}   # uid -> "vectorized" | "unrolled" | "parallel"

    @property
    def tensor(self) -> Tensor:
        """The tensor this stage computes."""
        return self.op.output(0)

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
            >>> from tilefuse.tensorir import placeholder, compute
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
        outer_extent, inner_extent = split_extents(parent.dom_extent, factor, nparts)
        outer = _axis(f"{parent.name}.outer", outer_extent, parent.kind)
        inner = _axis(f"{parent.name}.inner", inner_extent, parent.kind)
        self._replace(parent, [outer, inner])
        self.relations.append(Split(parent, outer, inner, value if factor is not None else None,
                                    value if nparts is not None else None))
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: int, y_factor: int):
        """Split two axes and order the result (x.outer, y.outer, x.inner, y.inner).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
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
            >>> from tilefuse.tensorir import placeholder, compute
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
            >>> from tilefuse.tensorir import placeholder, compute
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
        if self.attach_type == "root":   # elsewhere the extent is known at lowering (check_extent)
            self.check_extent(axis, kind, axis.dom_extent)
        self.iter_var_kinds[axis.uid] = kind

    def check_extent(self, axis: IterVar, kind: str, extent: int) -> None:
        """Raise ScheduleError when a vectorized or unrolled loop is too long to emit."""
        if kind == "vectorized" and extent > MAX_VECTOR_LANES:
            raise self._error(axis, f"vectorize needs an extent <= {MAX_VECTOR_LANES}, got {extent}; split it first")
        if kind == "unrolled" and extent > MAX_UNROLL:
            raise self._error(axis, f"unroll needs an extent <= {MAX_UNROLL}, got {extent}; split it first")

    def vectorize(self, axis: IterVar) -> None:
        """Run the loop as one vector operation of ``extent`` lanes (explicit LLVM vectors;
        a tail under a guard becomes masked loads and stores).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] + 1.0, name="B")
            >>> s = create_schedule(B); outer, inner = s[B].split(B.op.axis[0], factor=16)
            >>> s[B].vectorize(inner)
        """
        self._annotate(axis, "vectorized")

    def unroll(self, axis: IterVar) -> None:
        """Replicate the loop body ``extent`` times.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8, 4), name="A"); B = compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
            >>> s = create_schedule(B); s[B].unroll(B.op.axis[1])
        """
        self._annotate(axis, "unrolled")

    def parallel(self, axis: IterVar) -> None:
        """Run the loop's iterations on the thread pool, in one contiguous chunk per thread.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8, 4), name="A"); B = compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
            >>> s = create_schedule(B); s[B].parallel(B.op.axis[0])
        """
        self._annotate(axis, "parallel")

    def prefetch(self, tensor: Tensor, axis: IterVar, offset: int = 1, write: bool = False, level: int = 1) -> None:
        """In this stage's innermost loop, fetch the cache line of ``tensor`` that the stage will
        need ``offset`` iterations of ``axis`` (a data or reduce axis of the op) ahead: the
        address of the stage's first read of ``tensor``, or, for a tensor it does not read (its
        own output, or one of the same shape that a later stage reads or writes), the element at
        the stage's own coordinates. ``write`` fetches the line for writing; ``level`` 2 fetches it
        into L2 only (a line needed long after, which in L1 would evict the ones needed now). A hint only: results
        never change, and an address past the tensor's end is harmless. Copies of an unrolled
        loop that do not move the address leave the fetch to the first copy. Useful when each
        iteration of ``axis`` streams a row from memory and then computes for a while (a softmax
        row), or when a reduction streams weights that serve few rows (a classifier's).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((64, 1024), name="A"); B = compute((64, 1024), lambda i, j: A[i, j] * 2.0, name="B")
            >>> s = create_schedule(B); s[B].prefetch(A, B.op.axis[0], 1)
            >>> s[B].prefetch(B, B.op.axis[0], 1, write=True)
            >>> r = reduce_axis((0, 1024), name="r"); C = compute((64,), lambda i: sum(A[i, r], axis=r), name="C")
            >>> s = create_schedule(C); s[C].prefetch(A, r, 32)
        """
        if not isinstance(tensor, Tensor):
            raise ScheduleError(f"stage {self.op.name}: prefetch needs a tensor, got {type(tensor).__name__}")
        if not isinstance(axis, IterVar) or (axis not in self.axis and axis not in self.reduce_axis):
            raise self._error(axis, "prefetch needs an axis of the op (one of stage.op.axis or stage.op.reduce_axis)")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset == 0:
            raise self._error(axis, f"prefetch offset must be a nonzero integer, got {offset!r}")
        self.prefetches.append((tensor, axis, offset, bool(write), _cache_level(level)))

    def prefetch_at(self, tensor: Tensor, index, write: bool = False, level: int = 1) -> None:
        """Once per trip of this stage's innermost loop that is neither unrolled nor vectorized,
        fetch the cache line of ``tensor`` at ``index(coords)``: ``coords`` maps each of the op's
        axes (data and reduce) to its coordinate at the trip's first unrolled copy and first
        lane, and ``index`` returns one index per dimension of ``tensor``, read as a flat
        row-major address (an index past the end of a dimension carries into the next one).
        ``level``: as ``prefetch``'s. A hint only: results never change, and an address past
        the tensor's end is harmless.
        For addresses no single axis moves to: a matrix product's next panel of weights,
        fetched a line per trip while the current one serves its rows.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((8, 64), name="A"); W = placeholder((64, 32), name="W")
            >>> r = reduce_axis((0, 64), name="r")
            >>> C = compute((8, 32), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
            >>> s = create_schedule(C); ro, ri = s[C].split(r, factor=4); s[C].unroll(ri)
            >>> s[C].prefetch_at(W, lambda c: (c[r] + 16, 0))      # 4 rows of W ahead per trip of ro
            >>> from tilefuse.schedule import lower
            >>> print(lower(s, [A, W, C]))
            func main(A: float32[8, 64], W: float32[64, 32], C: float32[8, 32]) {
              for (i, 0, 8) {
                for (j, 0, 32) {
                  C[i, j] = 0f
                  for (r.outer, 0, 16) {
                    unrolled (r.inner, 0, 4) {
                      if (r.inner == 0) {
                        prefetch W[r.outer * 4 + 16, 0]
                      }
                      C[i, j] = C[i, j] + A[i, r.outer * 4 + r.inner] * W[r.outer * 4 + r.inner, j]
                    }
                  }
                }
              }
            }
        """
        if not isinstance(tensor, Tensor):
            raise ScheduleError(f"stage {self.op.name}: prefetch_at needs a tensor, got {type(tensor).__name__}")
        if not callable(index):
            raise ScheduleError(f"stage {self.op.name}: prefetch_at needs a function of the coordinates, "
                                f"got {type(index).__name__}")
        self.prefetches.append((tensor, None, index, bool(write), _cache_level(level)))

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Lay out this stage's buffer so that neighbouring entries along data axis ``axis`` are
        ``factor * k + offset`` elements apart (the next axis's extent padded; the padding is
        never written or read). Rows a multiple of 4 KiB apart fall in the same L1 sets and evict
        one another when a loop reads several of them; a cache line of padding per row spreads
        them over the sets. For a stage computed at the root into a buffer of its own (not an
        output of the schedule).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8, 512), name="A")
            >>> B = compute((8, 512), lambda i, j: A[i, j] * 2.0, name="B")
            >>> C = compute((8, 512), lambda i, j: B[i, j] + 1.0, name="C")
            >>> s = create_schedule(C); s[B].storage_align(B.op.axis[0], 512, 16)
            >>> s[B].storage_shape
            (8, 528)
        """
        axes = list(self.op.axis)
        if not isinstance(axis, IterVar) or axis not in axes:
            raise self._error(axis, "storage_align needs a data axis of the op (one of stage.op.axis)")
        d = axes.index(axis)
        if d == len(axes) - 1:
            raise self._error(axis, "storage_align: the last axis's entries are adjacent; align an axis before it")
        for name, value, low in (("factor", factor, 1), ("offset", offset, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise self._error(axis, f"storage_align {name} must be an int >= {low}, got {value!r}")
        if offset >= factor:
            raise self._error(axis, f"storage_align offset must be less than the factor {factor}, got {offset}")
        shape = tuple(self.op.output(0).shape)
        inner = 1
        for n in shape[d + 2:]:
            inner *= n
        padded = next((n for n in range(shape[d + 1], shape[d + 1] + factor) if n * inner % factor == offset), None)
        if padded is None:
            raise self._error(axis, f"storage_align: no extent from {shape[d + 1]} of the next axis makes the stride "
                                    f"({inner} elements per entry) {offset} modulo {factor}")
        self.storage_shape = shape[:d + 1] + (padded,) + shape[d + 2:]

    # ------------------------------------------------------------------ where to compute
    def compute_at(self, parent: "Stage", axis: IterVar, round_up=()) -> None:
        """Compute this stage inside loop ``axis`` of stage ``parent``, just the region the
        loop's iterations read (bound inference at lowering), in a buffer local to the loop.
        A region that would reach past the end of one of the op's axes is shifted back inside
        it, except along the data axes listed in ``round_up``: there it keeps its start and
        runs past the end (Halide's RoundUp tail), which keeps a tile aligned, but the stage
        then reads past its inputs' ends along that axis, so they must be padded there (a
        packed input whose last block is filled).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((64, 64), name="A")
            >>> B = compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
            >>> C = compute((64, 64), lambda i, j: B[i, j] + 1.0, name="C")
            >>> s = create_schedule(C); io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 8)
            >>> s[B].compute_at(s[C], jo)
        """
        if isinstance(parent, Tensor):
            parent = self.schedule[parent]
        if not isinstance(parent, Stage):
            raise ScheduleError(f"stage {self.op.name}: compute_at needs a stage, got {type(parent).__name__}")
        if parent is self:
            raise ScheduleError(f"stage {self.op.name}: compute_at into itself")
        if not isinstance(axis, IterVar) or axis not in parent.leaf_iter_vars:
            raise ScheduleError(f"stage {self.op.name}, axis {getattr(axis, 'name', axis)}: compute_at needs a "
                                f"loop of stage {parent.op.name} (one of its current leaf axes)")
        order = self.schedule.stages
        if order.index(parent) < order.index(self):
            raise ScheduleError(f"stage {self.op.name}, axis {axis.name}: stage {parent.op.name} is computed "
                                f"before {self.op.name} (it is a producer), so it cannot hold it")
        round_up = tuple(round_up)
        for a in round_up:
            if not isinstance(a, IterVar) or a not in self.axis:
                raise self._error(a, "compute_at: round_up takes data axes of the op (stage.op.axis)")
        self.attach_type, self.attach_stage, self.attach_ivar = "at", parent, axis
        self.round_up = round_up

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers; it gets no buffer or loops.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8,), name="A")
            >>> B = compute((8,), lambda i: A[i] * 2.0, name="B")
            >>> C = compute((8,), lambda i: B[i] + 1.0, name="C")
            >>> s = create_schedule(C); s[B].compute_inline()
        """
        if self.reduce_axis:
            raise ScheduleError(f"stage {self.op.name}: cannot inline a reduction; compute it at a loop instead")
        if any(t.op is self.op for t in self.schedule.outputs):
            raise ScheduleError(f"stage {self.op.name}: cannot inline an output of the schedule")
        self.attach_type, self.attach_stage, self.attach_ivar = "inline", None, None

    def compute_root(self) -> None:
        """Compute this stage in full, at the top level, before its consumers (the default).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i], name="B")
            >>> s = create_schedule(B); s[B].compute_root()
        """
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None

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
        >>> from tilefuse.tensorir import placeholder, compute
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
        # id of a stage's op -> (the constant it is computed from, a pack that computes it by numpy)
        self.numpy_packs: dict[int, tuple] = {}
        for op in post_order(outputs):
            if isinstance(op, ComputeOp):
                stage = Stage(op, self)
                self.stages.append(stage)
                self._by_op[id(op)] = stage

    def __getitem__(self, tensor) -> Stage:
        op = tensor.op if isinstance(tensor, Tensor) else tensor
        stage = self._by_op.get(id(op))
        if stage is None:
            if isinstance(op, PlaceholderOp):
                raise ScheduleError(f"{op.name} is an input placeholder; it has no stage to schedule")
            raise ScheduleError(f"{getattr(op, 'name', op)} is not part of this schedule")
        return stage

    # ------------------------------------------------------------------ new stages
    def cache_write(self, tensor: Tensor, scope: str = "local", order=None) -> Tensor:
        """Compute ``tensor`` into a new stage ``<name>.<scope>`` and make ``tensor`` a copy of
        it. Computed at a tile of ``tensor``, the new stage accumulates in a small local
        buffer (registers, once unrolled and vectorized) that is written back once.
        ``order`` (a permutation of the dimensions) lays the new stage out with its dimensions
        in that order, e.g. ``(0, 2, 3, 1)`` keeps an NCHW result channels-last, so that a
        vector along the channels is contiguous in the buffer.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((64, 64), name="A"); B = placeholder((64, 64), name="B")
            >>> r = reduce_axis((0, 64), name="r")
            >>> C = compute((64, 64), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
            >>> s = create_schedule(C); CL = s.cache_write(C)
            >>> io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 16); s[CL].compute_at(s[C], jo)
            >>> CL.name
            'C.local'
        """
        stage = self[tensor]
        if stage.relations or stage.attach_type != "root":
            raise ScheduleError(f"stage {stage.op.name}: cache_write must come before the stage is split, "
                                f"fused or moved")
        order = tuple(range(len(stage.axis))) if order is None else tuple(order)
        if sorted(order) != list(range(len(stage.axis))):
            raise ScheduleError(f"stage {stage.op.name}: cache_write order {order} is not a permutation of its "
                                f"{len(stage.axis)} dimensions")
        body = stage.body
        axes = [stage.axis[d] for d in order]
        cached = _new_compute(f"{stage.op.name}.{scope}", tuple(stage.op.shape[d] for d in order), axes,
                              lambda *idx: substitute(body, dict(zip(axes, idx))))
        stage.body = TensorLoad(cached, tuple(axes), stage.op.dtype)
        stage.reduce_axis = ()
        stage._reset_loops()
        self._insert(cached, before=stage)
        return cached

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """Copy ``tensor`` into a new stage ``<name>.<scope>`` that ``readers`` read instead.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((64,), name="A"); B = compute((64,), lambda i: A[i] * 2.0, name="B")
            >>> s = create_schedule(B); AL = s.cache_read(A, "local", [B])
            >>> [st.op.name for st in s.stages]
            ['A.local', 'B']
        """
        readers = self._reader_stages(tensor, readers, "cache_read")
        cached = _new_compute(f"{tensor.name}.{scope}", tensor.shape,
                              _axes_like(tensor), lambda *idx: tensor[idx])
        for stage in readers:
            stage.body = _replace_reads(stage.body, tensor, lambda idx: cached[idx])
        self._insert(cached, before=readers[0])
        return cached

    def pack(self, tensor: Tensor, axis: int, block: int, readers=None) -> Tensor:
        """Repack ``tensor`` into a blocked layout as its own stage, as weight prepacking does:
        dimension ``axis`` of extent n becomes an outer dimension of n/block blocks and an
        innermost dimension of ``block`` (zero past n), e.g. B[k][n] -> B[n/16][k][16] for
        axis=1, block=16. ``readers`` (all by default) read the packed tensor instead.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((8, 32), name="A"); B = placeholder((32, 40), name="B")
            >>> r = reduce_axis((0, 32), name="r")
            >>> C = compute((8, 40), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
            >>> s = create_schedule(C); P = s.pack(B, axis=1, block=16)
            >>> P.shape
            (3, 32, 16)
        """
        readers = self._reader_stages(tensor, readers, "pack")
        shape = tensor.shape
        if isinstance(axis, bool) or not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
            raise ScheduleError(f"pack {tensor.name}: axis must be a dimension index of shape {shape}, got {axis!r}")
        axis %= len(shape)
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise ScheduleError(f"pack {tensor.name}, axis {axis}: block must be an int >= 1, got {block!r}")
        n = shape[axis]
        packed_shape = (-(-n // block),) + shape[:axis] + shape[axis + 1:] + (block,)

        def element(no, *rest):
            *others, ni = rest
            index = tuple(others[:axis]) + (no * block + ni,) + tuple(others[axis:])
            if n % block == 0:
                return tensor[index]
            return if_then_else(no * block + ni < n, tensor[index], as_expr(0, tensor.dtype))
        dims = [a if isinstance(a, str) else a.name for a in _axes_like(tensor)]
        names = [f"{dims[axis]}.block"] + dims[:axis] + dims[axis + 1:] + [f"{dims[axis]}.lane"]
        packed = _new_compute(f"{tensor.name}.packed", packed_shape, names, element)
        self.numpy_packs[id(packed.op)] = (tensor, PanelPack(tensor.shape, tensor.dtype, axis, block))

        def read(idx):
            i = idx[axis]
            return packed[(i // block,) + tuple(idx[:axis]) + tuple(idx[axis + 1:]) + (i % block,)]
        for stage in readers:
            stage.body = _replace_reads(stage.body, tensor, read)
        self._insert(packed, before=readers[0])
        return packed

    def redefine(self, tensor: Tensor, equivalent: Tensor) -> None:
        """Compute ``tensor`` by another algorithm: its stage takes the body of ``equivalent``
        (a compute of the same shape and type from the same inputs, such as a Winograd
        convolution for a direct one), and the stages ``equivalent`` reads that the schedule
        lacks are inserted before it, producers first. Readers of ``tensor`` are unchanged.
        Like ``cache_write``, it comes before the stage's loops are split, fused, reordered,
        annotated or moved; an equivalent that reads ``tensor`` (or a reader of it) is refused.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 4.0, name="B")
            >>> twice = compute((8,), lambda i: A[i] * 2.0, name="twice")
            >>> s = create_schedule(B); s.redefine(B, compute((8,), lambda i: twice[i] * 2.0))
            >>> [st.op.name for st in s.stages]
            ['twice', 'B']
        """
        stage = self[tensor]
        untouched = list(stage.axis) + list(stage.reduce_axis)
        if stage.relations or stage.attach_type != "root" or stage.leaf_iter_vars != untouched or stage.iter_var_kinds:
            raise ScheduleError(f"stage {stage.op.name}: redefine must come before the stage's loops are split, "
                                f"fused, reordered, annotated or moved")
        if not isinstance(equivalent, Tensor) or not isinstance(equivalent.op, ComputeOp):
            raise ScheduleError(f"redefine {stage.op.name}: the equivalent must be a computed tensor")
        for op in post_order([equivalent]):
            if op is tensor.op or (id(op) in self._by_op and any(o is tensor.op for o in post_order([op.output(0)]))):
                raise ScheduleError(f"redefine {stage.op.name}: the equivalent reads {stage.op.name} itself "
                                    f"(through {op.name})")
        if tuple(equivalent.shape) != tuple(tensor.shape) or equivalent.dtype != tensor.dtype:
            raise ScheduleError(f"redefine {stage.op.name}: the equivalent is {equivalent.dtype}{list(equivalent.shape)}, "
                                f"not {tensor.dtype}{list(tensor.shape)}")
        for op in post_order([equivalent]):
            if isinstance(op, ComputeOp) and op is not equivalent.op and id(op) not in self._by_op:
                self._insert(op.output(0), before=stage)
        stage.body = substitute(equivalent.op.body, dict(zip(equivalent.op.axis, stage.axis)))
        stage.reduce_axis = tuple(equivalent.op.reduce_axis)
        stage._reset_loops()

    def as_input(self, tensor: Tensor) -> Tensor:
        """Cut the DAG at ``tensor``: the kernel no longer computes it but reads it as an
        input, the placeholder returned (same name, shape and type). The tensor is then
        computed elsewhere, e.g. once for constant weights (prepacking) instead of on every
        call. Stages only ``tensor`` read stay in the schedule, unused.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] + 1.0, name="B")
            >>> C = compute((8,), lambda i: B[i] * 2.0, name="C")
            >>> s = create_schedule(C); BI = s.as_input(B)
            >>> [st.op.name for st in s.stages], BI.shape
            (['C'], (8,))
        """
        stage = self[tensor]
        if any(tensor.op is out.op for out in self.outputs):
            raise ScheduleError(f"as_input {tensor.name}: an output of the schedule cannot be an input")
        if stage.attach_type != "root":
            raise ScheduleError(f"as_input {tensor.name}: the stage is {stage.attach_type}, not computed at root")
        if any(st.attach_type == "at" and st.attach_stage is stage for st in self.stages):
            raise ScheduleError(f"as_input {tensor.name}: other stages are computed at it")
        given = placeholder(tensor.shape, tensor.dtype, name=tensor.name)
        for st in self.stages:
            if st is not stage and _reads(st.body, tensor):
                st.body = _replace_reads(st.body, tensor, lambda idx: given[idx])
            st.prefetches = [(given if t.op is tensor.op else t, *rest) for t, *rest in st.prefetches]
        self.stages.remove(stage)
        del self._by_op[id(tensor.op)]
        return given

    def rfactor(self, tensor: Tensor, axis: IterVar) -> Tensor:
        """Factor the reduction of ``tensor`` over ``axis`` (a reduce axis of its stage, or the
        inner part of a split of one) into a new stage with ``axis`` as a data axis, so it can
        be vectorized or parallelized; ``tensor`` then reduces over that axis only.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((4, 100), name="A"); r = reduce_axis((0, 100), name="r")
            >>> B = compute((4,), lambda i: sum(A[i, r], axis=r), name="B")
            >>> s = create_schedule(B); ro, ri = s[B].split(r, factor=16)
            >>> BF = s.rfactor(B, ri); BF.shape
            (4, 16)
        """
        stage = self[tensor]
        body = stage.body
        if not isinstance(body, Reduce):
            raise ScheduleError(f"stage {stage.op.name}: rfactor needs a reduction")
        if not isinstance(axis, IterVar) or axis not in stage.leaf_iter_vars or axis.kind != "reduce":
            raise ScheduleError(f"stage {stage.op.name}, axis {getattr(axis, 'name', axis)}: rfactor needs a "
                                f"reduce loop of this stage")
        root, split = axis, None
        for rel in stage.relations:
            if isinstance(rel, Split) and rel.inner is axis and rel.parent in stage.reduce_axis:
                root, split = rel.parent, rel
            elif not (isinstance(rel, Split) and rel.parent in stage.reduce_axis):
                raise ScheduleError(f"stage {stage.op.name}: rfactor supports a stage whose only loop "
                                    f"changes are splits of reduce axes")
        if root not in stage.reduce_axis:
            raise ScheduleError(f"stage {stage.op.name}, axis {axis.name}: rfactor needs a reduce axis or "
                                f"the inner part of one split reduce axis")
        factor = split.inner.dom_extent if split else root.dom_extent
        others = [a for a in stage.reduce_axis if a is not root]
        if split:
            outer = IterVar(f"{root.name}.outer", "int64", 0, 0, split.outer.dom_extent, "reduce")
            others = [outer] + others

        def factored(*idx):
            *data, lane = idx
            mapping = dict(zip(stage.axis, data))
            value = lane + root.dom_min
            if split:
                value = outer * factor + value
            mapping[root] = value
            source = substitute(body.source, mapping)
            if split and root.dom_extent % factor:
                source = if_then_else(outer * factor + lane < root.dom_extent, source, body.identity)
            if not others:
                return source
            return Reduce(body.combiner, source, tuple(others), body.identity, body.dtype)
        names = [a.name for a in stage.axis] + [f"{axis.name}.v"]
        rf = _new_compute(f"{stage.op.name}.rf", stage.op.shape + (factor,), names, factored)
        final = IterVar(axis.name, "int64", 0, 0, factor, "reduce")
        stage.body = Reduce(body.combiner, rf[tuple(stage.axis) + (final,)], (final,), body.identity, body.dtype)
        stage.reduce_axis = (final,)
        stage._reset_loops()
        self._insert(rf, before=stage)
        return rf

    # ------------------------------------------------------------------ helpers
    def _insert(self, tensor: Tensor, before: Stage) -> None:
        stage = Stage(tensor.op, self)
        self.stages.insert(self.stages.index(before), stage)
        self._by_op[id(tensor.op)] = stage

    def _reader_stages(self, tensor: Tensor, readers, primitive: str) -> list[Stage]:
        reading = [st for st in self.stages if _reads(st.body, tensor)]
        if readers is None:
            chosen = reading
        else:
            chosen = [self[r] if not isinstance(r, Stage) else r for r in readers]
            for st in chosen:
                if st not in reading:
                    raise ScheduleError(f"{primitive} {tensor.name}: stage {st.op.name} does not read it")
        if not chosen:
            raise ScheduleError(f"{primitive} {tensor.name}: no stage reads it")
        return sorted(chosen, key=self.stages.index)


def _new_compute(name: str, shape: tuple, axes_or_names, fbody) -> Tensor:
    names = [a if isinstance(a, str) else a.name for a in axes_or_names]
    axis = tuple(IterVar(n, "int64", 0, 0, e, "data") for n, e in zip(names, shape))
    body = as_expr(fbody(*axis))
    op = ComputeOp(name, tuple(shape), body.dtype, "", axis, body)
    op._output = Tensor(op)
    return op._output


def _axes_like(tensor: Tensor):
    if isinstance(tensor.op, ComputeOp):
        return tensor.op.axis
    return [f"ax{d}" for d in range(tensor.ndim)]


def _reads(body, tensor: Tensor) -> bool:
    return any(isinstance(n, TensorLoad) and n.tensor is tensor for n in walk(body))


def _replace_reads(body, tensor: Tensor, read):
    return rewrite(body, lambda n: read(n.indices) if isinstance(n, TensorLoad) and n.tensor is tensor else n)


def create_schedule(outputs) -> Schedule:
    """A default schedule for one output tensor or a list of them: every stage computed in full,
    before its consumers, with row-major serial loops.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
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
