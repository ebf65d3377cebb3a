"""A small builder of graphs for tests: tensors get fresh ids, ops are added in order."""
from __future__ import annotations

import numpy as np

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType


class Builder:
    def __init__(self):
        self.graph = Graph()
        self.next_tensor = 0
        self.next_op = 0
        self.inputs: dict[int, LogicalTensor] = {}
        self.positive: set[int] = set()      # inputs fed with positive values (variances)

    def tensor(self, shape, dtype=DataType.f32, constant=False) -> LogicalTensor:
        t = LogicalTensor(self.next_tensor, dtype, tuple(shape),
                          property_type=PropertyType.constant if constant else PropertyType.variable)
        self.next_tensor += 1
        return t

    def input(self, shape, constant=False, positive=False) -> LogicalTensor:
        t = self.tensor(shape, constant=constant)
        self.inputs[t.id] = t
        if positive:
            self.positive.add(t.id)
        return t

    def op(self, kind, inputs, out_shape=None, n_outputs=1, **attrs) -> LogicalTensor:
        outs = [LogicalTensor(self.next_tensor + k, DataType.f32, None if out_shape is None else tuple(out_shape))
                for k in range(n_outputs)]
        self.next_tensor += n_outputs
        self.graph.add_op(Op(self.next_op, OpKind.parse(kind), list(inputs), outs, attrs))
        self.next_op += 1
        return outs[0] if n_outputs == 1 else outs

    def finalize(self) -> Graph:
        self.graph.finalize()
        return self.graph

    def feeds(self, seed=0) -> dict:
        rng = np.random.default_rng(seed)
        feeds = {tid: rng.standard_normal(t.shape).astype("float32") for tid, t in self.inputs.items()}
        for tid in self.positive:
            feeds[tid] = np.abs(feeds[tid]) + np.float32(0.5)
        return feeds


def mlp(batch=8, sizes=(37, 64, 19)):
    b = Builder()
    x = b.input((batch, sizes[0]))
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        w, bias = b.input((n_in, n_out), constant=True), b.input((n_out,), constant=True)
        x = b.op("MatMul", [x, w])
        x = b.op("Add", [x, bias])
        if k < len(sizes) - 2:
            x = b.op("ReLU", [x])
    return b


def conv_bn_relu(c_in=5, c_out=8, size=9):
    b = Builder()
    x = b.input((1, c_in, size, size))
    w = b.input((c_out, c_in, 3, 3), constant=True)
    y = b.op("Convolution", [x, w], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
             data_format="NCX", weights_format="OIX")
    params = [b.input((c_out,), constant=True, positive=k == 3) for k in range(4)]   # gamma beta mean var
    y = b.op("BatchNormInference", [y] + params, epsilon=1e-5, data_format="NCX")
    b.op("ReLU", [y])
    return b


def residual_block(c=6, size=7):
    b = Builder()
    x = b.input((1, c, size, size))
    conv_attrs = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
                      data_format="NCX", weights_format="OIX")
    y = b.op("Convolution", [x, b.input((c, c, 3, 3), constant=True)], **conv_attrs)
    y = b.op("ReLU", [y])
    y = b.op("Convolution", [y, b.input((c, c, 3, 3), constant=True)], **conv_attrs)
    y = b.op("Add", [y, x])
    b.op("ReLU", [y])
    return b


def attention(seq=10, dim=16):
    b = Builder()
    q, k, v = b.input((2, seq, dim)), b.input((2, seq, dim)), b.input((2, seq, dim))
    scores = b.op("MatMul", [q, k], transpose_b=True)
    scale = b.input((1,), constant=True)
    scores = b.op("Multiply", [scores, scale])
    probs = b.op("SoftMax", [scores], axis=-1)
    b.op("MatMul", [probs, v])
    return b
