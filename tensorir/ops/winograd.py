"""Winograd's minimal filtering F(m x m, 3 x 3): a 3x3, stride-1 convolution computed per tile
of ``m x m`` output pixels with ``(m + 2)^2`` multiplications per input and output channel
pair instead of ``9 m^2`` (4x fewer for m = 4, 2.25x for m = 2).

With ``alpha = m + 2``, a tile's ``alpha x alpha`` input patch ``d`` (rows ``m * ty ..``,
columns ``m * tx ..`` of the padded input) and a filter ``g``:

    V = B^T d B    (per input channel)       U = G g G^T    (per channel pair, once per weights)
    M[xi, nu] = sum over input channels of V[xi, nu] * U[xi, nu]   (alpha^2 matrix products)
    y = A^T M A    (per output channel)

The matrix products carry the work; the transforms are a few additions per element. Each
stage here is a compute over channels-last data (the channels innermost, so every stage
vectorizes along them), with the two-sided transforms split into two one-sided stages.

Rounding differs from the direct sum: the transforms' constants grow with m (up to 8 and
1/24 for m = 4), so errors are a few times larger than the direct convolution's.

Example:
    >>> from tensorir import placeholder
    >>> p = placeholder((1, 16, 16, 8), name="p"); w = placeholder((3, 3, 8, 4), name="w")
    >>> v = input_tiles(p, 4); u = filter_tiles(w, "XIO", 4, 16)
    >>> prod = tile_products(v, u, 4)
    >>> v.shape, u.shape, prod.shape
    ((6, 6, 16, 8), (6, 6, 1, 8, 16), (6, 6, 16, 4))
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import intrinsics as ti
from ..expr import Expr, as_expr
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from ._common import emin

TILE_SIZES = (2, 4)
"""The output tile sizes m with transforms here."""

_F = Fraction
_MATRICES = {     # m -> (A^T: m x alpha, G: alpha x 3, B^T: alpha x alpha), interpolation points 0, +-1, +-2, inf
    2: ([[1, 1, 1, 0], [0, 1, -1, -1]],
        [[1, 0, 0], [_F(1, 2), _F(1, 2), _F(1, 2)], [_F(1, 2), _F(-1, 2), _F(1, 2)], [0, 0, 1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
    4: ([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [[_F(1, 4), 0, 0], [_F(-1, 6), _F(-1, 6), _F(-1, 6)], [_F(-1, 6), _F(1, 6), _F(-1, 6)],
         [_F(1, 24), _F(1, 12), _F(1, 6)], [_F(1, 24), _F(-1, 12), _F(1, 6)], [0, 0, 1]],
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
}


def transform_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m x m, 3 x 3) as float64 arrays.

    Example:
        >>> at, g, bt = transform_matrices(2)
        >>> at.shape, g.shape, bt.shape
        ((2, 4), (4, 3), (4, 4))
    """
    if m not in _MATRICES:
        raise ValueError(f"Winograd tiles: m must be one of {TILE_SIZES}, got {m!r}")
    return tuple(np.array([[float(v) for v in row] for row in rows]) for rows in _MATRICES[m])


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


