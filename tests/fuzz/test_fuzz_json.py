"""Fuzzing ``graph_api.load_json``: the bundled oneDNN Graph JSON files (and shrunk copies, and
small ONNX models written as JSON) with keys dropped, wrong types, bad dims, unknown kinds,
dangling or duplicate ids, cycles, bad text. Each must be refused cleanly (naming the file) or
compile and run equal to the reference interpreter."""
import pytest

from fuzz_cases import SLICE_SEEDS, make_case


@pytest.mark.parametrize("seed", SLICE_SEEDS["json"], ids=lambda seed: f"seed-{seed}")
def test_mutated_json_graphs_are_refused_cleanly_or_run_like_the_reference(seed):
    case = make_case("json", seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)
