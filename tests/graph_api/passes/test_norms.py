import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph
from tilefuse.graph_api.passes import recognize_norms
from passes_helpers import assert_same_outputs, feeds_for, graph, lt, op, snapshot

SHAPE = (3, 5, 37)
RNG = np.random.default_rng(6)


def layer_norm_chain(square="pow", gamma=True, beta=True, extra_reader=False, axes=(-1,), keep_dims=True):
    """x -> mean -> x - mean -> square -> mean -> + eps -> sqrt -> divide [* gamma] [+ beta] -> ReLU."""
    red = tuple(1 if a % 3 in [x % 3 for x in axes] else n for a, n in enumerate(SHAPE)) if keep_dims else SHAPE[:2]
    x, eps = lt(0, SHAPE), lt(1, (), constant=True)
    values = {1: np.array(1e-5, np.float32)}
    ops = [op(0, "ReduceMean", [x], [lt(2, red)], axes=list(axes), keep_dims=keep_dims),
           op(1, "Subtract", [x, lt(2, red)], [lt(3, SHAPE)])]
    ops.append(op(2, "Pow", [lt(3, SHAPE)], [lt(4, SHAPE)], beta=2.0) if square == "pow" else
               op(2, "Multiply", [lt(3, SHAPE), lt(3, SHAPE)], [lt(4, SHAPE)]))
    ops += [op(3, "ReduceMean", [lt(4, SHAPE)], [lt(5, red)], axes=list(axes), keep_dims=keep_dims),
            op(4, "Add", [lt(5, red), eps], [lt(6, red)]), op(5, "Sqrt", [lt(6, red)], [lt(7, red)]),
            op(6, "Divide", [lt(3, SHAPE), lt(7, red)], [lt(8, SHAPE)])]
    last = 8
    if gamma:
        values[9] = RNG.standard_normal(37).astype(np.float32)
        ops.append(op(7, "Multiply", [lt(last, SHAPE), lt(9, (37,), constant=True)], [lt(10, SHAPE)]))
        last = 10
    if beta:
        values[11] = RNG.standard_normal((1, 37)).astype(np.float32)
        ops.append(op(8, "Add", [lt(last, SHAPE), lt(11, (1, 37), constant=True)], [lt(12, SHAPE)]))
        last = 12
    ops.append(op(9, "ReLU", [lt(last, SHAPE)], [lt(13, SHAPE)]))
    if extra_reader:
        ops.append(op(10, "Exp", [lt(4, SHAPE)], [lt(14, SHAPE)]))
    return graph(*ops, values=values)


def rms_norm_chain(inverse="divide", gamma=True):
    """x -> x^2 -> mean -> + eps -> sqrt -> 1 / it -> x * it [* gamma] -> ReLU."""
    red = SHAPE[:2] + (1,)
    x = lt(0, SHAPE)
    values = {1: np.array(1e-6, np.float32)}
    if inverse == "divide":
        values[9] = np.array(1.0, np.float32)
    ops = [op(0, "Pow", [x], [lt(2, SHAPE)], beta=2.0),
           op(1, "ReduceMean", [lt(2, SHAPE)], [lt(3, red)], axes=[2], keep_dims=True),
           op(2, "Add", [lt(3, red), lt(1, (), constant=True)], [lt(4, red)]),
           op(3, "Sqrt", [lt(4, red)], [lt(5, red)])]
    ops.append(op(4, "Divide", [lt(9, (), constant=True), lt(5, red)], [lt(6, red)]) if inverse == "divide" else
               op(4, "Reciprocal", [lt(5, red)], [lt(6, red)]))
    ops.append(op(5, "Multiply", [x, lt(6, red)], [lt(7, SHAPE)]))
    last = 7
    if gamma:
        values[10] = RNG.standard_normal(37).astype(np.float32)
        ops.append(op(6, "Multiply", [lt(10, (37,), constant=True), lt(7, SHAPE)], [lt(8, SHAPE)]))
        last = 8
    ops.append(op(7, "ReLU", [lt(last, SHAPE)], [lt(11, SHAPE)]))
    return graph(*ops, values=values)


@pytest.mark.parametrize("square, gamma, beta", [("pow", True, True), ("multiply", True, False),
                                                 ("pow", False, True), ("pow", False, False)])
def test_a_layer_norm_written_out_becomes_one_layer_norm(square, gamma, beta):
    g = layer_norm_chain(square, gamma, beta)
    before = snapshot(g)
    out = recognize_norms(g)
    assert snapshot(g) == before
    assert [o.kind for o in out.topological_ops()] == [OpKind.LayerNorm, OpKind.ReLU]
    norm = out.ops[0] if out.ops[0].kind is OpKind.LayerNorm else out.ops[1]
    assert norm.attrs["use_affine"] == (gamma or beta) and len(norm.inputs) == (3 if gamma or beta else 1)
    assert_same_outputs(g, out)


@pytest.mark.parametrize("inverse, gamma", [("divide", True), ("reciprocal", False)])
def test_an_rms_norm_written_out_becomes_one_rms_norm(inverse, gamma):
    g = rms_norm_chain(inverse, gamma)
    out = recognize_norms(g)
    assert [o.kind for o in out.topological_ops()] == [OpKind.RMSNorm, OpKind.ReLU]
    assert_same_outputs(g, out)


def test_chains_that_are_not_norms_over_the_last_axis_stay_as_they_are():
    for g in (layer_norm_chain(extra_reader=True),                 # the square is read elsewhere too
              layer_norm_chain(axes=(1,)),                          # over another axis
              layer_norm_chain(axes=(-1,), keep_dims=False)):       # the mean's axis dropped
        assert [o.kind for o in recognize_norms(g).ops] == [o.kind for o in g.ops]


def test_compiled_a_recognized_norm_is_one_reduction_and_matches_numpy():
    g = layer_norm_chain()
    compiled = compile_graph(g)
    assert [s.kind for s in compiled.steps] == ["reduction"]
    x = feeds_for(g)[0].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    want = np.maximum(y * g.constant_values[9] + g.constant_values[11], 0)
    np.testing.assert_allclose(compiled.run({0: feeds_for(g)[0]})[13], want, rtol=1e-4, atol=1e-5)
