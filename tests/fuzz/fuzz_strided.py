"""Seeded cases of feeds laid out every way numpy allows, run through one ``InferenceSession``
and checked against the same session run on C-contiguous copies: zero-stride broadcast views
(``np.broadcast_to``), negative strides, non-contiguous slices, Fortran order, transposed
views, read-only arrays and mixes of them, and zero-size feeds of a model with a symbolic
batch. The results must equal the contiguous copies' (or both runs be refused alike, cleanly),
and the caller's arrays must be left as they were.

Example:
    >>> case = strided_case(0)
    >>> case.cls, case.description.rsplit(": ", 1)[1] in [name for name, _ in LAYOUTS]
    ('strided-feeds', True)
"""
from __future__ import annotations

import numpy as np

from fuzz_onnx_models import floats, initializer, node, onnx_model, value_info
from fuzz_outcomes import OK, WRONG, Outcome, classify_exception

RTOL, ATOL = 1e-6, 1e-6


def _broadcast(a, rng):
    """A zero-stride view with ``a``'s shape: some axes (at least one when it can) repeat one
    slice of ``a``; the values differ from ``a``'s, so the expectation is its own copy."""
    if a.ndim == 0:
        return a
    axes = [k for k in range(a.ndim) if rng.random() < 0.5] or [int(rng.integers(a.ndim))]
    index = tuple(slice(0, 1) if k in axes else slice(None) for k in range(a.ndim))
    return np.broadcast_to(a[index], a.shape)


def _reversed(a, rng):
    """A view with negative strides along some axes, holding ``a``'s values."""
    axes = tuple(k for k in range(a.ndim) if rng.random() < 0.6) or tuple(range(a.ndim))
    return np.flip(np.ascontiguousarray(np.flip(a, axes)), axes)


def _sliced(a, rng):
    """A non-contiguous view of a larger array (a step of 2 or 3 along one axis, an offset)."""
    if a.ndim == 0:
        return a
    axis, step = int(rng.integers(a.ndim)), int(rng.integers(2, 4))
    shape = list(a.shape)
    shape[axis] = a.shape[axis] * step + 1
    big = np.full(shape, np.nan, a.dtype) if a.dtype.kind == "f" else np.zeros(shape, a.dtype)
    index = tuple(slice(1, None, step) if k == axis else slice(None) for k in range(a.ndim))
    big[index] = a
    return big[index]


def _fortran(a, rng):
    return np.asfortranarray(a)


def _transposed(a, rng):
    """A transposed view of a contiguous array, holding ``a``'s values."""
    perm = rng.permutation(a.ndim)
    return np.ascontiguousarray(a.transpose(perm)).transpose(np.argsort(perm))


def _read_only(a, rng):
    view = _pick_layout(rng, exclude=("read-only", "mixed"))(a, rng)
    view = view.view()
    view.setflags(write=False)
    return view


def _mixed(a, rng):
    """Two layouts one on the other (a slice of a reversed array, a broadcast of a Fortran one...)."""
    first = _pick_layout(rng, exclude=("mixed", "broadcast"))(a, rng)
    return _pick_layout(rng, exclude=("mixed",))(first, rng)


LAYOUTS = [("broadcast", _broadcast), ("negative strides", _reversed), ("non-contiguous slice", _sliced),
           ("Fortran order", _fortran), ("transposed view", _transposed), ("read-only", _read_only),
           ("mixed", _mixed)]


def _pick_layout(rng, exclude=()):
    choices = [make for name, make in LAYOUTS if name not in exclude]
    return choices[int(rng.integers(len(choices)))]


