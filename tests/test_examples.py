"""The bundled example graph is what its generator writes, and it compiles and runs."""
import importlib.util
import warnings
from pathlib import Path

import numpy as np

from tilefuse.graph_api import compile_graph, load_json, reference

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_mlp_json_is_reproducible_and_runs_like_the_reference():
    spec = importlib.util.spec_from_file_location("make_mlp_graph", EXAMPLES / "make_mlp_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (EXAMPLES / "mlp.json").read_text() == module.mlp_graph().to_json()
    graph = load_json(EXAMPLES / "mlp.json")
    assert [p.get_kind() for p in graph.get_partitions()] == ["complex", "complex", "complex", "reduction"]
    rng = np.random.default_rng(1)
    feeds = {t.id: rng.standard_normal(t.shape).astype("float32") for t in graph.get_input_ports()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # every partition compiles: no reference fallback
        got = compile_graph(graph).run(feeds)
    want = reference.run(graph, feeds)
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-5)
