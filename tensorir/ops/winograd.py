"""Winograd's minimal filtering F(m x m, 3 x 3): a 3x3 convolution computed per tile of
``m x m`` output pixels with fewer multiplications per input and output channel pair than
the direct ``9 m^2``: ``(m + 2)^2`` at stride 1 (4x fewer for m = 4, 2.25x for m = 2), and
``(2m + 1)^2`` at stride 2 (1.78x fewer for m = 4, 1.44x for m = 2).

With a tile's ``patch x patch`` input patch ``d`` (rows ``stride * m * ty ..``, columns
``stride * m * tx ..`` of the padded input) and a filter ``g``:

    V = B^T d B    (per input channel)       U = G g G^T    (per channel pair, once per weights)
    M[xi, nu] = sum over input channels of V[xi, nu] * U[xi, nu]   (alpha^2 matrix products)
    y = A^T M A    (per output channel)

At stride 1 the transforms are Toom-Cook's for F(m, 3) at small integer points; alpha and the
patch are m + 2. At stride 2, the filter's even taps (0 and 2) see only the even inputs and
its odd tap only the odd ones: an F(m, 2) over the m + 1 even inputs plus m single products
of the odd ones, alpha = 2m + 1 products from a patch of 2m + 1 inputs, one axis at a time.

The matrix products carry the work; the transforms are a few additions per element. Each
stage here is a compute over channels-last data (the channels innermost, so every stage
vectorizes along them), with the two-sided transforms split into two one-sided stages.

Rounding differs from the direct sum: the transforms' constants grow with m (up to 8 and
1/24 for m = 4 at stride 1), so errors are a few times larger than the direct convolution's.

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> p = placeholder((1, 16, 16, 8), name="p"); w = placeholder((3, 3, 8, 4), name="w")
    >>> v = input_tiles(p, 4); u = filter_tiles(w, "XIO", 4, 16)
    >>> prod = tile_products(v, u, 4)
    >>> v.shape, u.shape, prod.shape
    ((6, 6, 16, 8), (6, 6, 1, 8, 16), (6, 6, 16, 4))
    >>> input_tiles(p, 2, stride=2).shape          # 7 x 7 outputs of the 16 x 16 padded input
    (5, 5, 16, 8)
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .. import intrinsics as ti
from ..expr import Expr, as_expr
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from ._common import emin
from .window import _out_size

TILE_SIZES = (2, 3, 4)
"""The output tile sizes m with transforms here."""

STRIDES = (1, 2)
"""The convolution strides with transforms here."""

_INFINITY = None
_POINTS = {2: (0, 1, -1, _INFINITY), 3: (0, 1, -1, 2, _INFINITY), 4: (0, 1, -1, 2, -2, _INFINITY)}
"""m -> the interpolation points of F(m, 3): small integers keep the transforms' constants small."""

_EVEN_POINTS = {2: (0, 1, _INFINITY), 3: (0, 1, -1, _INFINITY), 4: (0, 1, -1, 2, _INFINITY)}
"""m -> the points of F(m, 2), the even taps of a stride-2 convolution."""


def _vandermonde(points, columns: int) -> list:
    """Rows (1, a, a^2, ...) of each point a; the point at infinity takes the leading term."""
    return [[Fraction(int(c == columns - 1)) for c in range(columns)] if a is _INFINITY
            else [Fraction(a) ** c for c in range(columns)] for a in points]


def _inverse(matrix: list) -> list:
    """The exact inverse of a square matrix of Fractions (Gauss-Jordan)."""
    n = len(matrix)
    rows = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(matrix)]
    for c in range(n):
        pivot = next(r for r in range(c, n) if rows[r][c] != 0)
        rows[c], rows[pivot] = rows[pivot], rows[c]
        rows[c] = [v / rows[c][c] for v in rows[c]]
        for r in range(n):
            if r != c and rows[r][c] != 0:
                rows[r] = [v - rows[r][c] * p for v, p in zip(rows[r], rows[c])]
    return [row[n:] for row in rows]


