"""Engine: the CPU, described by the Target its code is generated for (the host by default);
no GPU engine or graph is accepted."""
import pytest

from tilefuse.graph_api import Engine, Graph, GraphError, Stream
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


@pytest.mark.parametrize("make", [lambda: Engine("gpu"), lambda: Graph("gpu"), lambda: Graph(engine_kind="gpu")])
def test_a_gpu_engine_or_graph_is_refused(make):
    with pytest.raises(GraphError, match="engine kind 'gpu': tilefuse has no GPU backend"):
        make()


def test_other_engine_kinds_are_refused():
    with pytest.raises(GraphError, match="unknown engine kind 'tpu'"):
        Engine("tpu")
    with pytest.raises(GraphError, match="engine kind 'any': an Engine is one device; use 'cpu'"):
        Engine("any")
    assert Graph("any").engine_kind == "any"