def strided_model(rng):
    """(description, model, feed shapes by input name, the inputs with a symbolic batch): a small
    model of one of a few kinds with one or two float inputs, half the time with a symbolic
    batch (zero-size feeds are tried on those).

    Example:
        >>> strided_model(np.random.default_rng(0))[0] in ("conv", "matmul + add", "broadcast mul", "softmax", "reduce")
        True
    """
    kind = ["conv", "matmul + add", "broadcast mul", "softmax", "reduce"][int(rng.integers(5))]
    batch = int(rng.integers(1, 4))
    if kind == "conv":
        c, h, w, f = (int(v) for v in rng.integers(1, 7, 4))
        nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])]
        inits, shapes = [initializer("w", floats(rng, [f, c, 3, 3]))], {"x": [batch, c, h, w]}
    elif kind == "matmul + add":
        m, k, n = (int(v) for v in rng.integers(1, 20, 3))
        nodes = [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "z"], ["y"])]
        inits, shapes = [initializer("w", floats(rng, [k, n]))], {"x": [batch, m, k], "z": [batch, m, n]}
    elif kind == "broadcast mul":
        c, h = (int(v) for v in rng.integers(1, 12, 2))
        nodes = [node("Mul", ["x", "z"], ["m"]), node("Sigmoid", ["m"], ["y"])]
        inits, shapes = [], {"x": [batch, c, h], "z": [1, c, 1]}
    elif kind == "softmax":
        n, k = (int(v) for v in rng.integers(1, 30, 2))
        nodes = [node("Softmax", ["x"], ["y"], axis=-1)]
        inits, shapes = [], {"x": [batch, n, k]}
    else:
        n, k = (int(v) for v in rng.integers(1, 30, 2))
        nodes = [node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)]
        inits, shapes = [], {"x": [batch, n, k]}
    batched = [name for name, s in shapes.items() if s[0] == batch] if rng.random() < 0.5 else []
    dims = {name: (["batch"] + s[1:] if name in batched else s) for name, s in shapes.items()}
    model = onnx_model(nodes, [value_info(name, d) for name, d in dims.items()], [value_info("y", None)], inits)
    return kind, model, shapes, batched


def _run(session, feeds):
    """(outputs, None) or (None, the exception)."""
    try:
        return session.run(None, feeds), None
    except Exception as err:      # classified by the caller
        return None, err


def check_strided(seed: int) -> Outcome:
    """Run the session of ``seed``'s model on odd layouts and on their contiguous copies.

    Example:
        >>> check_strided(0).kind
        'ok'
    """
    from tilefuse.graph_api import InferenceSession
    rng = np.random.default_rng(seed)
    kind, model, shapes, batched = strided_model(rng)
    session = InferenceSession(model.SerializeToString())
    name, layout = LAYOUTS[seed % len(LAYOUTS)]
    if batched and rng.random() < 0.25:          # zero-size: a batch of 0
        name = "zero-size batch, " + name
        shapes = {k: ([0] + s[1:] if k in batched else s) for k, s in shapes.items()}
    base = {k: floats(rng, s) for k, s in shapes.items()}
    odd = {k: layout(a, rng) for k, a in base.items()}
    before = {k: np.array(a) for k, a in odd.items()}
    copies = {k: np.ascontiguousarray(a) for k, a in odd.items()}
    got, err = _run(session, odd)
    want, want_err = _run(session, copies)
    for k, a in odd.items():
        if not np.array_equal(a, before[k], equal_nan=True):
            return Outcome(WRONG, f"{name}: run modified the caller's feed {k!r}")
    if err is not None or want_err is not None:
        if err is None or want_err is None:
            which = "the odd layout" if err is not None else "the contiguous copy"
            refusal = classify_exception(err or want_err, "run").message
            return Outcome(WRONG, f"{name}: only {which} was refused: {refusal}")
        return classify_exception(err, "run")
    for g, w in zip(got, want):
        if g.shape != w.shape or not np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True):
            return Outcome(WRONG, f"{name}: the odd layout gives {g.dtype}{list(g.shape)} other than the contiguous "
                                  f"copy's {w.dtype}{list(w.shape)}")
    return Outcome(OK, f"{kind}, {name}: equal to the contiguous copies")


def strided_case(seed: int):
    """The ``strided-feeds`` case of ``seed`` (layout ``seed % len(LAYOUTS)``).

    Example:
        >>> strided_case(3).description.endswith("Fortran order")
        True
    """
    from fuzz_cases import Case
    kind, _, shapes, _ = strided_model(np.random.default_rng(seed))
    return Case("strided-feeds", seed, f"{kind} {shapes}: {LAYOUTS[seed % len(LAYOUTS)][0]}",
                lambda: check_strided(seed))
