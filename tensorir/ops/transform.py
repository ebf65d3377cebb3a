"""Data-movement ops of the oneDNN graph op set: StaticReshape, StaticTranspose, Concat,
Reorder (identity), GenIndex and Dropout (inference: identity); and the ones our ONNX front end
adds: Gather, Slice, Pad and Expand. Each is one injective compute that maps an output index to
a source index.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> x = placeholder((2, 3, 4), name="x")
    >>> y = transpose(reshape(x, [6, -1], special_zero=False), [1, 0])
    >>> y.shape, y.op.tag
    ((4, 6), 'transpose')
"""
from __future__ import annotations

import builtins
import math

from .. import intrinsics as ti
from ..expr import as_expr, const
from ..tensor import Tensor, compute
from ._common import (broadcast_index, broadcast_shapes, check_choice, check_ints, check_number, check_tensor,
                      emax, emin, normalize_axis)

__all__ = ["reshape", "transpose", "concat", "reorder", "identity", "gen_index", "dropout", "gather", "slice",
           "pad", "expand"]


def reshape(x: Tensor, shape, special_zero: bool = False, name: str | None = None) -> Tensor:
    """StaticReshape: the elements of ``x`` in row-major order, in ``shape``. One ``-1`` is
    inferred from the element count; with ``special_zero`` a ``0`` copies the dimension of ``x``
    at that position, otherwise it is a zero-size dimension.

    The dims of both shapes (unit dims left out) are paired into groups of equal products,
    and each source index is computed from its group's flat index only: a dim that both
    shapes share reads its index as it is (``(128, 3072) -> (1, 128, 3072)`` is ``x[i, j]``, no
    division), a split dim reads ``h * 64 + d``, and only merged dims divide
    (``x[(f // stride_d) % n_d, ...]`` within the group).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> reshape(placeholder((2, 3, 4)), [0, -1], special_zero=True).shape
        (2, 12)
    """
    op = "StaticReshape"
    check_tensor(op, "src", x)
    shape = check_ints(op, "shape", shape, minimum=-1)
    if not isinstance(special_zero, bool):
        raise ValueError(f"StaticReshape: attribute special_zero must be a bool, got {special_zero!r}")
    if special_zero:
        for d, n in enumerate(shape):
            if n == 0:
                if d >= x.ndim:
                    raise ValueError(f"StaticReshape: shape {shape} copies dimension {d} (special_zero) "
                                     f"but src {x.shape} has rank {x.ndim}")
                shape[d] = x.shape[d]
    total = math.prod(x.shape)
    if shape.count(-1) > 1:
        raise ValueError(f"StaticReshape: attribute shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or total % known:
            raise ValueError(f"StaticReshape: cannot infer the -1 in shape {shape} for src {x.shape} "
                             f"({total} elements)")
        shape[shape.index(-1)] = total // known
    if math.prod(shape) != total:
        raise ValueError(f"StaticReshape: shape {shape} has {math.prod(shape)} elements but src {x.shape} "
                         f"has {total}")
    shape = tuple(shape)
    if shape == x.shape:
        return compute(shape, lambda *i: x[i], name=name or "reshape", tag="reshape")
    if not total:                   # nothing is read from an empty tensor
        return compute(shape, lambda *i: x[tuple(i[0] for _ in x.shape)], name=name or "reshape", tag="reshape")
    groups = _reshape_groups(x.shape, shape)

    def body(*idx):
        index = [0] * x.ndim
        for out_dims, in_dims in groups:        # each group: row-major flat index, then unflattened
            flat, stride = None, 1
            for d in reversed(out_dims):
                term = idx[d] if stride == 1 else idx[d] * stride
                flat = term if flat is None else term + flat
                stride *= shape[d]
            stride = 1
            for k, d in enumerate(reversed(in_dims)):
                v = flat if stride == 1 else flat // stride
                index[d] = v if k == len(in_dims) - 1 else v % x.shape[d]
                stride *= x.shape[d]
        return x[tuple(index)]
    return compute(shape, body, name=name or "reshape", tag="reshape")


def _reshape_groups(src: tuple, dst: tuple) -> list:
    """(dst dims, src dims) pairs covering both shapes' non-unit dims, each pair the shortest
    runs of equal element count, in order.

    Example:
        >>> _reshape_groups((128, 3072), (1, 128, 3072))
        [([1], [0]), ([2], [1])]
        >>> _reshape_groups((1, 128, 768), (1, 128, 12, 64))
        [([1], [1]), ([2, 3], [2])]
    """
    outs = [d for d, n in enumerate(dst) if n != 1]
    ins = [d for d, n in enumerate(src) if n != 1]
    groups, o, i = [], 0, 0
    while o < len(outs) and i < len(ins):
        out_dims, in_dims = [outs[o]], [ins[i]]
        p, q = dst[outs[o]], src[ins[i]]
        o, i = o + 1, i + 1
        while p != q:
            if p < q:
                out_dims.append(outs[o])
                p, o = p * dst[outs[o]], o + 1
            else:
                in_dims.append(ins[i])
                q, i = q * src[ins[i]], i + 1
        groups.append((out_dims, in_dims))
    return groups


def transpose(x: Tensor, order, name: str | None = None) -> Tensor:
    """StaticTranspose: ``dst.shape[k] = x.shape[order[k]]``; ``order`` is a permutation of the
    axes (negative values count from the end; empty means reverse them).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> transpose(placeholder((2, 3, 4)), [0, -1, 1]).shape
        (2, 4, 3)
    """
    op = "StaticTranspose"
    check_tensor(op, "src", x)
    order = check_ints(op, "order", order)
    if not order:
        order = list(range(x.ndim))[::-1]
    order = [normalize_axis(op, "order", a, x.ndim) for a in order]
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"StaticTranspose: attribute order {order} is not a permutation of the {x.ndim} "
                         f"axes of src {x.shape}")
    shape = tuple(x.shape[a] for a in order)

    def body(*idx):
        index = [None] * x.ndim
        for k, a in enumerate(order):
            index[a] = idx[k]
        return x[tuple(index)]
    return compute(shape, body, name=name or "transpose", tag="transpose")


