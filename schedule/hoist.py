"""Prepacking: stages that read only constant inputs (weights, ``placeholder(...,
constant=True)``) are cut out of a schedule and built as kernels of their own, which run
once per weight array instead of on every call (the complex template's packed weight
panels, a transposed weight). A stage in ``Schedule.numpy_packs`` needs no kernel: a
constant's panels (``Schedule.pack`` of a constant input: ``PanelPack``) or its Winograd
transform (``WinogradFilters``) are computed by numpy, which saves an LLVM build per weight.

``build_prepacked`` returns a ``PrepackedKernel``: called with the same arguments as the
plain kernel, it packs the constants on its first call (and again only when it is given
other constant arrays, compared by identity: constants must not change in place), then runs
the main kernel on the packed copies.

Example:
    >>> import numpy as np
    >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
    >>> from tilefuse.schedule import create_schedule
    >>> A = placeholder((8, 32), name="A"); W = placeholder((32, 40), name="W", constant=True)
    >>> r = reduce_axis((0, 32), name="r")
    >>> C = compute((8, 40), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
    >>> s = create_schedule(C); _ = s.pack(W, axis=1, block=16)
    >>> f = build_prepacked(s, [A, W, C], constants=[W])
    >>> a, w, c = np.ones((8, 32), "float32"), np.ones((32, 40), "float32"), np.zeros((8, 40), "float32")
    >>> f(a, w, c); float(c[0, 0]), len(f.packs)
    (32.0, 1)
"""
from __future__ import annotations

from tilefuse.tensorir.expr import TensorLoad
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel
from tilefuse.tensorir.tensor import PlaceholderOp, Tensor, post_order
from tilefuse.tensorir.walk import walk

from .build import build
from .schedule import Schedule, create_schedule

def hoistable(s: Schedule, constants) -> list[Tensor]:
    """The tensors of root stages (not outputs) that read, through any stages, only the
    ``constants`` placeholders.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> W = placeholder((4,), name="W"); X = placeholder((4,), name="X")
        >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")
        >>> Y = compute((4,), lambda i: X[i] + W2[i], name="Y")
        >>> [t.name for t in hoistable(create_schedule(Y), [W])]
        ['W2']
    """
    constant_ops = {id(t.op) for t in constants}
    outputs = {id(t.op) for t in s.outputs}
    found = []
    for st in s.stages:
        if st.attach_type != "root" or id(st.op) in outputs:
            continue
        tensor = st.op.output(0)
        leaves = [op for op in post_order([tensor]) if isinstance(op, PlaceholderOp)]
        if leaves and all(id(op) in constant_ops for op in leaves) and \
                not any(st2.attach_type == "at" and st2.attach_stage is st for st2 in s.stages):
            found.append(tensor)
    return found


def build_prepacked(s: Schedule, args: list, constants, name: str = "main", target=None, build_pack=None):
    """Build ``s`` with parameters ``args`` for ``target`` (default: the host), every
    ``hoistable`` stage cut out (``Schedule.as_input``) and built apart by
    ``build_pack(tensor, name) -> (kernel, its input tensors)`` (default: the stage's plain
    loop nest; templates pass their own schedules): a ``PrepackedKernel`` taking ``args``, or
    the plain ``Kernel`` when nothing reads only constants. The schedule ``s`` is changed.

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule
        >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
        >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")         # reads only W: hoisted
        >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
        >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W]); f.kernels
        [Kernel(main(A: float32[4], W2: float32[4], C: float32[4])), Kernel(main_pack0(W: float32[4], W2: float32[4]))]
        >>> c = np.zeros(4, "float32"); f(np.arange(4, dtype="float32"), np.ones(4, "float32"), c); c.tolist()
        [2.0, 3.0, 4.0, 5.0]
        >>> build_prepacked(create_schedule(C), [A, W, C], constants=[])      # nothing to hoist
        Kernel(main(A: float32[4], W: float32[4], C: float32[4]))
    """
    hoisted = hoistable(s, constants)
    if not hoisted:
        return build(s, args, name=name, target=target)
    build_pack = build_pack or (lambda tensor, pack_name: _plain_pack(tensor, pack_name, target))
    position = {id(a.op): i for i, a in enumerate(args) if isinstance(a, Tensor)}
    packs, given = [], []
    constant_ops = {id(t.op) for t in constants}
    for k, tensor in enumerate(hoisted):
        source, numpy_pack = s.numpy_packs.get(id(tensor.op), (None, None))
        if source is not None and id(source.op) in constant_ops:     # computed from a constant by numpy
            kernel, inputs = numpy_pack, [source]
        else:
            kernel, inputs = build_pack(tensor, f"{name}_pack{k}")
        packs.append((kernel, [position[id(t.op)] for t in inputs]))
        given.append(s.as_input(tensor))
    read = {id(n.tensor.op) for st in s.stages for n in walk(st.body) if isinstance(n, TensorLoad)}
    outputs = {id(t.op) for t in s.outputs}
    kept = [i for i, a in enumerate(args)
            if not isinstance(a, Tensor) or id(a.op) in outputs or id(a.op) in read]
    inputs = [i for i in kept if not (isinstance(args[i], Tensor) and id(args[i].op) in outputs)]
    outs = [i for i in kept if i not in inputs]
    main_params = [args[i] for i in inputs] + given + [args[i] for i in outs]
    main_args = [("arg", i) for i in inputs] + [("packed", k) for k in range(len(packs))] + [("arg", i) for i in outs]
    return PrepackedKernel(build(s, main_params, name=name, target=target), main_args, packs, len(args))


def _plain_pack(tensor: Tensor, name: str, target):
    """A pack stage's loop nest as it is, unscheduled: (kernel, its input placeholders)."""
    inputs = [op.output(0) for op in post_order([tensor]) if isinstance(op, PlaceholderOp)]
    return build(create_schedule(tensor), inputs + [tensor], name=name, target=target), inputs

