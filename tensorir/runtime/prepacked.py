"""Kernels whose constant-only stages run apart: ``PrepackedKernel`` packs the constant
inputs (weights) once per weight array and runs the main kernel on the packed copies.
``schedule.hoist.build_prepacked`` makes them.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import create_schedule
    >>> from tilefuse.schedule.hoist import build_prepacked
    >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
    >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
    >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
    >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
    >>> f, f.main_args                # main's parameters: A, the packed W2, C
    (PrepackedKernel(main, 1 packs), [('arg', 0), ('packed', 0), ('arg', 2)])
    >>> f.packs                       # main_pack0 computes W2 from argument 1, W
    [(Kernel(main_pack0(W: float32[4], W2: float32[4])), [1])]
    >>> c = np.zeros(4, "float32"); f(np.arange(4, dtype="float32"), np.ones(4, "float32"), c); c.tolist()
    [2.0, 3.0, 4.0, 5.0]
"""
from __future__ import annotations

import numpy as np

from .aligned import aligned_empty
from .kernel import ArgSpec, Kernel


class PrepackedKernel:
    """A kernel whose constant-only stages run apart: ``packs`` are (kernel, argument
    positions of its constant inputs) computing the packed tensors; ``main_args`` say, per
    parameter of ``main``, ("arg", i) for argument i of the call or ("packed", k) for the
    output of pack k. Called with the plain kernel's arguments; it packs on its first call,
    and again only when given other constant arrays (compared by identity: constants must not
    change in place).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, build
        >>> W = placeholder((4,), name="W"); W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")
        >>> A, P = placeholder((4,), name="A"), placeholder((4,), name="P")
        >>> C = compute((4,), lambda i: A[i] + P[i], name="C")
        >>> pack, main = build(create_schedule(W2), [W, W2], "pack"), build(create_schedule(C), [A, P, C])
        >>> f = PrepackedKernel(main, main_args=[("arg", 0), ("packed", 0), ("arg", 2)], packs=[(pack, [1])], n_args=3)
        >>> w, c = np.ones(4, "float32"), np.zeros(4, "float32")
        >>> f(np.arange(4, dtype="float32"), w, c); c.tolist()     # packs w, then runs main
        [2.0, 3.0, 4.0, 5.0]
        >>> w[:] = 5; f(np.arange(4, dtype="float32"), w, c); c.tolist()   # the same w array: not packed again
        [2.0, 3.0, 4.0, 5.0]
    """

    def __init__(self, main: Kernel, main_args, packs, n_args: int):
        self.main = main
        self.main_args = [(role, int(k)) for role, k in main_args]
        self.packs = [(kernel, [int(i) for i in positions]) for kernel, positions in packs]
        self.n_args = n_args
        self._constant_positions = sorted({i for _, positions in self.packs for i in positions})
        self._cached = None       # (the constant arrays packed, the packed arrays)

    def __call__(self, *arrays):
        if len(arrays) != self.n_args:
            raise TypeError(f"kernel {self.main.name} takes {self.n_args} arguments, got {len(arrays)}")
        constants = [arrays[i] for i in self._constant_positions]
        cached = self._cached
        if cached is None or any(a is not b for a, b in zip(cached[0], constants)):
            self._cached = cached = (constants, self.pack(arrays))
        packed = cached[1]
        return self.main(*[arrays[k] if role == "arg" else packed[k] for role, k in self.main_args])

    @property
    def constant_positions(self) -> list[int]:
        """The argument positions of the constant inputs the packs read.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
            >>> f.constant_positions          # W, argument 1
            [1]
        """
        return list(self._constant_positions)

    def pack(self, arrays, empty=aligned_empty) -> list[np.ndarray]:
        """The packed tensors, one per pack, computed from ``arrays`` (the call's arguments;
        only those at ``constant_positions`` are read, the others may be None) into arrays
        made by ``empty(shape, dtype)`` (each on a cache line; every element is written).
        Nothing is kept: a caller that holds the packed tensors calls ``main`` itself
        (``main_args`` say where they go).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
            >>> packed = f.pack([None, np.ones(4, "float32"), None]); packed[0].tolist()
            [2.0, 2.0, 2.0, 2.0]
            >>> c = np.zeros(4, "float32"); f.main(np.arange(4, dtype="float32"), packed[0], c); c.tolist()
            [2.0, 3.0, 4.0, 5.0]
        """
        packed = []
        for kernel, positions in self.packs:
            out = empty(kernel.args[-1].shape, kernel.args[-1].dtype)
            kernel(*[arrays[i] for i in positions], out)
            packed.append(out)
        return packed

    @property
    def in_place(self) -> list[tuple[int, int]]:
        """The main kernel's ``in_place`` pairs between arguments of the call (not packed ones).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
            >>> f.in_place         # C (argument 2) may be A (argument 0); W2 is packed, not an argument
            [(2, 0)]
        """
        roles = self.main_args
        return [(roles[w][1], roles[i][1]) for w, i in self.main.in_place
                if roles[w][0] == "arg" and roles[i][0] == "arg"]

    @property
    def name(self) -> str:
        return self.main.name

    @property
    def target(self):
        """The target its kernels were generated for (the main kernel's).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W], target="llvm -mcpu=haswell")
            >>> str(f.target), f.target == f.main.target
            ('llvm -mcpu=haswell', True)
        """
        return self.main.target

    @property
    def kernels(self) -> list[Kernel]:
        """The main kernel, then the pack kernels (not the ``PanelPack`` ones: no code).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
            >>> [k.name for k in f.kernels]
            ['main', 'main_pack0']
        """
        return [self.main] + [k for k, _ in self.packs if isinstance(k, Kernel)]

    def source(self, kind: str = "llvm") -> str:
        """The main kernel's source (see ``Kernel.source``).

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule
            >>> from tilefuse.schedule.hoist import build_prepacked
            >>> A = placeholder((4,), name="A"); W = placeholder((4,), name="W", constant=True)
            >>> W2 = compute((4,), lambda i: W[i] * 2.0, name="W2")     # reads only the constant W
            >>> C = compute((4,), lambda i: A[i] + W2[i], name="C")
            >>> f = build_prepacked(create_schedule(C), [A, W, C], constants=[W])
            >>> "define" in f.source("llvm"), "main:" in f.source("asm")
            (True, True)
        """
        return self.main.source(kind)

    def __repr__(self):
        return f"PrepackedKernel({self.main.name}, {len(self.packs)} packs)"