def concat(xs, axis: int, name: str | None = None) -> Tensor:
    """Concat: the tensors ``xs`` one after the other along ``axis``; all other dimensions,
    the rank and the dtype must match.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> concat([placeholder((2, 3)), placeholder((2, 5))], axis=-1).shape
        (2, 8)
    """
    op = "Concat"
    xs = list(xs) if not isinstance(xs, Tensor) else [xs]
    if not xs:
        raise ValueError("Concat: needs at least one input tensor")
    for k, t in enumerate(xs):
        check_tensor(op, f"src_{k}", t)
    first = xs[0]
    axis = normalize_axis(op, "axis", axis, max(first.ndim, 1))
    for k, t in enumerate(xs[1:], 1):
        if t.dtype != first.dtype:
            raise TypeError(f"Concat: src_{k} has dtype {t.dtype} but src_0 has {first.dtype}")
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"Concat: src_{k} of shape {t.shape} does not match src_0 {first.shape} outside "
                             f"axis {axis}")
    offsets = [0]
    for t in xs:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = first.shape[:axis] + (offsets[-1],) + first.shape[axis + 1:]
    parts = [(t, off) for t, off in zip(xs, offsets) if t.shape[axis] > 0]

    def body(*idx):
        def read(t, off):
            return t[idx[:axis] + (idx[axis] - off if off else idx[axis],) + idx[axis + 1:]]
        value = read(*parts[-1])
        for t, off in reversed(parts[:-1]):
            value = ti.if_then_else(idx[axis] < off + t.shape[axis], read(t, off), value)
        return value
    if not parts:
        return compute(shape, lambda *i: first[i], name=name or "concat", tag="concat")
    return compute(shape, body, name=name or "concat", tag="concat")


def reorder(x: Tensor, name: str | None = None) -> Tensor:
    """Reorder: a copy of ``x``. (oneDNN's Reorder changes the memory layout; tensorir tensors
    are row-major, so the algorithm is the identity.)

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> reorder(placeholder((2, 3))).op.tag
        'reorder'
    """
    check_tensor("Reorder", "src", x)
    return compute(x.shape, lambda *i: x[i], name=name or "reorder", tag="reorder")


