"""Writes the bundled ONNX example models beside this script, built with ``onnx.helper`` and
numpy only (seeded weights, nothing downloaded), opset 17:

* ``resnet_block.onnx`` - a basic ResNet block and a classifier head on a 1x16x32x32 image::

      x -> Conv3x3 -> BatchNormalization -> Relu -> Conv3x3 -> BatchNormalization -> + x -> Relu
        -> GlobalAveragePool -> Flatten -> Gemm (16 -> 10 classes)

* ``transformer_encoder.onnx`` - two post-norm transformer encoder layers on a 1x32x64
  sequence (32 tokens, d_model 64, 4 heads of 16, FFN 128), written the way exporters write
  them: MatMul + Add for Q, K and V, Reshape/Transpose into heads, MatMul, Div by sqrt(16),
  Softmax, MatMul, Transpose/Reshape back, the output projection, residual Add,
  LayerNormalization, then the FFN (MatMul + Add, GELU as x * 0.5 * (1 + Erf(x / sqrt 2)),
  which is how opset 17 spells it, MatMul + Add), residual Add, LayerNormalization.

Run ``python examples/make_onnx_models.py`` to write both files again;
``tests/test_onnx_examples.py`` checks that the committed files are what this script writes
and that onnxruntime runs them.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8            # the IR version of opset 17 (onnx 1.12); every runtime of that era reads it
PRODUCER = "tilefuse examples/make_onnx_models.py"


class _ModelBuilder:
    """Collects nodes and initializers with unique names, then makes a checked ModelProto."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.initializers = [], []
        self._count = 0

    def _name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def constant(self, stem: str, array) -> str:
        name = self._name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, stem: str, shape, fan_in: int) -> str:
        scale = np.float32(1.0 / math.sqrt(fan_in))
        return self.constant(stem, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def vector(self, stem: str, n: int, center: float = 0.0, spread: float = 0.1) -> str:
        return self.constant(stem, (center + spread * self.rng.standard_normal(n)).astype(np.float32))

    def node(self, op_type: str, inputs, stem: str | None = None, **attrs) -> str:
        out = self._name(stem or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def model(self, name: str, inputs, outputs) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name=PRODUCER, ir_version=IR_VERSION)
        onnx.checker.check_model(model, full_check=True)
        return model


def resnet_block(channels: int = 16, size: int = 32, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """The ResNet block model (input ``input``: 1 x ``channels`` x ``size`` x ``size``, output
    ``logits``: 1 x ``classes``), weights drawn from ``seed``.

    Example:
        >>> [n.op_type for n in resnet_block(4, 8, 3).graph.node]   # doctest: +NORMALIZE_WHITESPACE
        ['Conv', 'BatchNormalization', 'Relu', 'Conv', 'BatchNormalization', 'Add', 'Relu',
         'GlobalAveragePool', 'Flatten', 'Gemm']
    """
    b = _ModelBuilder(seed)
    x = "input"
    y = x
    for k in range(2):
        w = b.weight(f"conv{k}_weight", (channels, channels, 3, 3), channels * 9)
        y = b.node("Conv", [y, w], f"conv{k}", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
        bn = [b.vector(f"bn{k}_scale", channels, 1.0), b.vector(f"bn{k}_bias", channels),
              b.vector(f"bn{k}_mean", channels),
              b.constant(f"bn{k}_var", (1.0 + 0.5 * b.rng.random(channels)).astype(np.float32))]
        y = b.node("BatchNormalization", [y, *bn], f"bn{k}", epsilon=1e-5)
        if k == 0:
            y = b.node("Relu", [y], "relu0")
    y = b.node("Add", [y, x], "residual")
    y = b.node("Relu", [y], "relu1")
    y = b.node("GlobalAveragePool", [y], "pool")
    y = b.node("Flatten", [y], "flatten", axis=1)
    fc_w = b.weight("fc_weight", (classes, channels), channels)
    fc_b = b.vector("fc_bias", classes)
    b.nodes.append(helper.make_node("Gemm", [y, fc_w, fc_b], ["logits"], name="fc", transB=1))
    return b.model("resnet_block",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, size, size])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])])


