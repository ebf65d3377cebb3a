"""Engine: the CPU, described by the Target its code is generated for (the host by default);
no GPU engine is accepted (a graph recorded on a GPU compiles for the CPU)."""
import numpy as np
import pytest

from tilefuse.graph_api import DataType, Engine, Graph, GraphError, LogicalTensor, Op, OpKind, Stream, compile_graph
from tilefuse.tensorir.runtime.target import Target, TargetError


def test_an_engine_carries_the_target_it_generates_for():
    assert Engine().target is Target.host() is Engine("cpu").target and Engine() == Engine("cpu")
    avx512 = Engine("cpu", target="llvm -mcpu=skylake-avx512")
    assert avx512.target == Target.parse("llvm -mcpu=skylake-avx512") and avx512.target.lanes("float32") == 16
    assert Engine("cpu", target=avx512.target) == avx512 != Engine()
    assert repr(avx512) == "Engine('cpu', target='llvm -mcpu=skylake-avx512')" and repr(Engine()) == "Engine('cpu')"
    assert Stream(avx512).engine is avx512
    with pytest.raises(TargetError, match="unknown CPU 'skylake-avx51'"):
        Engine("cpu", target="llvm -mcpu=skylake-avx51")


def test_a_gpu_engine_is_refused_and_a_graph_recorded_on_a_gpu_compiles_for_the_cpu():
    with pytest.raises(GraphError, match="engine kind 'gpu': tilefuse has no GPU backend"):
        Engine("gpu")
    x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
    g = Graph(engine_kind="gpu"); g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
    assert compile_graph(g).run({0: np.array([-1, 0, 2], "float32")})[1].tolist() == [0.0, 0.0, 2.0]


def test_other_engine_kinds_are_refused():
    with pytest.raises(GraphError, match="unknown engine kind 'tpu'"):
        Engine("tpu")
    with pytest.raises(GraphError, match="engine kind 'any': an Engine is one device; use 'cpu'"):
        Engine("any")
    assert Graph("any").engine_kind == "any"