def _toom_cook(m: int, r: int, points) -> tuple:
    """(A^T, G, B^T) of the correlation F(m, r) from ``m + r - 1`` points, as Fractions: the
    transpose of the polynomial product evaluated at the points and interpolated back. Each
    row of B^T is scaled to integers, its scale moved into G's row (computed once per weights)."""
    at = [list(column) for column in zip(*_vandermonde(points, m))]
    g = _vandermonde(points, r)
    bt = [list(column) for column in zip(*_inverse(_vandermonde(points, m + r - 1)))]
    for row in range(len(bt)):
        scale = math.lcm(*(v.denominator for v in bt[row]))
        bt[row] = [v * scale for v in bt[row]]
        g[row] = [v / scale for v in g[row]]
    return at, g, bt


def _strided(m: int) -> tuple:
    """(A^T, G, B^T) of a 3-tap, stride-2 correlation, m outputs from 2m + 1 inputs: the even
    taps (0 and 2) read the even inputs, an F(m, 2) of m + 1 products; the odd tap reads the
    odd inputs, m products of one multiplication each."""
    at_even, g_even, bt_even = _toom_cook(m, 2, _EVEN_POINTS[m])
    zero, one = Fraction(0), Fraction(1)
    at = [row + [one if k == i else zero for k in range(m)] for i, row in enumerate(at_even)]
    g = [[row[0], zero, row[1]] for row in g_even] + [[zero, one, zero] for _ in range(m)]
    bt = [[row[c // 2] if c % 2 == 0 else zero for c in range(2 * m + 1)] for row in bt_even]
    bt += [[one if c == 2 * k + 1 else zero for c in range(2 * m + 1)] for k in range(m)]
    return at, g, bt


@functools.lru_cache(maxsize=None)
def _matrices(m: int, stride: int) -> tuple:
    if m not in TILE_SIZES or stride not in STRIDES:
        raise ValueError(f"Winograd tiles: m must be one of {TILE_SIZES} and the stride one of {STRIDES}, "
                         f"got m={m!r}, stride={stride!r}")
    return _toom_cook(m, 3, _POINTS[m]) if stride == 1 else _strided(m)


def transform_matrices(m: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m x m, 3 x 3) at ``stride`` as float64 arrays: A^T is m x alpha, G
    alpha x 3, B^T alpha x patch (alpha = patch = m + 2 at stride 1, 2m + 1 at stride 2).

    Example:
        >>> at, g, bt = transform_matrices(2)
        >>> at.shape, g.shape, bt.shape
        ((2, 4), (4, 3), (4, 4))
        >>> transform_matrices(4, stride=2)[2].shape
        (9, 9)
    """
    return tuple(np.array([[float(v) for v in row] for row in rows]) for rows in _matrices(m, stride))


def tile_grid(height: int, width: int, m: int) -> tuple[int, int]:
    """(tile rows, tile columns) covering a ``height x width`` output with ``m x m`` tiles.

    Example:
        >>> tile_grid(14, 14, 4)
        (4, 4)
    """
    return -(-height // m), -(-width // m)


def _pick(index, values: list) -> Expr:
    """``values[index]`` for an index expression: a chain of selects, which folds to one
    value where ``index`` is a constant (an unrolled loop)."""
    result = as_expr(values[-1])
    for k in range(len(values) - 2, -1, -1):
        result = ti.if_then_else(index == k, values[k], result)
    return result


def _combination(coefficients, terms) -> Expr:
    """sum(c * t) over the nonzero coefficients (a zero one reads nothing: no 0 * inf)."""
    total = None
    for c, t in zip(coefficients, terms):
        if c == 0:
            continue
        term = t() if c == 1 else (-t() if c == -1 else t() * float(c))
        total = term if total is None else total + term
    return total if total is not None else as_expr(0.0)


def output_size(padded: int, stride: int) -> int:
    """The output extent of a 3-tap convolution at ``stride`` along an axis of ``padded`` inputs.

    Example:
        >>> output_size(58, 2), output_size(16, 1)
        (28, 14)
    """
    return _out_size("Winograd tiles", padded, 3, stride, 1, 0, 0)


def input_tiles(padded: Tensor, m: int, name: str = "winograd_input", stride: int = 1) -> Tensor:
    """``V[xi, nu, t, c]`` = (B^T d B)[xi, nu] of tile ``t`` (row-major over the batch and the
    tile grid) of the padded NXC input ``padded`` (N, H + 2, W + 2, C) of a convolution at
    ``stride``, channel ``c``. Reads past the input's end (a last partial tile) are clamped
    into it: they reach only output pixels past the end, which are never stored. Two stages:
    rows, then columns.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> input_tiles(placeholder((2, 9, 9, 3), name="p"), 2).shape
        (4, 4, 32, 3)
    """
    bt = transform_matrices(m, stride)[2]
    alpha, patch = bt.shape
    step = stride * m
    n, hp, wp, c = padded.shape
    th, tw = tile_grid(output_size(hp, stride), output_size(wp, stride), m)

    def at(t, i, j):
        row, col = (t // tw) % th * step + i, t % tw * step + j
        row = row if (th - 1) * step + patch <= hp else emin(row, hp - 1)
        col = col if (tw - 1) * step + patch <= wp else emin(col, wp - 1)
        return t // (th * tw), row, col

    def rows(xi, t, j, ch):          # (B^T d)[xi, j]
        def load(i):
            return lambda: padded[(*at(t, i, j), ch)]
        return _pick(xi, [_combination(bt[k], [load(i) for i in range(patch)]) for k in range(alpha)])
    half = compute((alpha, n * th * tw, patch, c), rows, name=name + "_rows", tag="winograd")

    def cols(xi, nu, t, ch):         # (B^T d B)[xi, nu]
        return _pick(nu, [_combination(bt[k], [lambda j=j: half[xi, t, j, ch] for j in range(patch)])
                          for k in range(alpha)])
    return compute((alpha, alpha, n * th * tw, c), cols, name=name, tag="winograd")


def filter_tiles_shape(weights_shape, weights_format: str, m: int, block: int, stride: int = 1) -> tuple:
    """The shape of ``filter_tiles`` of weights ``weights_shape`` ("XIO" ``(3, 3, C, O)`` or
    "OIX" ``(O, C, 3, 3)``): ``(alpha, alpha, ceil(O / block), C, block)``.

    Example:
        >>> filter_tiles_shape((5, 3, 3, 3), "OIX", 2, 4), filter_tiles_shape((5, 3, 3, 3), "OIX", 2, 4, stride=2)
        ((4, 4, 2, 3, 4), (5, 5, 2, 3, 4))
    """
    c, o = (weights_shape[2], weights_shape[3]) if weights_format == "XIO" else (weights_shape[1], weights_shape[0])
    alpha = transform_matrices(m, stride)[1].shape[0]
    return alpha, alpha, -(-o // block), c, block


def filter_tiles(weights: Tensor, weights_format: str, m: int, block: int, name: str = "winograd_filter",
                 stride: int = 1) -> Tensor:
    """``U[xi, nu, ob, c, ol]`` = (G g G^T)[xi, nu] of the 3x3 filter from input channel ``c``
    to output channel ``ob * block + ol`` (zero past the last one): the output channels cut
    into ``block``-wide panels, as the products read them. ``weights`` are ``(3, 3, C, O)``
    ("XIO") or ``(O, C, 3, 3)`` ("OIX"), of a convolution at ``stride``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> filter_tiles(placeholder((5, 3, 3, 3), name="w"), "OIX", 2, 4).shape
        (4, 4, 2, 3, 4)
    """
    g = transform_matrices(m, stride)[1]
    alpha = g.shape[0]
    o = weights.shape[3] if weights_format == "XIO" else weights.shape[0]

    def tap(k, l, ch, out):
        return weights[(k, l, ch, out) if weights_format == "XIO" else (out, ch, k, l)]

    def body(xi, nu, ob, ch, ol):
        out = ob * block + ol
        safe = out if o % block == 0 else emin(out, o - 1)
        value = _pick(xi, [_pick(nu, [_combination(np.outer(g[a], g[b]).ravel(),
                                                   [lambda k=k, l=l: tap(k, l, ch, safe) for k in range(3) for l in range(3)])
                                      for b in range(alpha)]) for a in range(alpha)])
        return value if o % block == 0 else ti.if_then_else(out < o, value, as_expr(0.0, weights.dtype))
    return compute(filter_tiles_shape(weights.shape, weights_format, m, block, stride), body, name=name,
                   tag="winograd")


def filter_tiles_numpy(weights: np.ndarray, weights_format: str, m: int, block: int, stride: int = 1) -> np.ndarray:
    """What ``filter_tiles`` computes, by numpy (in float64, then the weights' dtype).

    Example:
        >>> filter_tiles_numpy(np.ones((3, 3, 2, 5), "float32"), "XIO", 2, 4).shape
        (4, 4, 2, 2, 4)
    """
    g = transform_matrices(m, stride)[1]
    w = np.asarray(weights, np.float64)
    w = w if weights_format == "XIO" else w.transpose(2, 3, 1, 0)           # (3, 3, C, O)
    u = np.einsum("ak,bl,klco->abco", g, g, w)
    c, o = u.shape[2], u.shape[3]
    blocks = -(-o // block)
    panels = np.zeros((u.shape[0], u.shape[1], c, blocks * block))
    panels[..., :o] = u
    return np.ascontiguousarray(panels.reshape(u.shape[0], u.shape[1], c, blocks, block).transpose(0, 1, 3, 2, 4),
                                dtype=weights.dtype)


def tile_products(tiles: Tensor, filters: Tensor, out_channels: int, name: str = "winograd_product") -> Tensor:
    """``M[xi, nu, t, o]`` = sum over c of ``tiles[xi, nu, t, c] * filters[xi, nu, o // b, c, o % b]``:
    alpha^2 matrix products of (tiles x C) by (C x O).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> tile_products(placeholder((4, 4, 9, 3)), placeholder((4, 4, 1, 3, 8)), 5).shape
        (4, 4, 9, 5)
    """
    alpha, _, t, c = tiles.shape
    block = filters.shape[-1]

    def body(xi, nu, tile, o):
        r = reduce_axis((0, c), name="c")
        return rsum(tiles[xi, nu, tile, r] * filters[xi, nu, o // block, r, o % block], axis=r)
    return compute((alpha, alpha, t, out_channels), body, name=name, tag="winograd")


def output_rows(products: Tensor, m: int, name: str = "winograd_output_rows", stride: int = 1) -> Tensor:
    """``R[a, nu, t, o]`` = (A^T M)[a, nu]: the first half of the output transform of a
    convolution at ``stride``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> output_rows(placeholder((6, 6, 4, 8)), 4).shape
        (4, 6, 4, 8)
    """
    at = transform_matrices(m, stride)[0]
    alpha, _, t, o = products.shape
    if alpha != at.shape[1]:
        raise ValueError(f"Winograd output rows: products of {alpha} rows, but F({m}, 3) at stride {stride} "
                         f"has {at.shape[1]}")

    def body(a, nu, tile, ch):
        return _pick(a, [_combination(at[k], [lambda xi=xi: products[xi, nu, tile, ch] for xi in range(alpha)])
                         for k in range(m)])
    return compute((m, alpha, t, o), body, name=name, tag="winograd")


def output_pixel(rows: Tensor, m: int, tile_grid_shape: tuple, n, h, w, o, stride: int = 1) -> Expr:
    """The convolution's output at (n, h, w, o): (R A)[h % m, w % m] of its tile, the second
    half of the output transform, as an expression (the body of the output stage).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> from tilefuse.tensorir.expr import var
        >>> e = output_pixel(placeholder((2, 4, 1, 8)), 2, (1, 1), *[var(v) for v in "nhwo"])
    """
    at = transform_matrices(m, stride)[0]
    th, tw = tile_grid_shape
    tile = (n * th + h // m) * tw + w // m
    a, b = h % m, w % m
    total = None
    for nu in range(at.shape[1]):
        coefficient = _pick(b, [float(at[k][nu]) for k in range(m)])
        term = rows[a, nu, tile, o] * coefficient
        total = term if total is None else total + term
    return total
