"""template_for: the operator class comes from the compute DAG's structure (or a class tag)."""
import numpy as np
import pytest

from tilefuse.schedule import ConfigError, template_for
from tilefuse.schedule.space import Config
from tilefuse.schedule.templates import op_class
from tilefuse.tensorir import compute, exp, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir import max as rmax
from tilefuse.tensorir.errors import Unsupported


def matmul():
    A, B = placeholder((8, 4), name="A"), placeholder((4, 6), name="B")
    r = reduce_axis((0, 4), name="r")
    return A, B, compute((8, 6), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")


def test_classes_come_from_the_body():
    A, B, C = matmul()
    X = placeholder((5, 7), name="X")
    r = reduce_axis((0, 7), name="r")
    assert op_class(C.op) == "complex"
    assert op_class(compute((5,), lambda i: rmax(X[i, r], axis=r)).op) == "reduction"
    assert op_class(compute((5,), lambda i: rsum(X[i, r] * X[i, r], axis=r)).op) == "reduction"  # a norm
    assert op_class(compute((5, 7), lambda i, j: exp(X[i, j])).op) == "injective"
    assert op_class(compute((5, 7), lambda i, j: X[i, j], tag="opaque").op) == "opaque"


def test_template_choice():
    A, B, C = matmul()
    D = compute((8, 6), lambda i, j: exp(C[i, j]), name="D")
    assert template_for(C).name == "complex" and template_for(D).name == "complex"
    assert template_for(compute((8, 6), lambda i, j: exp(D[i, j]) * 2.0)).name == "complex"
    E = compute((8,), lambda i: D[i, 0], name="E")      # an epilogue need not keep the shape
    assert template_for(E).name == "complex"
    X = placeholder((5, 7), name="X")
    assert template_for(compute((5, 7), lambda i, j: X[i, j] + 1.0)).name == "injective"
    two = [compute((5, 7), lambda i, j: X[i, j] + 1.0), compute((5, 7), lambda i, j: X[i, j] * 2.0)]
    assert template_for(two).name == "injective"
    A2, B2, C2 = matmul()
    assert template_for([C, C2]).name == "opaque"     # two anchors in one partition


def test_apply_rejects_a_config_of_another_space():
    A, B, C = matmul()
    t = template_for(C)
    with pytest.raises(ConfigError):
        t.apply(Config({"vector": 16}))
    assert t.space.index_of(t.default_config()) >= 0


def test_args_are_inputs_then_outputs_and_the_build_runs():
    A, B, C = matmul()
    t = template_for(C)
    assert [a.name for a in t.args] == ["A", "B", "C"]
    a, b = np.ones((8, 4), "float32"), np.ones((4, 6), "float32")
    c = np.zeros((8, 6), "float32")
    t.build()(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_only_unsupported_falls_back_to_opaque_a_bug_propagates(monkeypatch):
    from tilefuse.schedule import templates
    A = placeholder((64,), name="A")
    B = compute((64,), lambda i: A[i] + 1.0, name="B")

    def broken(dag, target):
        raise KeyError("a bug in a template")
    monkeypatch.setitem(templates.TEMPLATES, "injective", broken)
    with pytest.raises(KeyError, match="a bug"):
        template_for(B)

    def declines(dag, target):
        raise Unsupported("not this shape")
    monkeypatch.setitem(templates.TEMPLATES, "injective", declines)
    assert template_for(B).name == "opaque"
