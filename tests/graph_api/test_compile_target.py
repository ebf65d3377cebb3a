"""Compiling a graph for a target other than the host: the kernels carry it, code for features
the host lacks is never run (nor unpickled) here, and runs where the host has them."""
import pickle

import numpy as np
import pytest

from tilefuse.graph_api import Engine, GraphError, compile_graph, reference
from tilefuse.tensorir.runtime.target import Target
from graph_building import mlp
from host_vectors import ABSENT_FEATURE, HOST

AVX512 = Target.parse("llvm -mcpu=skylake-avx512")


def kernels(compiled):
    return [step.kernel for step in compiled.steps if step.kernel is not None]


def test_a_graph_compiled_for_avx512_holds_avx512_code_and_runs_only_where_it_can():
    b = mlp(batch=5, sizes=(37, 50, 19))
    g = b.finalize()
    compiled = compile_graph(g, target="llvm -mcpu=skylake-avx512")
    assert compiled.target == AVX512 and all(k.target == AVX512 for k in kernels(compiled))
    assert any("zmm" in getattr(k, "main", k).source("asm") for k in kernels(compiled))
    feeds = b.feeds()
    if AVX512.cannot_run_here() is None:
        want = reference.run(g, feeds)
        got = compiled.run(feeds)
        for tid in want:
            np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-4)
    else:
        with pytest.raises(GraphError, match="cannot run here: .*lacks: .*avx512f"):
            compiled.run(feeds)


def test_the_host_is_the_default_target_and_an_engine_carries_one():
    g = mlp(batch=2, sizes=(8, 4)).finalize()
    assert compile_graph(g).target == HOST
    haswell = Target.parse("llvm -mcpu=haswell")
    compiled = compile_graph(g, Engine("cpu", target=haswell))
    assert all(k.target == haswell for k in kernels(compiled))
    with pytest.raises(GraphError, match="differs from the engine's"):
        compile_graph(g, Engine("cpu", target=haswell), target=AVX512)


@pytest.mark.skipif(ABSENT_FEATURE is None, reason="this host has every feature LLVM knows")
def test_code_for_a_feature_this_host_lacks_is_compiled_but_never_run_or_unpickled_here():
    b = mlp(batch=3, sizes=(11, 7))
    g = b.finalize()
    compiled = compile_graph(g, target=f"llvm -mattr=+{ABSENT_FEATURE}")
    with pytest.raises(GraphError, match=f"cannot run here: .*lacks: {ABSENT_FEATURE}"):
        compiled.run(b.feeds())
    data = pickle.dumps(compiled)
    with pytest.raises(pickle.UnpicklingError, match=ABSENT_FEATURE):
        pickle.loads(data)


def test_a_bad_target_is_refused_clearly():
    g = mlp(batch=2, sizes=(8, 4)).finalize()
    with pytest.raises(ValueError, match="unknown CPU"):
        compile_graph(g, target="llvm -mcpu=skylake-avx51")
