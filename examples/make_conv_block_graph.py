"""Writes conv_block.json, the bundled residual conv block graph, in oneDNN's graph format:

    x (1x16x28x28, NCHW) -> conv3x3 + bias -> ReLU -> conv3x3 + bias -> + x -> ReLU

The weights and biases are constant inputs (fed at run time, like mlp.json's), the two
convolutions keep 16 channels and the 28x28 size (stride 1, padding 1), so the second
convolution's output and ``x`` add up elementwise. Run ``python examples/make_conv_block_graph.py``
to write the file again; ``tests/autotune/test_cli.py`` checks that it matches.
"""
from pathlib import Path

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType


def conv_block_graph(channels: int = 16, size: int = 28) -> Graph:
    """The residual conv block for a batch of one image with ``channels`` channels of
    ``size`` x ``size`` pixels, finalized.

    Example:
        >>> [op.kind.value for op in conv_block_graph(4, 8).ops]
        ['Convolution', 'BiasAdd', 'ReLU', 'Convolution', 'BiasAdd', 'Add', 'ReLU']
    """
    graph, ids, op_ids = Graph(), iter(range(1 << 30)), iter(range(1 << 30))
    image = (1, channels, size, size)

    def tensor(shape, constant=False):
        prop = PropertyType.constant if constant else PropertyType.variable
        return LogicalTensor(next(ids), DataType.f32, shape, property_type=prop)

    def op(kind, inputs, name, **attrs):
        out = tensor(image)
        graph.add_op(Op(next(op_ids), kind, inputs, [out], attrs, name=name))
        return out

    conv = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
                data_format="NCX", weights_format="OIX")
    x = tensor(image)
    y = x
    for k in range(2):
        y = op(OpKind.Convolution, [y, tensor((channels, channels, 3, 3), True)], f"conv{k}", **conv)
        y = op(OpKind.BiasAdd, [y, tensor((channels,), True)], f"conv{k}_bias", data_format="NCX")
        if k == 0:
            y = op(OpKind.ReLU, [y], "relu0")
    y = op(OpKind.Add, [y, x], "residual", auto_broadcast="numpy")
    op(OpKind.ReLU, [y], "relu1")
    graph.finalize()
    return graph


if __name__ == "__main__":
    Path(__file__).with_name("conv_block.json").write_text(conv_block_graph().to_json())
