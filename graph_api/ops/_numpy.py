"""Helpers the op families' reference implementations share: reading attributes, counting
inputs, errors that name the op, float64 arrays, layouts. Arithmetic is done in float64 and cast
once to each output's data type by the interpreter (``graph_api.reference``).

Example:
    >>> _to_ncx(np.zeros((1, 5, 6, 3)), "NXC").shape
    (1, 3, 5, 6)
"""
from __future__ import annotations

import numpy as np

from ..logical_tensor import DataType, GraphError
from ..op import Op
from ._window import windows

_REQUIRED = object()


def _err(op: Op, msg: str) -> GraphError:
    return GraphError(f"op {op.id} ({op.kind.value}): {msg}")


def _check_broadcasts_to(op, what: str, shape, target, target_name: str) -> None:
    """GraphError unless an operand of ``shape`` broadcasts to ``target`` one way."""
    try:
        ok = np.broadcast_shapes(target, shape) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise _err(op, f"{what} shape {shape} does not broadcast to {target_name} shape {tuple(target)}")


def _attr(op: Op, name: str, default=_REQUIRED):
    if name in op.attrs:
        return op.attrs[name]
    if default is _REQUIRED:
        raise _err(op, f"missing required attribute '{name}'")
    return default


def _int(op: Op, name: str, default=_REQUIRED) -> int:
    v = _attr(op, name, default)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _err(op, f"attribute '{name}' must be an int, got {v!r}")
    return int(v)


def _float(op: Op, name: str, default=_REQUIRED) -> float:
    v = _attr(op, name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _err(op, f"attribute '{name}' must be a number, got {v!r}")
    return float(v)


def _bool(op: Op, name: str, default=_REQUIRED) -> bool:
    v = _attr(op, name, default)
    if not isinstance(v, (bool, np.bool_)):
        raise _err(op, f"attribute '{name}' must be a bool, got {v!r}")
    return bool(v)


def _ints(op: Op, name: str, default=_REQUIRED) -> list[int]:
    v = _attr(op, name, default)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise _err(op, f"attribute '{name}' must be a list of ints, got {v!r}")
    v = list(v)
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in v):
        raise _err(op, f"attribute '{name}' must be a list of ints, got {v!r}")
    return [int(x) for x in v]


def _floats(op: Op, name: str, default=_REQUIRED) -> list[float]:
    v = _attr(op, name, default)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        raise _err(op, f"attribute '{name}' must be a list of numbers, got {v!r}")
    v = list(v)
    if any(isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) for x in v):
        raise _err(op, f"attribute '{name}' must be a list of numbers, got {v!r}")
    return [float(x) for x in v]


def _choice(op: Op, name: str, choices, default=_REQUIRED) -> str:
    v = _attr(op, name, default)
    if v not in choices:
        raise _err(op, f"attribute '{name}' is {v!r}; expected one of {list(choices)}")
    return v


def _nin(op: Op, xs: list, allowed) -> None:
    if len(xs) not in allowed:
        want = " or ".join(str(n) for n in sorted(allowed))
        raise _err(op, f"expects {want} inputs, got {len(xs)}")


def _nout(op: Op, allowed) -> None:
    if len(op.outputs) not in allowed:
        want = " or ".join(str(n) for n in sorted(allowed))
        raise _err(op, f"expects {want} outputs, got {len(op.outputs)}")


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _axis(op: Op, axis: int, ndim: int, what: str = "axis") -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise _err(op, f"{what} {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


def _data_format(op: Op) -> str:
    return _choice(op, "data_format", ("NXC", "NCX"))


def _channel_axis(op: Op, ndim: int, fmt: str) -> int:
    if ndim < 2:
        return ndim - 1 if ndim else 0
    return 1 if fmt == "NCX" else ndim - 1


def _broadcast(op: Op, a: np.ndarray, b: np.ndarray) -> tuple:
    mode = _choice(op, "auto_broadcast", ("numpy", "none"))
    if mode == "none":
        if a.shape != b.shape:
            raise _err(op, f"input shapes {a.shape} and {b.shape} differ and auto_broadcast is 'none'")
        return a.shape
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise _err(op, f"input shapes {a.shape} and {b.shape} do not broadcast") from None


def _vec_erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf     # scipy comes with xgboost; imported here, as it takes 0.7 s
    return erf(np.asarray(x, np.float64))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _to_ncx(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if fmt == "NXC" and x.ndim > 2 else x


def _from_ncx(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.moveaxis(x, 1, -1) if fmt == "NXC" and x.ndim > 2 else x


def _weights_to_oix(w: np.ndarray, fmt: str) -> np.ndarray:
    nd = w.ndim
    sp = tuple(range(nd - 2))
    return {"OIX": lambda: w,
            "XIO": lambda: np.transpose(w, (nd - 1, nd - 2) + sp),
            "XOI": lambda: np.transpose(w, (nd - 2, nd - 1) + sp),
            "IOX": lambda: np.transpose(w, (1, 0) + tuple(range(2, nd)))}[fmt]()


def _out_dtype(op: Op, i: int, fallback: np.dtype) -> np.dtype:
    t = op.outputs[i].dtype if i < len(op.outputs) else DataType.undef
    if t is DataType.undef:
        return fallback
    try:
        return t.numpy
    except GraphError:
        raise _err(op, f"output {i} (tensor {op.outputs[i].id}) has data type {t.value}, "
                       f"which the reference interpreter cannot hold") from None


def _window_attrs(op: Op, in_sp, negative_pads=False):
    """strides, dilations, pads_begin, pads_end (normalized: lists of len(in_sp));
    ``negative_pads`` accepts pads below 0 (pooling reads them as crops)."""
    s, d, pb, pe = (list(v) for v in zip(*windows(op.attrs, len(in_sp))))
    if any(p < 0 for p in pb + pe) and not negative_pads:
        raise _err(op, f"pads_begin {pb} and pads_end {pe} must be non-negative")
    return s, d, pb, pe
