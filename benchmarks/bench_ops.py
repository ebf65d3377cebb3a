"""One-op (or one-block) ONNX graphs timed side by side: tilefuse with default configs
against onnxruntime, the anchor, and against numpy for the products of two data operands
(both MatMul operands graph inputs, as attention's are).

Each case is a small ONNX model built here with ``onnx.helper`` and seeded weights. For each,
``compile_graph(from_onnx(model))`` is checked against onnxruntime's output, then both are
timed in interleaved blocks (best block of ``--rounds``) with a pause between blocks, so that
neither library's spinning worker threads slow the other. The ratio is onnxruntime's time over
ours: above 1 is faster than onnxruntime; numpy's ratio is its time over ours. The peak column
is our time's share of the FMA peak measured at the start of the run: the flops of the case's
multiply-adds (products, convolutions, attention; a Winograd convolution's counted as the
direct algorithm's, so it can pass 100%) over our time. The geomean of the onnxruntime ratios
closes the table. The pw_ cases (1x1 convolutions of MobileNetV3's and
EfficientNet's shapes) compile without the channels-last layout plan, as in models that keep
NCHW (narrow grouped convolutions between the 1x1 ones); their output, a graph output, is copied out of the GEMM's
view (in a model the next layer reads the view).

Run: ``python benchmarks/bench_ops.py [--rounds 5] [--cases maxpool softmax ...] [--list]``
"""
from common import step_kinds, timed_interleaved, unset_openblas_overrides

unset_openblas_overrides()

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------- model building

