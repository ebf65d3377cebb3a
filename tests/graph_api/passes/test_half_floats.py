import numpy as np
import pytest

from tilefuse.graph_api import DataType, OpKind, compile_graph
from tilefuse.graph_api.passes import compute_half_floats_in_f32
from tilefuse.graph_api.passes.half_floats import converts_at_edge
from passes_helpers import graph, lt, op, snapshot

F16, BF16, F32 = DataType.f16, DataType.bf16, DataType.f32


def half_block(dtype, end=True):
    """x @ w + b -> y (an output when ``end``, read by ReLU -> z, an output), in ``dtype``, w and b
    bound."""
    w = np.random.default_rng(1).uniform(-1, 1, (37, 13)).astype(dtype.numpy)
    b = np.random.default_rng(2).uniform(-1, 1, 13).astype(dtype.numpy)
    x, wt, bt = lt(0, (5, 37), dtype), lt(1, (37, 13), dtype, constant=True), lt(2, (13,), dtype, constant=True)
    h, y, z = lt(3, (5, 13), dtype), lt(4, (5, 13), dtype), lt(5, (5, 13), dtype)
    return graph(op(0, "MatMul", [x, wt], [h]), op(1, "Add", [h, bt], [y]), op(2, "ReLU", [y], [z]),
                 *([op(3, "End", [y], [])] if end else []), values={1: w, 2: b}), w, b


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_half_floats_compute_in_f32_between_casts_at_the_ports(dtype):
    g, w, _ = half_block(dtype)
    before = snapshot(g)
    out = compute_half_floats_in_f32(g)
    assert snapshot(g) == before
    ops = out.topological_ops()
    ops = [o for o in ops if o.kind is not OpKind.End]
    assert [o.kind for o in ops] == [OpKind.Cast, OpKind.MatMul, OpKind.Add, OpKind.ReLU, OpKind.Cast, OpKind.Cast]
    first, *middle = ops[:4]
    assert (first.inputs[0].id, first.inputs[0].dtype, first.outputs[0].dtype) == (0, dtype, F32)
    assert all(t.dtype is F32 for o in middle for t in o.inputs + o.outputs)
    assert {(o.inputs[0].dtype, o.outputs[0].id, o.outputs[0].dtype) for o in ops[4:]} == {(F32, 4, dtype),
                                                                                           (F32, 5, dtype)}
    assert all(converts_at_edge(o) for o in (first, *ops[4:])) and not any(converts_at_edge(o) for o in middle)
    assert [(t.id, t.dtype) for t in out.get_output_ports()] == [(4, dtype), (5, dtype)]
    assert out.constant_values[1].dtype == np.float32
    np.testing.assert_array_equal(out.constant_values[1], w.astype(np.float32))


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_half_float_graphs_compile_with_no_fallback_warning(dtype, recwarn):
    g, w, b = half_block(dtype, end=False)
    x = np.random.default_rng(0).uniform(-1, 1, (5, 37)).astype(dtype.numpy)
    got = compile_graph(g, strict=True).run({0: x})
    want = x.astype(np.float32) @ w.astype(np.float32) + b.astype(np.float32)
    assert got[5].dtype == dtype.numpy
    want = np.maximum(want, 0).astype(dtype.numpy).astype(np.float32)
    np.testing.assert_allclose(got[5].astype(np.float32), want, rtol=1e-2, atol=1e-2)
    assert not [str(w.message) for w in recwarn if "reference interpreter" in str(w.message)]


def test_a_cast_to_a_half_float_inside_becomes_a_cast_to_f32_and_f32_graphs_are_left_alone():
    x, h, y = lt(0, (3,)), lt(1, (3,), F16), lt(2, (3,))
    g = graph(op(0, "TypeCast", [x], [h]), op(1, "Cast", [h], [y], to="f32"))
    out = compute_half_floats_in_f32(g)
    assert [(o.kind, o.attrs, o.outputs[0].dtype) for o in out.topological_ops()] == [
        (OpKind.Cast, {"to": "f32"}, F32), (OpKind.Cast, {"to": "f32"}, F32)]
    ir = graph(op(0, "ReLU", [lt(0, (3,))], [lt(1, (3,))])).ir()
    assert compute_half_floats_in_f32(ir) is ir