class PanelPack:
    """A pack that needs no compiled code: a constant's dimension ``axis`` cut into panels of
    ``block`` (zero past its end), the panels outermost and each panel's lanes innermost:
    ``packed[no, *rest, ni] = src[..., no * block + ni, ...]``, as ``Schedule.pack`` defines
    it. It runs once per weight array, so numpy's copy does it; called as a pack kernel is,
    with the source and the output array, whose shape and dtype ``args`` give.

    Example:
        >>> p = PanelPack((3, 5), "float32", axis=1, block=4)
        >>> out = np.empty(p.args[-1].shape, "float32")
        >>> p(np.arange(15, dtype="float32").reshape(3, 5), out); out[1].tolist()
        [[4.0, 0.0, 0.0, 0.0], [9.0, 0.0, 0.0, 0.0], [14.0, 0.0, 0.0, 0.0]]
    """

    name = "panels"

    def __init__(self, shape, dtype: str, axis: int, block: int):
        self.shape, self.dtype, self.axis, self.block = tuple(int(n) for n in shape), str(dtype), int(axis), int(block)
        rest = self.shape[:self.axis] + self.shape[self.axis + 1:]
        packed = (-(-self.shape[self.axis] // self.block),) + rest + (self.block,)
        self.args = [ArgSpec("src", self.dtype, self.shape), ArgSpec("packed", self.dtype, packed, written=True)]

    def __call__(self, src: np.ndarray, out: np.ndarray) -> None:
        axis, block, n = self.axis, self.block, self.shape[self.axis]
        if src.shape != self.shape or out.shape != self.args[1].shape:
            raise ValueError(f"panel pack of {self.shape} into {self.args[1].shape}: got {src.shape} and {out.shape}")
        full = n // block
        cut = (slice(None),) * axis
        whole = src[cut + (slice(0, full * block),)].reshape(self.shape[:axis] + (full, block) + self.shape[axis + 1:])
        out[:full] = np.moveaxis(whole, (axis, axis + 1), (0, whole.ndim - 1))
        if full * block < n:        # the last panel: what is left, then zeros
            out[full] = 0
            out[full, ..., :n - full * block] = np.moveaxis(src[cut + (slice(full * block, n),)], axis, -1)

    def recipe(self) -> dict:
        """What rebuilds it (JSON): ``PanelPack(**recipe)``.

        Example:
            >>> PanelPack((2, 3), "float32", 0, 2).recipe()
            {'shape': [2, 3], 'dtype': 'float32', 'axis': 0, 'block': 2}
        """
        return {"shape": list(self.shape), "dtype": self.dtype, "axis": self.axis, "block": self.block}

    def __repr__(self):
        return f"PanelPack({self.shape}, axis={self.axis}, block={self.block})"


class WinogradFilters:
    """A pack that needs no compiled code: 3x3 filters in Winograd's transformed domain,
    ``tensorir.ops.winograd.filter_tiles`` (``(alpha, alpha, O / block, C, block)``, output
    channels in ``block``-wide panels) of weights ``shape`` in ``weights_format`` ("XIO" or
    "OIX") of a convolution at ``stride``, computed by numpy once per weight array; called as a
    pack kernel is, with the weights and the output array.

    Example:
        >>> p = WinogradFilters((3, 3, 2, 5), "float32", "XIO", 2, 4)
        >>> out = np.empty(p.args[-1].shape, "float32"); p(np.ones((3, 3, 2, 5), "float32"), out)
        >>> out.shape, float(out[0, 0, 0, 0, 0])
        ((4, 4, 2, 2, 4), 1.0)
    """

    name = "winograd_filters"

    def __init__(self, shape, dtype: str, weights_format: str, m: int, block: int, stride: int = 1):
        from ..ops.winograd import STRIDES, TILE_SIZES, filter_tiles_shape
        self.shape, self.dtype = tuple(int(n) for n in shape), str(dtype)
        self.weights_format, self.m, self.block, self.stride = str(weights_format), int(m), int(block), int(stride)
        if len(self.shape) != 4 or self.weights_format not in ("XIO", "OIX") or self.m not in TILE_SIZES \
                or self.block < 1 or self.stride not in STRIDES:
            raise ValueError(f"Winograd filters of {self.shape} ({self.weights_format}), m={self.m}, "
                             f"block={self.block}, stride={self.stride}: not a 4-D XIO or OIX filter, a tile size "
                             f"in {TILE_SIZES}, a block >= 1 and a stride in {STRIDES}")
        packed = filter_tiles_shape(self.shape, self.weights_format, self.m, self.block, self.stride)
        self.args = [ArgSpec("src", self.dtype, self.shape), ArgSpec("packed", self.dtype, packed, written=True)]

    def __call__(self, src: np.ndarray, out: np.ndarray) -> None:
        from ..ops.winograd import filter_tiles_numpy
        if src.shape != self.shape or out.shape != self.args[1].shape:
            raise ValueError(f"Winograd filters of {self.shape} into {self.args[1].shape}: got {src.shape} and "
                             f"{out.shape}")
        out[...] = filter_tiles_numpy(src, self.weights_format, self.m, self.block, self.stride)

    def recipe(self) -> dict:
        """What rebuilds it (JSON): ``WinogradFilters(**recipe)``.

        Example:
            >>> WinogradFilters((3, 3, 2, 5), "float32", "XIO", 2, 4).recipe()["m"]
            2
        """
        return {"shape": list(self.shape), "dtype": self.dtype, "weights_format": self.weights_format,
                "m": self.m, "block": self.block, "stride": self.stride}

    def __repr__(self):
        return (f"WinogradFilters({self.shape}, {self.weights_format}, m={self.m}, block={self.block}, "
                f"stride={self.stride})")


NUMPY_PACKS = {PanelPack.name: PanelPack, WinogradFilters.name: WinogradFilters}
"""The packs numpy computes, by ``name``: an artifact names them so, with their recipe."""
