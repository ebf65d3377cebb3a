"""split_spatial_reductions: a pooling over a channels-last map's two spatial axes reduces each
row, then the rows; results unchanged, and the maps it must not touch are left alone."""
import numpy as np
import pytest

from tilefuse.graph_api import compile_graph, reference
from tilefuse.graph_api.passes import DEFAULT, split_spatial_reductions
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op

KINDS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"]


def pooling(kind="ReduceMean", shape=(1, 14, 14, 32), axes=(1, 2), keep_dims=True):
    """x -> ReLU -> ``kind`` over ``axes`` (the ReLU: the map is computed, not a graph input)."""
    x, y = lt(0, shape), lt(1, shape)
    kept = tuple(1 if k in [a % 4 for a in axes] else d for k, d in enumerate(shape))
    out = lt(2, kept if keep_dims else tuple(d for k, d in enumerate(shape) if k not in [a % 4 for a in axes]))
    return graph(op(0, "ReLU", [x], [y]), op(1, kind, [y], [out], axes=list(axes), keep_dims=keep_dims))


def reductions(g):
    return [(o.kind.value, o.attrs["axes"], o.outputs[0].shape) for o in g.topological_ops() if o.kind.value.startswith("Reduce")]


def test_a_pooling_reduces_each_row_then_the_rows_into_the_same_tensor():
    g = pooling()
    split = split_spatial_reductions(g)
    assert reductions(split) == [("ReduceMean", [2], (1, 14, 1, 32)), ("ReduceMean", [1, 2], (1, 1, 1, 32))]
    assert split.topological_ops()[-1].outputs[0].id == 2          # the graph's output keeps its id
    assert split_spatial_reductions in DEFAULT


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("keep_dims", [True, False])
def test_every_kind_gives_the_same_values_kept_dims_or_not(kind, keep_dims):
    g = pooling(kind, shape=(2, 13, 11, 21), keep_dims=keep_dims)     # a batch of 2, odd sizes
    split = split_spatial_reductions(g)
    assert len(reductions(split)) == 2
    assert_same_outputs(g, split)


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_it_matches_numpy(kind):
    g = pooling(kind, shape=(1, 28, 19, 40), axes=(-3, -2))           # negative axes name the same pair
    feeds = feeds_for(g, seed=1)
    x = np.maximum(feeds[0], 0)
    want = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}[kind](
        x, axis=(1, 2), keepdims=True)
    got = compile_graph(g).run({0: feeds[0]})[2]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reference.run(g, feeds)[2], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(shape=(1, 7, 7, 512)),                         # 49 pixels: read as fast whole
    dict(shape=(1, 64, 14, 14), axes=(2, 3)),           # NCHW's pooling: rows already
    dict(shape=(1, 14, 14, 32), axes=(1,)),             # one spatial axis only
    dict(shape=(1, 14, 14, 4)),                         # too few channels for a vector
    dict(shape=(1, 1, 196, 32)),                        # a single row
    dict(kind="ReduceL2"),                              # does not split into the same reduction twice
    dict(kind="ReduceProd"),
])
def test_what_it_leaves_alone(case):
    g = pooling(**case)
    assert reductions(split_spatial_reductions(g)) == reductions(g.ir())


def test_a_constant_map_is_left_to_constant_folding():
    x, out = lt(0, (1, 14, 14, 32), constant=True), lt(1, (1, 1, 1, 32))
    g = graph(op(0, "ReduceMean", [x], [out], axes=[1, 2], keep_dims=True),
              values={0: np.ones((1, 14, 14, 32), np.float32)})
    assert reductions(split_spatial_reductions(g)) == [("ReduceMean", [1, 2], (1, 1, 1, 32))]
