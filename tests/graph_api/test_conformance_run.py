"""Every conformance graph (oneDNN's own op and pattern graphs) loads, partitions, compiles and
runs, matching the reference interpreter wherever the reference can run it. An op we do not
compile runs as an unsupported partition in the reference; nothing may crash."""
import collections
import warnings
from pathlib import Path

import numpy as np
import pytest

from tilefuse.graph_api import GraphError, compile_graph, load_json, reference

ROOT = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance" / "onednn_graph"
FILES = sorted(ROOT.rglob("*.json")) if ROOT.is_dir() else []
pytestmark = pytest.mark.skipif(not FILES, reason="shared conformance graphs are not beside the checkout")
OUTCOMES = collections.Counter()


def feeds_for(graph):
    """Random inputs of the ports' shapes and dtypes (positive floats: variances, logs, sqrt);
    None when an input's shape or type is unknown."""
    rng = np.random.default_rng(0)
    feeds = {}
    for t in graph.get_input_ports():
        if not t.is_known():
            return None
        try:
            dtype = t.dtype.numpy
        except GraphError:
            return None
        if dtype.kind == "f":
            feeds[t.id] = (np.abs(rng.standard_normal(t.shape)) + 0.5).astype(dtype)
        elif dtype.kind == "b":
            feeds[t.id] = rng.random(t.shape) > 0.5
        else:
            feeds[t.id] = rng.integers(0, 4, t.shape).astype(dtype)
    return feeds


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_graph_runs_like_the_reference(path):
    graph = load_json(path)
    feeds = feeds_for(graph)
    if feeds is None:
        OUTCOMES["inputs of unknown shape or type"] += 1
        pytest.skip("an input has an unknown shape or a type numpy lacks")
    try:
        expected = reference.run(graph, feeds)
    except GraphError as err:
        OUTCOMES["the reference does not run it"] += 1
        # the graph must still partition without crashing
        assert graph.get_partitions()
        pytest.skip(f"reference: {err}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_graph(graph).run(feeds)
    assert got.keys() == expected.keys()
    for tid, want in expected.items():
        np.testing.assert_allclose(got[tid], want, rtol=1e-3, atol=1e-3, equal_nan=True, err_msg=f"output {tid}")
    OUTCOMES["match"] += 1


def test_zz_report_counts(capsys):
    with capsys.disabled():
        print(f"\nconformance graphs: {len(FILES)} files, {dict(OUTCOMES)}")
