"""Fuzzing ``CompiledGraph.run``: wrong shapes, dtypes, keys, lists and non-arrays must be refused
cleanly; NaN, non-contiguous, Fortran-order, read-only, unaligned and broadcast arrays must run
equal to the reference interpreter; feeds stay unmodified and the compiled graph keeps working."""
import pytest

from fuzz_cases import SLICE_SEEDS, make_case


@pytest.mark.parametrize("seed", SLICE_SEEDS["feeds"], ids=lambda seed: f"seed-{seed}")
def test_odd_feeds_are_refused_cleanly_or_run_like_the_reference(seed):
    case = make_case("feeds", seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)
