"""graph.to_dot: Graphviz text with partitions as clusters."""
from graph_building import Builder, residual_block


def test_partitions_are_clusters_and_edges_carry_shapes():
    g = residual_block().finalize()
    text = g.to_dot()
    assert text.startswith("digraph G {") and text.endswith("}")
    assert text.count("subgraph cluster_") == len(g.get_partitions()) == 2    # the 2 convs: the layout plan adds none
    assert 'label="0: 1x6x7x7"' in text            # the block's input feeds the first conv
    assert text.count(" -> ") == sum(len(op.inputs) for op in g.ops) + len(g.get_output_ports())


def test_unsupported_partitions_are_dashed():
    b = Builder()
    x = b.input((3, 3))
    b.op("Wildcard", [b.op("ReLU", [x])], out_shape=(3, 3))
    text = b.finalize().to_dot()
    assert "style=dashed" in text and "style=rounded" in text