def transformer_encoder(layers: int = 2, seq: int = 32, d_model: int = 64, heads: int = 4,
                        ffn: int = 128, seed: int = 0) -> onnx.ModelProto:
    """The transformer encoder model (input ``x``: 1 x ``seq`` x ``d_model``, output ``y`` of
    the same shape), ``layers`` post-norm encoder layers, weights drawn from ``seed``.

    Example:
        >>> m = transformer_encoder(layers=1, seq=4, d_model=8, heads=2, ffn=16)
        >>> ops = [n.op_type for n in m.graph.node]
        >>> ops.count("MatMul"), ops.count("LayerNormalization"), ops.count("Softmax"), ops.count("Erf")
        (8, 2, 1, 1)
    """
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
    head = d_model // heads
    b = _ModelBuilder(seed)
    split_shape = b.constant("heads_shape", np.array([1, seq, heads, head], np.int64))
    merge_shape = b.constant("merge_shape", np.array([1, seq, d_model], np.int64))
    scale = b.constant("sqrt_head", np.array(math.sqrt(head), np.float32))
    sqrt2, half, one = (b.constant(n, np.array(v, np.float32))
                        for n, v in (("sqrt2", math.sqrt(2.0)), ("half", 0.5), ("one", 1.0)))

    def dense(x, n_in, n_out, stem):
        y = b.node("MatMul", [x, b.weight(f"{stem}_weight", (n_in, n_out), n_in)], stem)
        return b.node("Add", [y, b.vector(f"{stem}_bias", n_out)], f"{stem}_bias")

    def layer_norm(x, stem):
        return b.node("LayerNormalization", [x, b.vector(f"{stem}_scale", d_model, 1.0),
                                             b.vector(f"{stem}_bias", d_model)], stem, axis=-1, epsilon=1e-5)

    x = "x"
    for k in range(layers):
        p = f"layer{k}"
        q, kk, v = (b.node("Reshape", [dense(x, d_model, d_model, f"{p}_{n}"), split_shape], f"{p}_{n}_heads")
                    for n in ("q", "k", "v"))
        q = b.node("Transpose", [q], f"{p}_q_t", perm=[0, 2, 1, 3])            # 1 x h x s x d
        kk = b.node("Transpose", [kk], f"{p}_k_t", perm=[0, 2, 3, 1])          # 1 x h x d x s
        v = b.node("Transpose", [v], f"{p}_v_t", perm=[0, 2, 1, 3])            # 1 x h x s x d
        scores = b.node("Div", [b.node("MatMul", [q, kk], f"{p}_scores"), scale], f"{p}_scaled")
        attn = b.node("MatMul", [b.node("Softmax", [scores], f"{p}_softmax", axis=-1), v], f"{p}_context")
        attn = b.node("Transpose", [attn], f"{p}_context_t", perm=[0, 2, 1, 3])
        attn = b.node("Reshape", [attn, merge_shape], f"{p}_merged")
        attn = dense(attn, d_model, d_model, f"{p}_out")
        x = layer_norm(b.node("Add", [x, attn], f"{p}_residual1"), f"{p}_ln1")
        h = dense(x, d_model, ffn, f"{p}_ffn1")
        gelu = b.node("Add", [b.node("Erf", [b.node("Div", [h, sqrt2], f"{p}_gelu_div")], f"{p}_gelu_erf"), one],
                      f"{p}_gelu_add")
        h = b.node("Mul", [b.node("Mul", [h, gelu], f"{p}_gelu_mul"), half], f"{p}_gelu")
        h = dense(h, ffn, d_model, f"{p}_ffn2")
        x = layer_norm(b.node("Add", [x, h], f"{p}_residual2"), f"{p}_ln2")
    b.nodes[-1].output[0] = "y"
    return b.model("transformer_encoder",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, d_model])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, d_model])])


MODELS = {"resnet_block.onnx": resnet_block, "transformer_encoder.onnx": transformer_encoder}


def write_models(directory=None) -> list[Path]:
    """Write every model of ``MODELS`` (default sizes) into ``directory`` (default: beside this
    script); returns the paths written.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     [p.name for p in write_models(d)]
        ['resnet_block.onnx', 'transformer_encoder.onnx']
    """
    directory = Path(directory) if directory is not None else Path(__file__).resolve().parent
    paths = []
    for file_name, build in MODELS.items():
        path = directory / file_name
        path.write_bytes(build().SerializeToString())
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_models():
        print(f"wrote {written} ({written.stat().st_size / 1024:.0f} KB)")
