"""Writes mlp.json, the bundled example graph: a 3-layer MLP (256 -> 128 -> 64 -> 10, bias and
ReLU between layers, softmax at the end) for a batch of 32, in oneDNN's graph format."""
from pathlib import Path

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType


def mlp_graph(batch=32, sizes=(256, 128, 64, 10)) -> Graph:
    graph, ids = Graph(), iter(range(1 << 30))

    def tensor(shape, constant=False):
        prop = PropertyType.constant if constant else PropertyType.variable
        return LogicalTensor(next(ids), DataType.f32, shape, property_type=prop)

    op_ids = iter(range(1 << 30))

    def op(kind, inputs, shape, name, **attrs):
        out = tensor(shape)
        graph.add_op(Op(next(op_ids), kind, inputs, [out], attrs, name=name))
        return out
    x = tensor((batch, sizes[0]))
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        x = op(OpKind.MatMul, [x, tensor((n_in, n_out), True)], (batch, n_out), f"fc{k}")
        x = op(OpKind.Add, [x, tensor((n_out,), True)], (batch, n_out), f"fc{k}_bias", auto_broadcast="numpy")
        if k < len(sizes) - 2:
            x = op(OpKind.ReLU, [x], (batch, n_out), f"relu{k}")
    op(OpKind.SoftMax, [x], (batch, sizes[-1]), "softmax", axis=-1)
    graph.finalize()
    return graph


if __name__ == "__main__":
    Path(__file__).with_name("mlp.json").write_text(mlp_graph().to_json())
