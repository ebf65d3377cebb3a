"""Fuzzing tuning logs and databases: mutated log lines, truncated, overwritten, foreign,
read-only databases and the rest of ``fuzz_store.STORE_SCENARIOS``, through ``autotune.log``,
``autotune.database`` and the ``autotune`` command: exit 0/1/2/3 with a message, no traceback,
a damaged database refused and untouched, log and database never diverging."""
import pytest

from fuzz_cases import SLICE_SEEDS, make_case


@pytest.mark.parametrize("seed", SLICE_SEEDS["store"], ids=lambda seed: f"seed-{seed}")
def test_damaged_logs_and_databases_are_refused_cleanly_and_left_consistent(seed):
    case = make_case("store", seed)
    outcome = case.run()
    assert outcome.allowed, case.report(outcome)
