"""Fuzzing the ONNX front end: mutated bytes of bundled and small models (fed as bytes and as a
file), and models built wrong on purpose or valid with random shapes. Each case must end in an
allowed outcome: a clean error naming the model, or outputs equal to onnxruntime's (see
``fuzz_outcomes``); ``benchmarks/fuzz_campaign.py`` runs many more seeds."""
import pytest

from fuzz_cases import SLICE_SEEDS, make_case


def _seed_id(seed):
    return f"seed-{seed}"


@pytest.mark.parametrize("seed", SLICE_SEEDS["onnx-bytes"], ids=_seed_id)
def test_mutated_onnx_bytes_are_refused_cleanly_or_run_like_onnxruntime(seed):
    case = make_case("onnx-bytes", seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)


@pytest.mark.parametrize("seed", SLICE_SEEDS["onnx-models"], ids=_seed_id)
def test_generated_onnx_models_are_refused_cleanly_or_run_like_onnxruntime(seed):
    case = make_case("onnx-models", seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)
