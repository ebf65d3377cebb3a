"""Prepacking: stages that read only constant inputs (weights) are cut out of a schedule and
built as kernels of their own, so a caller runs them once per weight array instead of on
every call of the main kernel (the complex template's packed weight panels, a transposed
weight).

Example:
    >>> import numpy as np
    >>> from tensorir import placeholder, compute, reduce_axis, sum
    >>> from schedule import create_schedule
    >>> A = placeholder((8, 32), name="A"); W = placeholder((32, 40), name="W")
    >>> r = reduce_axis((0, 32), name="r")
    >>> C = compute((8, 40), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
    >>> s = create_schedule(C); _ = s.pack(W, axis=1, block=16)
    >>> built = build_prepacked(s, [A, W, C], constants=[W])
    >>> [t.name for t in built.args], [[t.name for t in p.args] for p in built.packs]
    (['A', 'W.packed', 'C'], [['W', 'W.packed']])
    >>> a, w = np.ones((8, 32), "float32"), np.ones((32, 40), "float32")
    >>> c = np.zeros((8, 40), "float32"); wp = built.packs[0].allocate()
    >>> built.packs[0].kernel(w, wp); built.kernel(a, wp, c); float(c[0, 0])
    32.0
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorir.expr import TensorLoad
from tensorir.runtime.kernel import Kernel
from tensorir.tensor import PlaceholderOp, Tensor, post_order
from tensorir.visit import walk

from .build import build
from .schedule import Schedule


@dataclass(frozen=True)
class Pack:
    """A kernel computing one cut-out tensor from constant inputs: ``kernel(*inputs, out)``
    with arrays for ``args`` (the constant placeholders, then the packed tensor)."""
    kernel: Kernel
    args: tuple

    def allocate(self) -> np.ndarray:
        """A fresh array for the packed tensor.

        Example:
            >>> # out = pack.allocate(); pack.kernel(*weights, out)
        """
        out = self.args[-1]
        return np.empty(out.shape, dtype=out.dtype)


@dataclass(frozen=True)
class Prepacked:
    """The main kernel, its arguments (inputs still read, the packed tensors, the outputs),
    the packed tensors as the main kernel's placeholders and the packs computing them (in the
    same order)."""
    kernel: Kernel
    args: tuple
    packed: tuple
    packs: tuple


def hoistable(s: Schedule, constants) -> list[Tensor]:
    """The tensors of root stages (not outputs) that read, through any stages, only the
    ``constants`` placeholders.

    Example:
        >>> from tensorir import placeholder, compute
        >>> from schedule import create_schedule
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


def build_prepacked(s: Schedule, args: list, constants, name: str = "main") -> Prepacked:
    """Build ``s`` with every ``hoistable`` stage cut out (``Schedule.as_input``) and built
    as a ``Pack`` of its own (default injective schedule). ``args`` are the kernel arguments
    ``build`` would take; the main kernel's arguments are those inputs it still reads, the
    packed tensors and the outputs, in that order. The schedule ``s`` is changed.

    Example:
        >>> # built = build_prepacked(template.apply(cfg), template.args, constants=[W])
    """
    from .templates import template_for
    packs, given = [], []
    for k, tensor in enumerate(hoistable(s, constants)):
        template = template_for(tensor)
        packs.append(Pack(template.build(template.default_config(), name=f"{name}_pack{k}"),
                          tuple(template.args)))
        given.append(s.as_input(tensor))
    read = {id(n.tensor.op) for st in s.stages for n in walk(st.body) if isinstance(n, TensorLoad)}
    outputs = {id(t.op) for t in s.outputs}
    inputs = [a for a in args if not isinstance(a, Tensor) or id(a.op) in outputs or id(a.op) in read]
    ins = [a for a in inputs if not (isinstance(a, Tensor) and id(a.op) in outputs)]
    outs = [a for a in inputs if isinstance(a, Tensor) and id(a.op) in outputs]
    main = ins + given + outs
    return Prepacked(build(s, main, name=name), tuple(main), tuple(given), tuple(packs))
