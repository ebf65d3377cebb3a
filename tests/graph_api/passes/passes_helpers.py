"""Shared helpers for the pass tests: a tiny graph builder and a numeric equivalence check."""
from __future__ import annotations

import numpy as np

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType, reference


def lt(tid, shape, dtype=DataType.f32, constant=False):
    prop = PropertyType.constant if constant else PropertyType.variable
    return LogicalTensor(tid, dtype, None if shape is None else tuple(shape), property_type=prop)


def graph(*ops, engine="cpu", fpmath="strict", values=None) -> Graph:
    g = Graph(engine, fpmath)
    for op in ops:
        g.add_op(op)
    for tid, value in (values or {}).items():
        g.bind_constant(tid, value)
    g.finalize()
    return g


def op(oid, kind, ins, outs, **attrs) -> Op:
    return Op(oid, OpKind.parse(kind), ins, outs, attrs)


def feeds_for(g: Graph, seed=0) -> dict:
    """Random values for the graph's inputs, bound constants as bound."""
    rng = np.random.default_rng(seed)
    bound = g.constant_values
    return {t.id: bound[t.id] if t.id in bound else rng.standard_normal(t.shape).astype(t.dtype.numpy)
            for t in g.get_input_ports()}


def snapshot(g: Graph):
    """Everything about a graph that a pass must not change."""
    return [(o.id, o.kind, [t for t in o.inputs], [t for t in o.outputs], repr(o.attrs)) for o in g.ops]


def assert_same_outputs(before: Graph, after: Graph, ids=None, seed=0):
    """Run both graphs on the same random feeds; the outputs ``ids`` (default: every output of
    ``before``) must be present in ``after``'s results with equal values."""
    feeds = feeds_for(before, seed)
    want = reference.run(before, feeds)
    used = {t.id for t in after.get_input_ports()}
    got = reference.run(after, {**{k: v for k, v in feeds.items() if k in used}, **after.constant_values})
    ids = list(want) if ids is None else ids
    assert ids, "nothing to compare"
    for tid in ids:
        assert tid in got, f"output {tid} missing after the pass"
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-6, atol=1e-6)
    return want, got