def input_tiles(padded: Tensor, m: int, name: str = "winograd_input") -> Tensor:
    """``V[xi, nu, t, c]`` = (B^T d B)[xi, nu] of tile ``t`` (row-major over the batch and the
    tile grid) of the padded NXC input ``padded`` (N, H + 2, W + 2, C), channel ``c``. Reads
    past the input's end (a last partial tile) are clamped into it: they reach only output
    pixels past the end, which are never stored. Two stages: rows, then columns.

    Example:
        >>> from tensorir import placeholder
        >>> input_tiles(placeholder((2, 9, 9, 3), name="p"), 2).shape
        (4, 4, 32, 3)
    """
    bt = transform_matrices(m)[2]
    alpha = m + 2
    n, hp, wp, c = padded.shape
    th, tw = tile_grid(hp - 2, wp - 2, m)

    def at(t, i, j):
        row, col = (t // tw) % th * m + i, t % tw * m + j
        row = row if th * m + 2 <= hp else emin(row, hp - 1)
        col = col if tw * m + 2 <= wp else emin(col, wp - 1)
        return t // (th * tw), row, col

    def rows(xi, t, j, ch):          # (B^T d)[xi, j]
        def load(i):
            return lambda: padded[(*at(t, i, j), ch)]
        return _pick(xi, [_combination(bt[k], [load(i) for i in range(alpha)]) for k in range(alpha)])
    half = compute((alpha, n * th * tw, alpha, c), rows, name=name + "_rows", tag="winograd")

    def cols(xi, nu, t, ch):         # (B^T d B)[xi, nu]
        return _pick(nu, [_combination(bt[k], [lambda j=j: half[xi, t, j, ch] for j in range(alpha)])
                          for k in range(alpha)])
    return compute((alpha, alpha, n * th * tw, c), cols, name=name, tag="winograd")


def filter_tiles_shape(weights_shape, weights_format: str, m: int, block: int) -> tuple:
    """The shape of ``filter_tiles`` of weights ``weights_shape`` ("XIO" ``(3, 3, C, O)`` or
    "OIX" ``(O, C, 3, 3)``): ``(alpha, alpha, ceil(O / block), C, block)``.

    Example:
        >>> filter_tiles_shape((5, 3, 3, 3), "OIX", 2, 4)
        (4, 4, 2, 3, 4)
    """
    c, o = (weights_shape[2], weights_shape[3]) if weights_format == "XIO" else (weights_shape[1], weights_shape[0])
    return m + 2, m + 2, -(-o // block), c, block


def filter_tiles(weights: Tensor, weights_format: str, m: int, block: int, name: str = "winograd_filter") -> Tensor:
    """``U[xi, nu, ob, c, ol]`` = (G g G^T)[xi, nu] of the 3x3 filter from input channel ``c``
    to output channel ``ob * block + ol`` (zero past the last one): the output channels cut
    into ``block``-wide panels, as the products read them. ``weights`` are ``(3, 3, C, O)``
    ("XIO") or ``(O, C, 3, 3)`` ("OIX").

    Example:
        >>> from tensorir import placeholder
        >>> filter_tiles(placeholder((5, 3, 3, 3), name="w"), "OIX", 2, 4).shape
        (4, 4, 2, 3, 4)
    """
    g = transform_matrices(m)[1]
    alpha = m + 2
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
    return compute(filter_tiles_shape(weights.shape, weights_format, m, block), body, name=name, tag="winograd")


def filter_tiles_numpy(weights: np.ndarray, weights_format: str, m: int, block: int) -> np.ndarray:
    """What ``filter_tiles`` computes, by numpy (in float64, then the weights' dtype).

    Example:
        >>> filter_tiles_numpy(np.ones((3, 3, 2, 5), "float32"), "XIO", 2, 4).shape
        (4, 4, 2, 2, 4)
    """
    g = transform_matrices(m)[1]
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
        >>> from tensorir import placeholder
        >>> tile_products(placeholder((4, 4, 9, 3)), placeholder((4, 4, 1, 3, 8)), 5).shape
        (4, 4, 9, 5)
    """
    alpha, _, t, c = tiles.shape
    block = filters.shape[-1]

    def body(xi, nu, tile, o):
        r = reduce_axis((0, c), name="c")
        return rsum(tiles[xi, nu, tile, r] * filters[xi, nu, o // block, r, o % block], axis=r)
    return compute((alpha, alpha, t, out_channels), body, name=name, tag="winograd")


def output_rows(products: Tensor, m: int, name: str = "winograd_output_rows") -> Tensor:
    """``R[a, nu, t, o]`` = (A^T M)[a, nu]: the first half of the output transform.

    Example:
        >>> from tensorir import placeholder
        >>> output_rows(placeholder((6, 6, 4, 8)), 4).shape
        (4, 6, 4, 8)
    """
    at = transform_matrices(m)[0]
    alpha, _, t, o = products.shape

    def body(a, nu, tile, ch):
        return _pick(a, [_combination(at[k], [lambda xi=xi: products[xi, nu, tile, ch] for xi in range(alpha)])
                         for k in range(m)])
    return compute((m, alpha, t, o), body, name=name, tag="winograd")


def output_pixel(rows: Tensor, m: int, tile_grid_shape: tuple, n, h, w, o) -> Expr:
    """The convolution's output at (n, h, w, o): (R A)[h % m, w % m] of its tile, the second
    half of the output transform, as an expression (the body of the output stage).

    Example:
        >>> from tensorir import placeholder
        >>> from tensorir.expr import var
        >>> e = output_pixel(placeholder((2, 4, 1, 8)), 2, (1, 1), *[var(v) for v in "nhwo"])
    """
    at = transform_matrices(m)[0]
    th, tw = tile_grid_shape
    tile = (n * th + h // m) * tw + w // m
    a, b = h % m, w % m
    total = None
    for nu in range(m + 2):
        coefficient = _pick(b, [float(at[k][nu]) for k in range(m)])
        term = rows[a, nu, tile, o] * coefficient
        total = term if total is None else total + term
    return total
