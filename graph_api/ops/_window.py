"""Window attributes (convolution and pooling): the one place where oneDNN's per-spatial-dim
defaults are trimmed and ``auto_pad`` is resolved to explicit pads.

After ``normalize_window`` an op's ``strides``, ``dilations``, ``pads_begin`` and
``pads_end`` hold one int per spatial dim and ``auto_pad`` is ``"None"``; every consumer (the
shape rule, the reference, the lowering) reads those numbers.

Example:
    >>> same_pads("SAME_UPPER", [7], [3], [2], [1])
    ([1], [1])
    >>> spatial([1] * 12, 2, 1)
    [1, 1]
"""
from __future__ import annotations

from .registry import RuleError

_SPATIAL_ATTRS = (("strides", 1), ("dilations", 1), ("pads_begin", 0), ("pads_end", 0), ("output_padding", 0))


def spatial(values, n: int, default: int) -> list:
    """A per-spatial-dim attribute as ``n`` values: empty or absent means the default; oneDNN's
    schema defaults and dumps hold 12 values (its maximum rank), so a longer list whose tail is
    the default is cut. Any other length is kept (and then refused by ``normalize_window``).

    Example:
        >>> spatial(None, 2, 0), spatial([2, 2, 1, 1], 2, 1), spatial([2, 2, 3], 2, 1)
        ([0, 0], [2, 2], [2, 2, 3])
    """
    if not values:
        return [default] * n
    values = [int(v) for v in values]
    return values[:n] if len(values) > n and all(v == default for v in values[n:]) else values


def same_pads(auto_pad: str, in_sizes, kernel, strides, dilations, deconv: bool = False):
    """(pads_begin, pads_end) for ``auto_pad`` (any letter case), oneDNN's rules:

    * ``VALID``: no padding; ``None``: None (the explicit pads hold);
    * ``SAME_UPPER``/``SAME_LOWER`` of a convolution or pooling: pad so that
      ``out = ceil(in / stride)`` with the dilated kernel, the odd element at the end (upper) or
      the begin (lower);
    * of a ConvTranspose (``deconv``): ``kernel - stride`` in all (negative: a crop), split with
      C's division; dilations must be 1.

    Example:
        >>> same_pads("same_lower", [4], [4], [1], [1]), same_pads("SAME_UPPER", [4], [3], [2], [1], deconv=True)
        (([2], [1]), ([0], [1]))
    """
    mode = str(auto_pad).upper()
    n = len(in_sizes)
    if mode == "NONE":
        return None
    if mode == "VALID":
        return [0] * n, [0] * n
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise RuleError(f"auto_pad {auto_pad!r} is not one of None, SAME_UPPER, SAME_LOWER, VALID")
    lower = mode == "SAME_LOWER"
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        if deconv:
            if d != 1:
                raise RuleError(f"auto_pad {auto_pad} needs dilations of 1, got {list(dilations)}")
            total = k - s
            head = int((total + lower) / 2)          # C's division: toward zero
        else:
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            head = (total + 1) // 2 if lower else total // 2
        begin.append(head)
        end.append(total - head)
    return begin, end


def spatial_sizes(shape, data_format: str) -> list:
    """The spatial dims of a data tensor of ``shape`` in ``NCX`` or ``NXC``.

    Example:
        >>> spatial_sizes((1, 5, 6, 3), "NXC")
        [5, 6]
    """
    return list(shape[2:]) if data_format == "NCX" else list(shape[1:-1])


def weights_spatial(shape, weights_format: str) -> list:
    """The kernel's spatial dims of a weights tensor of ``shape`` (OIX, IOX: last; XIO, XOI: first).

    Example:
        >>> weights_spatial((3, 3, 8, 16), "XIO")
        [3, 3]
    """
    return list(shape[2:]) if weights_format in ("OIX", "IOX") else list(shape[:-2])


def normalize_window(attrs: dict, src_shape, kernel, deconv: bool = False) -> dict:
    """``attrs`` (defaults already filled in) with the per-spatial-dim attributes trimmed to the
    src's spatial rank and ``auto_pad`` resolved into ``pads_begin``/``pads_end`` (an absent
    ``dilations`` counts as ones and stays absent). Without a known src rank,
    kernel or strides the attributes are returned as they are (the rules refuse them later).

    Example:
        >>> a = {"strides": [2, 2], "pads_begin": [], "pads_end": [], "auto_pad": "SAME_UPPER",
        ...      "data_format": "NCX", "dilations": [1] * 12}
        >>> b = normalize_window(a, (1, 3, 7, 8), [3, 3])
        >>> b["pads_begin"], b["pads_end"], b["dilations"], b["auto_pad"]
        ([1, 0], [1, 1], [1, 1], 'None')
    """
    if src_shape is None or kernel is None or "strides" not in attrs or len(src_shape) < 3:
        return attrs
    sizes = spatial_sizes(src_shape, attrs.get("data_format", "NXC"))
    n = len(sizes)
    out = dict(attrs)
    for name, default in _SPATIAL_ATTRS:
        if name in out or name in ("pads_begin", "pads_end"):
            out[name] = spatial(out.get(name), n, default)
            if len(out[name]) != n:
                raise RuleError(f"attribute '{name}' {out[name]} must have {n} entries, one per spatial dim")
    if len(kernel) != n:
        raise RuleError(f"kernel {list(kernel)} needs {n} values, one per spatial dim")
    dilations = out.get("dilations", [1] * n)
    if any(s <= 0 for s in out["strides"]) or any(d <= 0 for d in dilations):
        raise RuleError(f"strides {out['strides']} and dilations {dilations} must be positive")
    pads = same_pads(out.get("auto_pad", "None"), sizes, kernel, out["strides"], dilations, deconv)
    if pads is not None:
        out["pads_begin"], out["pads_end"] = pads
    out["auto_pad"] = "None"
    return out


def check_pads(op):
    """Schema rule: pads_begin and pads_end of equal length.

    Example:
        >>> check_pads(type("O", (), {"attrs": {"pads_begin": [1], "pads_end": [1, 1]}})())
        'pads_begin [1] and pads_end [1, 1] differ in length'
    """
    pb, pe = op.attrs.get("pads_begin"), op.attrs.get("pads_end")
    if pb is not None and pe is not None and len(pb) != len(pe):
        return f"pads_begin {list(pb)} and pads_end {list(pe)} differ in length"
    return None


def windows(attrs: dict, n: int) -> list:
    """(stride, dilation, pad_begin, pad_end) per spatial dim from normalized attributes;
    RuleError when one is missing, of the wrong length, or a stride or dilation is not
    positive.

    Example:
        >>> windows({"strides": [2], "pads_begin": [1], "pads_end": [0]}, 1)
        [(2, 1, 1, 0)]
    """
    for name in ("strides", "pads_begin", "pads_end"):
        if attrs.get(name) is None:
            raise RuleError(f"missing required attribute {name!r}")
    lists = [list(attrs["strides"]), list(attrs.get("dilations") or [1] * n), list(attrs["pads_begin"]) or [0] * n,
             list(attrs["pads_end"]) or [0] * n]
    for name, v in zip(("strides", "dilations", "pads_begin", "pads_end"), lists):
        if len(v) != n:
            raise RuleError(f"attribute '{name}' {v} must have {n} entries, one per spatial dim")
    if any(s <= 0 for s in lists[0]) or any(d <= 0 for d in lists[1]):
        raise RuleError(f"strides {lists[0]} and dilations {lists[1]} must be positive")
    return list(zip(*lists))