def identity(x: Tensor, name: str | None = None) -> Tensor:
    """A copy of ``x`` (tag "identity").

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> identity(placeholder((2, 3))).shape
        (2, 3)
    """
    check_tensor("Identity", "src", x)
    return compute(x.shape, lambda *i: x[i], name=name or "identity", tag="identity")


def gen_index(x: Tensor, axis: int, name: str | None = None) -> Tensor:
    """GenIndex: an int32 tensor of the shape of ``x`` holding each element's index along
    ``axis`` (``x``'s values are not read).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> y = gen_index(placeholder((2, 3)), axis=-1)
        >>> y.shape, y.dtype
        ((2, 3), 'int32')
    """
    check_tensor("GenIndex", "src", x)
    axis = normalize_axis("GenIndex", "axis", axis, x.ndim)
    return compute(x.shape, lambda *i: ti.cast("int32", i[axis]), name=name or "gen_index", tag="gen_index")


def dropout(x: Tensor, name: str | None = None):
    """Dropout at inference: ``(dst, mask)`` with ``dst`` a copy of ``x`` and ``mask`` all ones
    (uint8), as the reference interpreter defines the op. (oneDNN's training dropout draws the
    mask from its own Philox generator, seeded by the op's seed and offset inputs, which is not
    reproduced; this compute ignores those inputs and the probability.)

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dst, mask = dropout(placeholder((2, 3)))
        >>> dst.shape, mask.dtype
        ((2, 3), 'uint8')
    """
    check_tensor("Dropout", "src", x)
    dst = compute(x.shape, lambda *i: x[i], name=name or "dropout", tag="dropout")
    mask = compute(x.shape, lambda *i: const(1, "uint8"), name=(name or "dropout") + "_mask", tag="dropout")
    return dst, mask


def gather(x: Tensor, indices: Tensor, axis: int = 0, name: str | None = None) -> Tensor:
    """Gather: ``numpy.take(x, indices, axis)``: the output has ``x``'s dims with the one at
    ``axis`` replaced by ``indices``' dims. ``indices`` (int32 or int64) are read at run time; a
    negative index counts from the end. (An index outside ``[-n, n)`` is taken modulo ``n``
    rather than read out of bounds.)

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> gather(placeholder((5, 4)), placeholder((2, 3), "int64"), axis=1).shape
        (5, 2, 3)
    """
    check_tensor("Gather", "src", x)
    check_tensor("Gather", "indices", indices)
    if indices.dtype not in ("int32", "int64"):
        raise TypeError(f"Gather: indices must be int32 or int64, got {indices.dtype}")
    axis = normalize_axis("Gather", "axis", axis, max(x.ndim, 1))
    if x.ndim == 0:
        raise ValueError("Gather: src must have at least one dimension")
    q, n = indices.ndim, x.shape[axis]
    shape = x.shape[:axis] + indices.shape + x.shape[axis + 1:]

    def body(*i):
        v = ti.cast("int64", indices[tuple(i[axis:axis + q])]) % n     # floor modulo: -1 -> n - 1
        return x[tuple(i[:axis]) + (v,) + tuple(i[axis + q:])]
    return compute(shape, body, name=name or "gather", tag="gather")


def slice(x: Tensor, starts, ends, axes=None, steps=None, name: str | None = None) -> Tensor:  # noqa: A001
    """Slice: ``x[start:end:step]`` along each of ``axes`` (default: the first ``len(starts)``
    axes; steps default to 1), with Python's clamping of starts and ends (as ONNX Slice).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> slice(placeholder((7, 13)), starts=[-1, 2], ends=[-8, 100], axes=[0, 1], steps=[-2, 3]).shape
        (4, 4)
    """
    op = "Slice"
    check_tensor(op, "src", x)
    starts, ends = check_ints(op, "starts", starts), check_ints(op, "ends", ends)
    axes = list(range(len(starts))) if axes is None else check_ints(op, "axes", axes, len(starts))
    steps = [1] * len(starts) if steps is None else check_ints(op, "steps", steps, len(starts))
    if len(ends) != len(starts):
        raise ValueError(f"Slice: starts {starts} and ends {ends} differ in length")
    ranges = [range(n) for n in x.shape]
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(op, "axes", axis, x.ndim)
        if step == 0:
            raise ValueError(f"Slice: attribute steps has a 0 for axis {axis}")
        if ranges[axis] != range(x.shape[axis]):
            raise ValueError(f"Slice: axis {axis} appears twice in axes {axes}")
        ranges[axis] = range(*builtins.slice(start, end, step).indices(x.shape[axis]))
    shape = tuple(len(r) for r in ranges)

    def body(*i):
        return x[tuple(v if r == range(n) else (r.start + v * r.step if r.step != 1 else r.start + v)
                       for v, r, n in zip(i, ranges, x.shape))]
    return compute(shape, body, name=name or "slice", tag="slice")


PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad(x: Tensor, pads_begin, pads_end, mode: str = "constant", value: float = 0.0,
        name: str | None = None) -> Tensor:
    """Pad: ``pads_begin[d]``/``pads_end[d]`` more elements before/after dim ``d`` (negative:
    that many fewer, a crop applied first). ``mode`` "constant" fills with ``value``; "edge"
    repeats the border element, "reflect" mirrors without repeating it, "wrap" continues
    periodically (numpy's ``pad`` modes).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> pad(placeholder((3, 4)), [1, -1], [2, 0], mode="reflect").shape
        (6, 3)
    """
    op = "Pad"
    check_tensor(op, "src", x)
    pb = check_ints(op, "pads_begin", pads_begin, x.ndim)
    pe = check_ints(op, "pads_end", pads_end, x.ndim)
    check_choice(op, "mode", mode, PAD_MODES)
    value = check_number(op, "value", value)
    lo = [max(-b, 0) for b in pb]                                  # cropped at the start
    kept = [n - max(-b, 0) - max(-e, 0) for n, b, e in zip(x.shape, pb, pe)]
    if any(k < 0 for k in kept):
        raise ValueError(f"Pad: pads {pb}, {pe} crop more than src {x.shape} holds")
    if mode != "constant" and any(k == 0 and (b > 0 or e > 0) for k, b, e in zip(kept, pb, pe)):
        raise ValueError(f"Pad: mode {mode} cannot pad an empty dimension of src {x.shape}")
    shape = tuple(k + max(b, 0) + max(e, 0) for k, b, e in zip(kept, pb, pe))

    fill = as_expr(value if x.dtype.startswith("float") else (bool(value) if x.dtype == "bool" else int(value)),
                   x.dtype)

    def source(v, before, padded, k):
        """The index into the kept part of a dim for output index v."""
        j = v - before if before else v
        if not padded or mode == "constant":
            return j
        if mode == "edge":
            return emin(emax(j, 0), k - 1)
        if mode == "wrap":
            return j % k
        if k == 1:                                         # reflect
            return as_expr(0, "int64")
        period = 2 * (k - 1)
        m = j % period
        return ti.if_then_else(m < k, m, period - m)

    def body(*i):
        index, inside = [], []
        for v, b, e, k, start in zip(i, pb, pe, kept, lo):
            before, after = max(b, 0), max(e, 0)
            j = source(v, before, before > 0 or after > 0, k)
            index.append(j + start if start else j)
            inside += ([v >= before] if before else []) + ([v < before + k] if after else [])
        read = x[tuple(index)]
        if mode != "constant" or not inside:
            return read
        cond = inside[0]
        for c in inside[1:]:
            cond = cond & c
        return ti.if_then_else(cond, read, fill)
    return compute(shape, body, name=name or "pad", tag="pad")


def expand(x: Tensor, shape, name: str | None = None) -> Tensor:
    """Expand: ``x`` broadcast (numpy rules, both ways) with ``shape``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> expand(placeholder((3, 1)), [2, 1, 4]).shape
        (2, 3, 4)
    """
    check_tensor("Expand", "src", x)
    shape = check_ints("Expand", "shape", shape, minimum=0)
    out = broadcast_shapes("Expand", x.shape, tuple(shape))
    return compute(out, lambda *i: x[broadcast_index(x, out, i)], name=name or "expand", tag="expand")
