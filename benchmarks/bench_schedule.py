"""Schedule templates and the Halide blur against numpy, torch and Halide, side by side.

1. matmul 1024^3 float32: the complex template's default config and a few hand-picked ones;
2. dense + bias + ReLU, M=128 K=768 N=3072 (weights [N, K]);
3. conv2d NCHW 1x64x56x56, 64 filters 3x3, pad 1, against numpy's im2col + matmul and torch;
4. the Halide blur on 2048x2048 with Halide's schedule, against numpy and Halide itself.

Medians of repeated runs; ratios are anchor time / our time (above 1: we are faster).
Run: ``python benchmarks/bench_schedule.py``
"""
from common import median_seconds, unset_openblas_overrides

unset_openblas_overrides()

import numpy as np  # noqa: E402

from tilefuse.schedule import Config, build, create_schedule, template_for  # noqa: E402
from tilefuse.tensorir import compute, if_then_else, placeholder, reduce_axis, sum  # noqa: E402

RNG = np.random.default_rng(0)


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def timed(fn):
    return median_seconds(fn, repeat=11, min_seconds=0.4)


def compare(title, flops, ours: dict, anchors: dict):
    """Print each of our configs and each anchor in GFLOPS (or ms when flops is None)."""
    print(title)
    unit = (lambda t: f"{flops / t / 1e9:8.1f} GFLOPS") if flops else (lambda t: f"{t * 1e3:8.3f} ms")
    for name, t in anchors.items():
        print(f"  {name:34} {unit(t)}")
    best_anchor = min(anchors.values())
    for name, t in ours.items():
        print(f"  tilefuse {name:25} {unit(t)}   {best_anchor / t:5.2f}x the best anchor")
    return min(ours.values()), anchors


def bench_matmul(n=1024):
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    t = template_for(C)
    a, b = RNG.random((n, n), dtype=np.float32), RNG.random((n, n), dtype=np.float32)
    c, ref = np.empty((n, n), "float32"), a @ b
    ours = {}
    picks = [("default " + _short(t.default_config()), t.default_config())] + [
        (f"{ti}x{tj} {order}", Config({"tile_i": ti, "tile_j": tj, "order": order, "pack": True}))
        for ti, tj, order in [(8, 32, "ji"), (12, 32, "ji"), (4, 64, "ji")]]
    for name, cfg in picks:
        f = t.build(cfg)
        f(a, b, c)
        np.testing.assert_allclose(c, ref, rtol=1e-3)
        ours[name] = timed(lambda: f(a, b, c))
    best, anchors = compare(f"matmul {n}x{n}x{n} float32 (complex template)", 2 * n ** 3, ours,
                            {"numpy/OpenBLAS": timed(lambda: np.matmul(a, b, out=ref))})
    print(f"  -> best {anchors['numpy/OpenBLAS'] / best:.2f}x numpy (floor: >= 0.70)")


def bench_dense(m=128, k=768, n=3072):
    X, W, bias = placeholder((m, k), name="X"), placeholder((n, k), name="W"), placeholder((n,), name="bias")
    r = reduce_axis((0, k), name="r")
    D = compute((m, n), lambda i, j: sum(X[i, r] * W[j, r], axis=r), name="D")
    Y = compute((m, n), lambda i, j: if_then_else(D[i, j] + bias[j] > 0.0, D[i, j] + bias[j], 0.0), name="Y")
    t = template_for(Y)
    x, w, b = (RNG.random(s, dtype=np.float32) for s in ((m, k), (n, k), (n,)))
    y = np.empty((m, n), "float32")
    f = t.build()
    f(x, w, b, y)
    np.testing.assert_allclose(y, np.maximum(x @ w.T + b, 0), rtol=1e-3)

    def numpy_dense():
        out = x @ w.T
        out += b
        np.maximum(out, 0, out=out)
    anchors = {"numpy matmul + bias + relu": timed(numpy_dense)}
    torch = optional("torch")
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(v) for v in (x, w, b))
        with torch.no_grad():
            anchors[f"torch {torch.__version__} linear+relu"] = timed(
                lambda: torch.relu(torch.nn.functional.linear(tx, tw, tb)))
    ours = {"default " + _short(t.default_config()): timed(lambda: f(x, w, b, y))}
    best, anchors = compare(f"dense+bias+relu M={m} K={k} N={n}", 2 * m * n * k, ours, anchors)
    print(f"  -> {anchors['numpy matmul + bias + relu'] / best:.2f}x numpy (floor: > 1.00, "
          f"weights repacked in every call)")


