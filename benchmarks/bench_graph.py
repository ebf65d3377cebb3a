"""Whole graphs through the graph API (compile_graph, default template configs) beside numpy
and torch / onnxruntime where installed, in one run.

1. an MLP: batch 64, 784 -> 512 -> 512 -> 10, bias and ReLU between layers;
2. a residual conv block: conv3x3-relu-conv3x3 + input, relu, on 1x64x56x56 (NCHW).

Run: ``python benchmarks/bench_graph.py``
"""
from common import median_seconds, unset_openblas_overrides

unset_openblas_overrides()

import numpy as np  # noqa: E402

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType, compile_graph  # noqa: E402

RNG = np.random.default_rng(0)


class _Build:
    def __init__(self):
        self.graph, self.tensors, self.ops, self.feeds = Graph(), 0, 0, {}

    def input(self, array, constant=False):
        t = LogicalTensor(self.tensors, DataType.f32, array.shape,
                          property_type=PropertyType.constant if constant else PropertyType.variable)
        self.tensors += 1
        self.feeds[t.id] = array
        return t

    def op(self, kind, inputs, **attrs):
        out = LogicalTensor(self.tensors, DataType.f32, None)
        self.tensors += 1
        self.graph.add_op(Op(self.ops, kind, inputs, [out], attrs))
        self.ops += 1
        return out


def timed(fn):
    return median_seconds(fn, repeat=11, min_seconds=0.4)


def report(title, ours, anchors):
    print(title)
    for name, t in anchors.items():
        print(f"  {name:28} {t * 1e3:8.3f} ms   tilefuse is {t / ours:5.2f}x as fast")
    print(f"  {'tilefuse compile_graph':28} {ours * 1e3:8.3f} ms")


def bench_mlp(batch=64, sizes=(784, 512, 512, 10)):
    b = _Build()
    x = b.input(RNG.standard_normal((batch, sizes[0])).astype("float32"))
    params = []
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        w = RNG.standard_normal((n_in, n_out)).astype("float32") / np.float32(np.sqrt(n_in))
        bias = RNG.standard_normal(n_out).astype("float32")
        params.append((w, bias))
        y = b.op(OpKind.MatMul, [x, b.input(w, True)])
        x = b.op(OpKind.Add, [y, b.input(bias, True)])
        if k < len(sizes) - 2:
            x = b.op(OpKind.ReLU, [x])
    b.graph.finalize()
    compiled = compile_graph(b.graph)
    got = compiled.run(b.feeds)
    a = b.feeds[0]

    def numpy_mlp():
        h = a
        for k, (w, bias) in enumerate(params):
            h = h @ w + bias
            if k < len(params) - 1:
                np.maximum(h, 0, out=h)
        return h
    np.testing.assert_allclose(next(iter(got.values())), numpy_mlp(), rtol=1e-3, atol=1e-3)
    anchors = {"numpy": timed(numpy_mlp)}
    torch = _optional("torch")
    if torch is not None:
        layers = [torch.nn.Linear(w.shape[0], w.shape[1]) for w, _ in params]
        with torch.no_grad():
            for layer, (w, bias) in zip(layers, params):
                layer.weight.copy_(torch.from_numpy(w.T.copy()))
                layer.bias.copy_(torch.from_numpy(bias))
            mods = []
            for k, layer in enumerate(layers):
                mods += [layer] + ([torch.nn.ReLU()] if k < len(layers) - 1 else [])
            model, tx = torch.nn.Sequential(*mods).eval(), torch.from_numpy(a)
            anchors[f"torch {torch.__version__}"] = timed(lambda: model(tx))
    onnx = _optional("onnx")
    if onnx is not None and _optional("onnxruntime") is not None:
        h, nodes, weights = onnx.helper, [], {}
        for k, (w, bias) in enumerate(params):
            weights.update({f"w{k}": w, f"b{k}": bias})
            src, dst = "x" if k == 0 else f"h{k}", "y" if k == len(params) - 1 else f"h{k + 1}"
            nodes.append(h.make_node("Gemm", [src, f"w{k}", f"b{k}"], [dst if k == len(params) - 1 else f"g{k}"]))
            if k < len(params) - 1:
                nodes.append(h.make_node("Relu", [f"g{k}"], [dst]))
        anchors.update(_onnxruntime(nodes, a, params[-1][0].shape[1:], weights, numpy_mlp()))
    report(f"MLP batch {batch}, {' -> '.join(map(str, sizes))}: {len(compiled.steps)} partitions",
           timed(lambda: compiled.run(b.feeds)), anchors)


def bench_conv_block(c=64, size=56):
    b = _Build()
    x_arr = RNG.standard_normal((1, c, size, size)).astype("float32")
    w1, w2 = (RNG.standard_normal((c, c, 3, 3)).astype("float32") / np.float32(24) for _ in range(2))
    conv = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1], data_format="NCX",
                weights_format="OIX")
    x = b.input(x_arr)
    y = b.op(OpKind.ReLU, [b.op(OpKind.Convolution, [x, b.input(w1, True)], **conv)])
    y = b.op(OpKind.Convolution, [y, b.input(w2, True)], **conv)
    b.op(OpKind.ReLU, [b.op(OpKind.Add, [y, x])])
    b.graph.finalize()
    compiled = compile_graph(b.graph)
    got = next(iter(compiled.run(b.feeds).values()))

    def conv_np(inp, w):
        cols = np.lib.stride_tricks.sliding_window_view(np.pad(inp[0], ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(c * 9, size * size)
        return (w.reshape(c, -1) @ cols).reshape(1, c, size, size)

    def numpy_block():
        h = np.maximum(conv_np(x_arr, w1), 0)
        return np.maximum(conv_np(h, w2) + x_arr, 0)
    np.testing.assert_allclose(got, numpy_block(), rtol=1e-3, atol=1e-3)
    anchors = {"numpy (im2col + matmul)": timed(numpy_block)}
    torch = _optional("torch")
    if torch is not None:
        F = torch.nn.functional
        tx, tw1, tw2 = (torch.from_numpy(v) for v in (x_arr, w1, w2))
        with torch.no_grad():
            anchors[f"torch {torch.__version__}"] = timed(
                lambda: F.relu(F.conv2d(F.relu(F.conv2d(tx, tw1, padding=1)), tw2, padding=1) + tx))
    onnx = _optional("onnx")
    if onnx is not None and _optional("onnxruntime") is not None:
        h = onnx.helper
        nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
                 h.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), h.make_node("Add", ["c2", "x"], ["s"]),
                 h.make_node("Relu", ["s"], ["y"])]
        anchors.update(_onnxruntime(nodes, x_arr, x_arr.shape[1:], {"w1": w1, "w2": w2}, numpy_block()))
    report(f"residual conv block 1x{c}x{size}x{size}: {len(compiled.steps)} partitions",
           timed(lambda: compiled.run(b.feeds)), anchors)


def _onnxruntime(nodes, x, out_tail, weights, want):
    """The onnxruntime anchor: the same graph as an ONNX model (weights as initializers),
    checked against numpy, timed."""
    import onnx
    import onnxruntime
    h = onnx.helper
    graph = h.make_graph(nodes, "bench", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (x.shape[0], *out_tail))],
                         [onnx.numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-3, atol=1e-3)
    return {f"onnxruntime {onnxruntime.__version__}": timed(lambda: session.run(None, {"x": x}))}


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


if __name__ == "__main__":
    bench_mlp()
    bench_conv_block()
