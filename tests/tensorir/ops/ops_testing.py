"""Helpers shared by the op-library tests: random inputs, build-and-run with the template
for the DAG and with the default schedule, and slow loop-based numpy references."""
from __future__ import annotations

import itertools

import numpy as np

from tilefuse.schedule import build, create_schedule, template_for

RNG = np.random.default_rng(20240611)


def rand(shape, dtype="float32", low=None, high=None):
    if low is not None:
        return RNG.uniform(low, high, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _empty(out):
    fill = np.nan if np.dtype(out.dtype).kind == "f" else (True if out.dtype == "bool" else 123)
    return np.full(out.shape, fill, out.dtype)   # unwritten elements show


def run_both(out, feeds):
    """Run ``out`` built with ``template_for(out)`` and with the default schedule; ``feeds`` maps
    each placeholder to its array. Returns (template name, template result, default result)."""
    t = template_for(out)
    by_tensor = {id(k): v for k, v in feeds.items()}
    got_t = _empty(out)
    t.build()(*[by_tensor[id(a)] for a in t.args[:-1]], got_t)
    got_d = _empty(out)
    build(create_schedule(out), [*feeds, out])(*feeds.values(), got_d)
    return t.name, got_t, got_d


def check(out, feeds, expected, template=None, rtol=1e-5, atol=1e-5):
    """Both builds of ``out`` equal ``expected``; the template is ``template`` when given."""
    name, got_t, got_d = run_both(out, feeds)
    if template is not None:
        assert name == template, f"template_for chose {name}, expected {template}"
    expected = np.asarray(expected)
    assert got_t.shape == expected.shape, (got_t.shape, expected.shape)
    for got, how in ((got_t, f"template {name}"), (got_d, "default schedule")):
        if expected.dtype == bool:
            np.testing.assert_array_equal(got, expected, err_msg=how)
        else:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=how)
    return name


# ---------------------------------------------------------------------------- loop references

def to_ncx(a, data_format):
    return a if data_format == "NCX" else np.moveaxis(a, -1, 1)


def from_ncx(a, data_format):
    return a if data_format == "NCX" else np.moveaxis(a, 1, -1)


def ref_conv(x, w, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format, bias=None):
    """Convolution by explicit loops over output positions and taps (float64)."""
    x = to_ncx(x, data_format).astype(np.float64)
    if weights_format == "XIO":
        w = np.moveaxis(np.moveaxis(w, -1, 0), -1, 1)      # (*K, I, O) -> (O, I, *K)
    w = w.astype(np.float64)
    n, c, *sizes = x.shape
    oc, icg, *kernel = w.shape
    outs = [(i + pl + pr - ((k - 1) * d + 1)) // s + 1
            for i, k, s, d, pl, pr in zip(sizes, kernel, strides, dilations, pads_begin, pads_end)]
    ocg = oc // groups
    y = np.zeros((n, oc, *outs))
    for o in itertools.product(*[range(v) for v in outs]):
        for taps in itertools.product(*[range(k) for k in kernel]):
            pos = [oo * s + t * d - pl for oo, s, t, d, pl in zip(o, strides, taps, dilations, pads_begin)]
            if any(p < 0 or p >= i for p, i in zip(pos, sizes)):
                continue
            patch = x[(slice(None), slice(None), *pos)]      # (n, c)
            for g in range(groups):
                xs = patch[:, g * icg:(g + 1) * icg]             # (n, icg)
                ws = w[(slice(g * ocg, (g + 1) * ocg), slice(None), *taps)]   # (ocg, icg)
                y[(slice(None), slice(g * ocg, (g + 1) * ocg), *o)] += xs @ ws.T
    if bias is not None:
        y += bias.reshape((1, oc) + (1,) * len(outs))
    return from_ncx(y, data_format)


def ref_pool(kind, x, kernel, strides, pads_begin, pads_end, dilations, exclude_pad, rounding_type, data_format):
    """Max/avg pooling by explicit loops over output positions and taps (float64). With ceil
    rounding the average excludes padding and a max over padding only is the lowest finite
    value, as oneDNN computes them."""
    lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    x = to_ncx(x, data_format).astype(np.float64)
    n, c, *sizes = x.shape
    exclude_pad = exclude_pad or rounding_type == "ceil"     # as oneDNN runs ceil rounding
    outs = []
    for i, k, s, d, pl, pr in zip(sizes, kernel, strides, dilations, pads_begin, pads_end):
        span = i + pl + pr - ((k - 1) * d + 1)
        outs.append((-(-span // s) if rounding_type == "ceil" else span // s) + 1)
    y = np.zeros((n, c, *outs))
    for o in itertools.product(*[range(v) for v in outs]):
        acc = np.full((n, c), lowest if kind == "max" else 0.0)     # oneDNN's initial maximum
        count = 0
        for taps in itertools.product(*[range(k) for k in kernel]):
            pos = [oo * s + t * d - pl for oo, s, t, d, pl in zip(o, strides, taps, dilations, pads_begin)]
            inside = all(0 <= p < i for p, i in zip(pos, sizes))
            in_padded = all(-pl <= p < i + pr for p, i, pl, pr in zip(pos, sizes, pads_begin, pads_end))
            if inside:
                v = x[(slice(None), slice(None), *pos)]
                acc = np.maximum(acc, v) if kind == "max" else acc + v
            if inside if exclude_pad else in_padded:
                count += 1
        y[(slice(None), slice(None), *o)] = acc if kind == "max" else acc / max(count, 1)
    return from_ncx(y, data_format)


def ref_conv_transpose(x, w, strides, pads_begin, pads_end, dilations, groups, data_format, weights_format,
                       output_padding, bias=None):
    """ConvTranspose by scattering each input element times each tap into the output (float64).
    Weights are read as (C, O/groups, *K) after moving axes from ``weights_format``."""
    x = to_ncx(x, data_format).astype(np.float64)
    nd = x.ndim - 2
    w = w.astype(np.float64)
    if weights_format == "XOI":
        w = np.moveaxis(np.moveaxis(w, -1, 0), -1, 1)        # (*K, O, I) -> (I, O, *K)
    elif weights_format == "XIO":
        w = np.moveaxis(np.moveaxis(w, -2, 0), -1, 1)        # (*K, I, O) -> (I, O, *K)
    elif weights_format == "OIX":
        w = np.swapaxes(w, 0, 1)
    n, c, *sizes = x.shape
    _, ocg, *kernel = w.shape
    icg = c // groups
    outs = [(i - 1) * s + (k - 1) * d + 1 - pb - pe + op
            for i, s, k, d, pb, pe, op in zip(sizes, strides, kernel, dilations, pads_begin, pads_end, output_padding)]
    y = np.zeros((n, ocg * groups, *outs))
    for i in itertools.product(*[range(v) for v in sizes]):
        for taps in itertools.product(*[range(k) for k in kernel]):
            pos = [ii * s + t * d - pb for ii, s, t, d, pb in zip(i, strides, taps, dilations, pads_begin)]
            if any(p < 0 or p >= o for p, o in zip(pos, outs)):
                continue
            for g in range(groups):
                xs = x[(slice(None), slice(g * icg, (g + 1) * icg), *i)]            # (n, icg)
                ws = w[(slice(g * icg, (g + 1) * icg), slice(None), *taps)]      # (icg, ocg)
                y[(slice(None), slice(g * ocg, (g + 1) * ocg), *pos)] += xs @ ws
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * nd)
    return from_ncx(y, data_format)