def bench_conv2d(c_in=64, size=56, c_out=64):
    I, W = placeholder((1, c_in, size, size), name="I"), placeholder((c_out, c_in, 3, 3), name="W")
    P = compute((1, c_in, size + 2, size + 2), lambda n, c, y, x: if_then_else(
        (y >= 1) & (y <= size) & (x >= 1) & (x <= size), I[n, c, y - 1, x - 1], 0.0), name="pad")
    rc, ry, rx = reduce_axis((0, c_in), name="rc"), reduce_axis((0, 3), name="ry"), reduce_axis((0, 3), name="rx")
    O = compute((1, c_out, size, size), lambda n, f, y, x: sum(P[n, rc, y + ry, x + rx] * W[f, rc, ry, rx],
                                                              axis=[rc, ry, rx]), name="conv")
    t = template_for(O)
    i, w = RNG.random((1, c_in, size, size), dtype=np.float32), RNG.random((c_out, c_in, 3, 3), dtype=np.float32)
    o = np.empty((1, c_out, size, size), "float32")
    w_matrix = w.reshape(c_out, -1)

    def im2col():
        p = np.pad(i, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))[0]   # c, y, x, 3, 3
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(c_in * 9, size * size)
        return (w_matrix @ cols).reshape(1, c_out, size, size)
    ref = im2col()
    anchors = {"numpy im2col + matmul": timed(im2col)}
    torch = optional("torch")
    if torch is not None:
        ti, tw = torch.from_numpy(i), torch.from_numpy(w)
        with torch.no_grad():
            np.testing.assert_allclose(torch.nn.functional.conv2d(ti, tw, padding=1).numpy(), ref, rtol=1e-3)
            anchors[f"torch {torch.__version__} conv2d"] = timed(
                lambda: torch.nn.functional.conv2d(ti, tw, padding=1))
    ours = {}
    picks = [("default " + _short(t.default_config()), t.default_config()),
             ("8x16 ji", Config({"tile_i": 8, "tile_j": 16, "order": "ji", "pack": False})),
             ("4x32 ij", Config({"tile_i": 4, "tile_j": 32, "order": "ij", "pack": False}))]
    for name, cfg in picks:
        f = t.build(cfg)
        f(i, w, o)
        np.testing.assert_allclose(o, ref, rtol=1e-3)
        ours[name] = timed(lambda: f(i, w, o))
    flops = 2 * c_out * size * size * c_in * 9
    best, anchors = compare(f"conv2d NCHW 1x{c_in}x{size}x{size}, {c_out} 3x3 filters, pad 1", flops, ours, anchors)
    for name, t_anchor in anchors.items():
        print(f"  -> {t_anchor / best:.2f}x {name} (floor: >= 0.50)")


def bench_blur(size=2048):
    inp = placeholder((size + 2, size + 2), name="input")
    blur_x = compute((size + 2, size), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3.0, name="blur_x")
    blur_y = compute((size, size), lambda y, x: (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3.0,
                     name="blur_y")
    s = create_schedule(blur_y)
    y, x = blur_y.op.axis
    yo, xo, yi, xi = s[blur_y].tile(y, x, 32, 256)          # blur_y.tile(x, y, xi, yi, 256, 32)
    _, xv = s[blur_y].split(xi, factor=8)
    s[blur_y].vectorize(xv)                                 #       .vectorize(xi, 8)
    s[blur_y].parallel(yo)                                  #       .parallel(y)
    s[blur_x].compute_at(s[blur_y], xo)                     # blur_x.compute_at(blur_y, x)
    _, bxv = s[blur_x].split(blur_x.op.axis[1], factor=8)
    s[blur_x].vectorize(bxv)                                #       .vectorize(x, 8)
    f = build(s, [inp, blur_y])
    a = RNG.random((size + 2, size + 2), dtype=np.float32)
    out = np.empty((size, size), "float32")
    third = np.float32(1 / 3)

    def numpy_blur():
        bx = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) * third
        return (bx[:-2] + bx[1:-1] + bx[2:]) * third
    f(a, out)
    np.testing.assert_allclose(out, numpy_blur(), rtol=1e-5)
    anchors = {"numpy (two passes)": timed(numpy_blur)}
    hl = optional("halide")
    if hl is not None:
        anchors["Halide, same schedule"] = timed(_halide_blur(hl, a, size))
    best, anchors = compare(f"Halide blur {size}x{size} float32", None, {"Halide's schedule": timed(lambda: f(a, out))},
                            anchors)
    print(f"  -> {anchors['numpy (two passes)'] / best:.2f}x numpy (floor: >= 1.00)")


def _halide_blur(hl, a, size):
    x, y, xi, yi = hl.Var("x"), hl.Var("y"), hl.Var("xi"), hl.Var("yi")
    inp = hl.ImageParam(hl.Float(32), 2, "input")
    blur_x, blur_y = hl.Func("blur_x"), hl.Func("blur_y")
    blur_x[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3
    blur_y[x, y] = (blur_x[x, y] + blur_x[x, y + 1] + blur_x[x, y + 2]) / 3
    blur_y.tile(x, y, xi, yi, 256, 32).vectorize(xi, 8).parallel(y)
    blur_x.compute_at(blur_y, x).vectorize(x, 8)
    blur_y.compile_jit(hl.get_jit_target_from_environment())
    inp.set(hl.Buffer(a))
    out = hl.Buffer(hl.Float(32), [size, size])
    return lambda: blur_y.realize(out)


def _short(cfg: Config) -> str:
    return " ".join(f"{v}" for v in cfg.values.values())


if __name__ == "__main__":
    bench_matmul()
    bench_dense()
    bench_conv2d()
    bench_blur()
