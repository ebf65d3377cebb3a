"""Graphviz text of a graph, with its partitions drawn as clusters."""
from __future__ import annotations


def graph_to_dot(graph, policy: str = "fusion") -> str:
    """A ``digraph`` with one node per op (its kind and name: an imported ONNX model's ops
    carry their node's name, ``/layer1/conv1/Conv``) and per graph input, edges labelled by
    tensor id and shape, and one cluster per partition that holds ops (dashed when the
    partition is not supported).

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> print(graph_to_dot(g).splitlines()[0])
        digraph G {
    """
    lines = ["digraph G {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    partitions = [p for p in graph.get_partitions(policy) if p.get_ops()] if graph.is_finalized else []
    for p in partitions:
        style = "rounded" if p.is_supported() else "dashed"
        lines.append(f"  subgraph cluster_{p.id} {{")
        lines.append(f'    label="partition {p.id}: {p.get_kind()}"; style={style};')
        for op in p.get_ops():
            lines.append(f'    op{op.id} [label="{op.kind.value}\\n{_escape(op.name)}"];')
        lines.append("  }")
    placed = {op.id for p in partitions for op in p.get_ops()}
    for op in graph.ops:
        if op.id not in placed:
            lines.append(f'  op{op.id} [label="{op.kind.value}\\n{_escape(op.name)}"];')
    for t in graph.get_input_ports():
        lines.append(f'  in{t.id} [shape=ellipse, label="input {t.id}"];')
    for op in graph.ops:
        for t in op.inputs:
            producer = graph.producer(t.id)
            source = f"op{producer.id}" if producer is not None else f"in{t.id}"
            shape = "?" if t.shape is None else "x".join(map(str, t.shape))
            lines.append(f'  {source} -> op{op.id} [label="{t.id}: {shape}"];')
    for t in graph.get_output_ports():
        producer = graph.producer(t.id)
        if producer is not None:
            lines.append(f'  out{t.id} [shape=ellipse, label="output {t.id}"];')
            lines.append(f"  op{producer.id} -> out{t.id};")
    lines.append("}")
    return "\n".join(lines)


def _escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')