class ModelBuilder:
    """A one-graph ONNX model built node by node: ``x = mb.input("x", shape)``,
    ``w = mb.weight("w", shape)``, ``y = mb.node("Relu", [x])``, ``mb.model([y])``.

    Example:
        >>> mb = ModelBuilder(); x = mb.input("x", (2, 3)); y = mb.node("Relu", [x])
        >>> len(mb.model([y]).graph.node)
        1
    """

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.inputs, self.initializers, self.nodes, self.feeds = [], [], [], {}
        self.count = 0

    def input(self, name: str, shape) -> str:
        import onnx
        self.inputs.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(shape)))
        self.feeds[name] = self.rng.standard_normal(shape).astype(np.float32)
        return name

    def weight(self, name: str, shape, value=None, scale: float | None = None) -> str:
        import onnx
        if value is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            value = self.rng.standard_normal(shape) * (scale if scale is not None else 1 / math.sqrt(max(fan_in, 1)))
        value = np.asarray(value)
        self.initializers.append(onnx.numpy_helper.from_array(value.astype(value.dtype if value.dtype.kind == "i"
                                                                           else np.float32), name))
        return name

    def node(self, op: str, inputs, outputs: int = 1, **attrs) -> str | list[str]:
        import onnx
        self.count += 1
        names = [f"{op.lower()}{self.count}_{k}" for k in range(outputs)]
        self.nodes.append(onnx.helper.make_node(op, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else names

    def model(self, outputs):
        import onnx
        h = onnx.helper
        outs = [h.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs]
        graph = h.make_graph(self.nodes, "case", self.inputs, outs, self.initializers)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        model.ir_version = 8
        return onnx.shape_inference.infer_shapes(model)


def _conv(mb, x, cin, cout, k, stride=1, pad=None, groups=1, dilation=1, bias=True, name="w"):
    pad = (k // 2) * dilation if pad is None else pad
    ks = k if isinstance(k, (tuple, list)) else (k, k)
    st = stride if isinstance(stride, (tuple, list)) else (stride, stride)
    pads = pad if isinstance(pad, (tuple, list)) else (pad, pad, pad, pad)
    ins = [x, mb.weight(name + f"{mb.count}", (cout, cin // groups, *ks))]
    if bias:
        ins.append(mb.weight(name + f"b{mb.count}", (cout,), scale=0.1))
    return mb.node("Conv", ins, kernel_shape=list(ks), strides=list(st), pads=list(pads), group=groups,
                   dilations=[dilation, dilation])


def _hardswish_mul_add(mb, y, c):
    """BN written as Mul+Add, then hardswish as x * clip(x + 3, 0, 6) / 6."""
    y = mb.node("Mul", [y, mb.weight(f"s{mb.count}", (1, c, 1, 1), scale=1.0)])
    y = mb.node("Add", [y, mb.weight(f"t{mb.count}", (1, c, 1, 1), scale=0.1)])
    three = mb.weight(f"three{mb.count}", (), value=np.float32(3))
    lo, hi = mb.weight(f"lo{mb.count}", (), value=np.float32(0)), mb.weight(f"hi{mb.count}", (), value=np.float32(6))
    six = mb.weight(f"six{mb.count}", (), value=np.float32(6))
    clipped = mb.node("Clip", [mb.node("Add", [y, three]), lo, hi])
    return mb.node("Div", [mb.node("Mul", [y, clipped]), six])


def case_matmul():
    mb = ModelBuilder(); a = mb.input("a", (1024, 1024))
    return mb.model([mb.node("MatMul", [a, mb.weight("b", (1024, 1024))])])


def case_dense():
    mb = ModelBuilder(); x = mb.input("x", (128, 768))
    y = mb.node("MatMul", [x, mb.weight("w", (768, 3072))])
    return mb.model([mb.node("Relu", [mb.node("Add", [y, mb.weight("b", (3072,), scale=0.1)])])])


def case_matmul_data(a_shape, b_shape):
    """A MatMul of two graph inputs (no constant weights): both are data, read as fed."""
    def make():
        mb = ModelBuilder()
        return mb.model([mb.node("MatMul", [mb.input("a", a_shape), mb.input("b", b_shape)])])
    return make


def case_dense_data_weights():
    mb = ModelBuilder(); x, w = mb.input("x", (128, 768)), mb.input("w", (768, 3072))
    y = mb.node("MatMul", [x, w])
    return mb.model([mb.node("Relu", [mb.node("Add", [y, mb.weight("b", (3072,), scale=0.1)])])])


def case_attention(heads, sequence, depth):
    """Scaled dot-product attention as exporters write it: MatMul(Q, K^T), Mul by 1/sqrt(depth),
    Softmax over the keys, MatMul by V (one fused op and kernel in tilefuse)."""
    def make():
        mb = ModelBuilder()
        q, kt = mb.input("q", (1, heads, sequence, depth)), mb.input("k", (1, heads, depth, sequence))
        scale = mb.weight("scale", (), value=np.float32(1 / math.sqrt(depth)))
        scores = mb.node("Mul", [mb.node("MatMul", [q, kt]), scale])
        probabilities = mb.node("Softmax", [scores], axis=-1)
        return mb.model([mb.node("MatMul", [probabilities, mb.input("v", (1, heads, sequence, depth))])])
    return make


def _attention_numpy(feeds, model):
    scores = feeds["q"] @ feeds["k"] * np.float32(1 / math.sqrt(feeds["q"].shape[-1]))
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ feeds["v"]


def case_eltwise():
    mb = ModelBuilder(); a, b, c = (mb.input(n, (4 * 1024 * 1024,)) for n in "abc")
    return mb.model([mb.node("Add", [mb.node("Mul", [mb.node("Exp", [a]), b]), c])])


def case_layernorm():
    mb = ModelBuilder(); x = mb.input("x", (128, 768))
    return mb.model([mb.node("LayerNormalization", [x, mb.weight("g", (768,), scale=1.0),
                                                    mb.weight("b", (768,), scale=0.1)], axis=-1, epsilon=1e-5)])


def case_conv3x3():
    mb = ModelBuilder(); x = mb.input("x", (1, 64, 56, 56))
    return mb.model([mb.node("Relu", [_conv(mb, x, 64, 64, 3)])])


def case_conv1x1():
    mb = ModelBuilder(); x = mb.input("x", (1, 256, 56, 56))
    return mb.model([_conv(mb, x, 256, 64, 1, bias=False)])


def case_grouped(c, size, groups, stride=1):
    """A grouped 3x3 convolution (RegNetY's and ResNeXt's) with bias and ReLU."""
    def make():
        mb = ModelBuilder(); x = mb.input("x", (1, c, size, size))
        return mb.model([mb.node("Relu", [_conv(mb, x, c, c, 3, stride=stride, groups=groups)])])
    return make


def case_depthwise3x3():
    mb = ModelBuilder(); x = mb.input("x", (1, 96, 112, 112))
    return mb.model([_conv(mb, x, 96, 96, 3, groups=96)])


def case_conv_stride2():
    mb = ModelBuilder(); x = mb.input("x", (1, 128, 56, 56))
    return mb.model([_conv(mb, x, 128, 256, 3, stride=2)])


def case_stem():
    mb = ModelBuilder(); x = mb.input("x", (1, 3, 224, 224))
    return mb.model([_conv(mb, x, 3, 64, 7, stride=2)])


def case_global_avgpool():
    mb = ModelBuilder(); x = mb.input("x", (1, 2048, 7, 7))
    return mb.model([mb.node("GlobalAveragePool", [x])])


def case_softmax():
    mb = ModelBuilder(); x = mb.input("x", (4096, 1024))
    return mb.model([mb.node("Softmax", [x], axis=-1)])


def case_softmax_short_rows():
    mb = ModelBuilder(); x = mb.input("x", (64 * 1024, 16))
    return mb.model([mb.node("Softmax", [x], axis=-1)])


def case_softmax_axis1():
    mb = ModelBuilder(); x = mb.input("x", (8, 1000, 512))
    return mb.model([mb.node("Softmax", [x], axis=1)])


def case_concat():
    mb = ModelBuilder(); x = mb.input("x", (1, 192, 28, 28))
    branches = [mb.node("Relu", [_conv(mb, x, 192, c, 1)]) for c in (64, 96, 16, 32)]
    return mb.model([mb.node("Concat", branches, axis=1)])


def case_maxpool():
    mb = ModelBuilder(); x = mb.input("x", (1, 64, 112, 112))
    return mb.model([mb.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])])


def case_avgpool():
    mb = ModelBuilder(); x = mb.input("x", (1, 256, 28, 28))
    return mb.model([mb.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                             count_include_pad=0)])


def case_lrn():
    mb = ModelBuilder(); x = mb.input("x", (1, 64, 56, 56))
    return mb.model([mb.node("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)])


def case_resize_nearest():
    mb = ModelBuilder(); x = mb.input("x", (1, 256, 40, 40))
    scales = mb.weight("scales", (4,), value=np.array([1, 1, 2, 2], np.float32))
    return mb.model([mb.node("Resize", [x, "", scales], mode="nearest", nearest_mode="floor",
                             coordinate_transformation_mode="asymmetric")])


def case_resize_linear():
    mb = ModelBuilder(); x = mb.input("x", (1, 128, 40, 40))
    scales = mb.weight("scales", (4,), value=np.array([1, 1, 2, 2], np.float32))
    return mb.model([mb.node("Resize", [x, "", scales], mode="linear", coordinate_transformation_mode="half_pixel")])


def case_conv_transpose():
    mb = ModelBuilder(); x = mb.input("x", (1, 64, 40, 40))
    w = mb.weight("w", (64, 32, 4, 4))
    return mb.model([mb.node("ConvTranspose", [x, w, mb.weight("b", (32,), scale=0.1)], kernel_shape=[4, 4],
                             strides=[2, 2], pads=[1, 1, 1, 1])])


def case_depthwise5x5_hardswish():
    mb = ModelBuilder(); x = mb.input("x", (1, 120, 28, 28))
    return mb.model([_hardswish_mul_add(mb, _conv(mb, x, 120, 120, 5, groups=120, bias=False), 120)])


def case_depthwise_stride21():
    mb = ModelBuilder(); x = mb.input("x", (1, 128, 16, 80))
    return mb.model([_conv(mb, x, 128, 128, 3, stride=(2, 1), groups=128)])


def case_pointwise(cin, cout, size, epilogue):
    """A 1x1 NCHW convolution (MobileNetV3's, EfficientNet's) and its epilogue: "add" a
    residual input of the output's shape, "relu", "silu" (x * sigmoid(x)), or none."""
    def make():
        mb = ModelBuilder(); x = mb.input("x", (1, cin, size, size))
        y = _conv(mb, x, cin, cout, 1)
        if epilogue == "add":
            y = mb.node("Add", [y, mb.input("residual", (1, cout, size, size))])
        elif epilogue == "relu":
            y = mb.node("Relu", [y])
        elif epilogue == "silu":
            y = mb.node("Mul", [y, mb.node("Sigmoid", [y])])
        return mb.model([y])
    return make


def _matmul_numpy(feeds, model):
    return np.matmul(feeds["a"], feeds["b"])


def _dense_numpy(feeds, model):
    import onnx.numpy_helper
    bias = next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "b")
    return np.maximum(feeds["x"] @ feeds["w"] + bias, 0)


# key: (title, model maker[, numpy's computation of the output from the feeds and the model])
CASES = {
    "matmul1024": ("MatMul 1024", case_matmul),
    "matmul1024_data": ("MatMul 1024, data x data", case_matmul_data((1024, 1024), (1024, 1024)), _matmul_numpy),
    "dense": ("dense+bias+relu 128x768x3072", case_dense),
    "dense_data": ("dense+bias+relu 128x768x3072, data weights", case_dense_data_weights, _dense_numpy),
    "attention_qk": ("attention Q K^T, 12 heads of 128x64x128", case_matmul_data((12, 128, 64), (12, 64, 128)),
                     _matmul_numpy),
    "attention_pv": ("attention P V, 12 heads of 128x128x64", case_matmul_data((12, 128, 128), (12, 128, 64)),
                     _matmul_numpy),
    "attention128": ("attention, 12 heads of 128x64 (BERT)", case_attention(12, 128, 64), _attention_numpy),
    "attention1500": ("attention, 6 heads of 1500x64 (Whisper-tiny)", case_attention(6, 1500, 64), _attention_numpy),
    "eltwise": ("exp(a)*b+c 4M", case_eltwise),
    "layernorm": ("LayerNormalization 128x768", case_layernorm),
    "conv3x3": ("conv 3x3 64->64 56x56 +bias+relu", case_conv3x3),
    "conv1x1": ("conv 1x1 256->64 56x56", case_conv1x1),
    "grouped3x3": ("grouped 3x3 320ch 14x14 g20 +bias+relu", case_grouped(320, 14, 20)),
    "grouped_stride2": ("grouped 3x3/2 144ch 56x56 g9 +bias+relu", case_grouped(144, 56, 9, stride=2)),
    "grouped_resnext": ("grouped 3x3 256ch 28x28 g32 +bias+relu", case_grouped(256, 28, 32)),
    "pw_project": ("conv 1x1 144->24 56x56 +bias+residual", case_pointwise(144, 24, 56, "add")),
    "pw_project28": ("conv 1x1 240->40 28x28 +bias+residual", case_pointwise(240, 40, 28, "add")),
    "pw_expand_relu": ("conv 1x1 16->96 112x112 +bias+relu", case_pointwise(16, 96, 112, "relu")),
    "pw_expand_silu": ("conv 1x1 16->96 112x112 +bias+silu", case_pointwise(16, 96, 112, "silu")),
    "depthwise3x3": ("depthwise 3x3 96ch 112x112", case_depthwise3x3),
    "conv_stride2": ("conv 3x3 stride 2, 128->256 56x56", case_conv_stride2),
    "stem": ("stem conv 7x7 stride 2, 3->64 224x224", case_stem),
    "global_avgpool": ("global average pool 2048x7x7", case_global_avgpool),
    "softmax": ("Softmax 4096x1024", case_softmax),
    "softmax_short": ("Softmax 65536x16", case_softmax_short_rows),
    "softmax_axis1": ("Softmax axis 1 of 8x1000x512", case_softmax_axis1),
    "concat": ("Concat of four 1x1 convs (inception)", case_concat),
    "maxpool": ("MaxPool 3x3 stride 2, 64x112x112", case_maxpool),
    "avgpool": ("AvgPool 3x3 stride 1, 256x28x28", case_avgpool),
    "lrn": ("LRN size 5, 64x56x56", case_lrn),
    "resize_nearest": ("Resize nearest x2, 256x40x40", case_resize_nearest),
    "resize_linear": ("Resize linear x2, 128x40x40", case_resize_linear),
    "conv_transpose": ("ConvTranspose 4x4/2, 64->32 40x40", case_conv_transpose),
    "dw5x5_hardswish": ("depthwise 5x5 120ch 28x28 +BN+hardswish", case_depthwise5x5_hardswish),
    "dw_stride21": ("depthwise 3x3 stride (2,1) 128x16x80", case_depthwise_stride21),
}


# the cases compiled without the channels-last layout plan: a model's 1x1 convolutions run
# in NCHW where its narrow grouped convolutions keep it so
NCHW_CASES = {"pw_project", "pw_project28", "pw_expand_relu", "pw_expand_silu"}


# ---------------------------------------------------------------------------- timing

def bench_case(key: str, rounds: int) -> tuple[float, float, float | None, int, str]:
    """(onnxruntime seconds, tilefuse seconds, numpy seconds or None, the flops of its
    multiply-adds, notes) of one case, outputs checked first."""
    import onnxruntime
    from tilefuse import graph_api
    from tilefuse.graph_api.onnx.importer import import_onnx
    from tilefuse.graph_api.passes import DEFAULT, plan_layouts
    from tilefuse.graph_api.profiler import multiply_add_flop
    _, make, *numpy_of = CASES[key]
    model = make()
    mb_feeds = _feeds(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    want = session.run(None, mb_feeds)[0]
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = import_onnx(model)
        passes = tuple(p for p in DEFAULT if p is not plan_layouts) if key in NCHW_CASES else DEFAULT
        compiled = graph_api.compile_graph(imported.graph, passes=passes)
    compile_seconds = time.monotonic() - started
    feeds = {tid: mb_feeds[name] for name, tid in imported.inputs if tid is not None}
    out_id = imported.outputs[0][1]
    got = compiled.run(feeds)[out_id]
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    kinds = step_kinds(compiled)
    notes = f"{len(kinds)} partition(s): {', '.join(kinds)}; compile {compile_seconds:.1f} s"
    notes += "; NCHW" if key in NCHW_CASES else ""
    if any("reference" in str(w.message) or "Wildcard" in str(w.message) for w in caught):
        notes += "; NUMPY FALLBACK"
    engines = {"ort": lambda: session.run(None, mb_feeds), "ours": lambda: compiled.run(feeds)}
    if numpy_of:
        np.testing.assert_allclose(numpy_of[0](mb_feeds, model), want, rtol=2e-3, atol=2e-3)
        engines["numpy"] = lambda: numpy_of[0](mb_feeds, model)
    times = timed_interleaved(engines, rounds)
    flop = multiply_add_flop([op for step in compiled.steps for op in step.ops])
    return times["ort"], times["ours"], times.get("numpy"), flop, notes


def _feeds(model) -> dict:
    rng = np.random.default_rng(1)
    constant = {i.name for i in model.graph.initializer}
    return {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
            for v in model.graph.input if v.name not in constant}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds, best block kept (default 5)")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.list:
        for key, (title, *_) in CASES.items():
            print(f"{key:18} {title}")
        return 0
    import onnxruntime
    from machine import copy_bandwidth_gbs, fma_peak_gflops
    peak = max(fma_peak_gflops() for _ in range(3))     # best of three: another process may hold a core a moment
    print(f"{os.cpu_count()} CPUs; onnxruntime {onnxruntime.__version__}; ratio = onnxruntime time / tilefuse time "
          f"(above 1: tilefuse faster); default configs")
    print(f"measured now: FMA peak {peak:.0f} GFLOPS, copy {copy_bandwidth_gbs():.1f} GB/s; peak = tilefuse's "
          f"multiply-adds as a share of the FMA peak")
    print(f"{'case':42} {'onnxruntime':>12} {'tilefuse':>12} {'ratio':>7} {'peak':>5} {'numpy':>12} {'ratio':>7}  notes")
    ratios = []
    for key in args.cases:
        title = CASES[key][0]
        try:
            ort, ours, numpy_seconds, flop, notes = bench_case(key, args.rounds)
        except Exception as e:          # a case that fails is reported, the others still run
            print(f"{title:42} {'-':>12} {'-':>12} {'-':>7} {'-':>5} {'-':>12} {'-':>7}  FAILED: "
                  f"{type(e).__name__}: {str(e)[:120]}")
            continue
        ratios.append(ort / ours)
        versus_numpy = f"{numpy_seconds * 1e3:9.3f} ms {numpy_seconds / ours:6.2f}x" if numpy_seconds else \
            f"{'-':>12} {'-':>7}"
        share = f"{flop / ours / 1e9 / peak:5.0%}" if flop else f"{'-':>5}"
        print(f"{title:42} {ort * 1e3:9.3f} ms {ours * 1e3:9.3f} ms {ort / ours:6.2f}x {share} {versus_numpy}  "
              f"{notes}", flush=True)
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geomean of {len(ratios)} ratios: {geomean:.2f}x; lowest {min(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
