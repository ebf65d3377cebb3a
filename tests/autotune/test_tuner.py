"""Tuners: no config twice, whole spaces exhausted, errors handled, seeded runs reproducible,
the xgb tuner beating random search on a real template space, transfer warm start."""
import math

import numpy as np
import pytest

from tilefuse.autotune.features import FeatureError, features_of
from tilefuse.autotune.tuner import EarlyStopping, GridTuner, Measured, RandomTuner, XGBTuner, make_tuner
from tilefuse.schedule import template_for
from tilefuse.schedule.space import Config, ConfigError, ConfigSpace
from tilefuse.schedule.templates.complex import PREFETCH_BYTES, TILE_I, TILE_J
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum


def matmul_template(n, k, m):
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return template_for(compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C"))


def synthetic_cost(cfg) -> float:
    """A made-up matmul cost: best at a 96-element tile, order "ji", packed."""
    return (1.0 + (math.log2(cfg["tile_i"] * cfg["tile_j"]) - math.log2(96)) ** 2
            + 0.5 * (cfg["order"] == "ij") + 0.7 * (not cfg["pack"]))


class CachedFeatures:
    """``features_of`` of one template, computed once per config and counted."""

    def __init__(self, template):
        self.template, self.rows, self.calls = template, {}, 0

    def __call__(self, cfg):
        key = cfg.to_json()
        if key not in self.rows:
            self.calls += 1
            self.rows[key] = features_of(self.template, cfg)
        return self.rows[key]


MATMUL = matmul_template(96, 64, 160)
MATMUL_FEATURES = CachedFeatures(MATMUL)


def run(tuner, cost, trials, batch=8):
    """Tune until ``trials`` measurements; return the configs in measurement order."""
    measured = []
    while tuner.trials < trials and tuner.has_next():
        configs = tuner.next_batch(batch)
        tuner.update(configs, [Measured((cost(c),)) for c in configs])
        measured += configs
    return measured


def knob_space():
    s = ConfigSpace()
    s.define_knob("a", [1, 2, 3, 4, 5])
    s.define_knob("b", ["x", "y", "z"])
    s.define_knob("c", [False, True])
    return s


# ------------------------------------------------------------------------------ results


# ------------------------------------------------------------------------------ grid and random


def test_grid_walks_the_space_in_index_order_exactly_once():
    s = knob_space()
    tuner = make_tuner("grid", s)
    seen = []
    while tuner.has_next():
        seen += tuner.next_batch(7)
    assert [s.index_of(c) for c in seen] == list(range(len(s)))
    assert tuner.next_batch(3) == []


@pytest.mark.parametrize("name", ["random", "grid"])
def test_measured_configs_are_never_proposed(name):
    s = knob_space()
    tuner = make_tuner(name, s, seed=1)
    resumed = [s.get(0), s.get(5).values, s.get(29)]          # records of an earlier run
    tuner.update(resumed, [Measured((1.0,))] * 3)
    proposed = []
    while tuner.has_next():
        proposed += tuner.next_batch(4)
    indices = [s.index_of(c) for c in proposed]
    assert len(indices) == len(set(indices)) == len(s) - 3
    assert not {0, 5, 29} & set(indices)


def test_random_exhausts_the_space_without_repeats_and_is_seeded():
    s = knob_space()
    orders = []
    for seed in (3, 3, 4):
        tuner = RandomTuner(s, seed=seed)
        picks = []
        while tuner.has_next():
            picks += [s.index_of(c) for c in tuner.next_batch(4)]
        assert sorted(picks) == list(range(len(s)))
        orders.append(picks)
    assert orders[0] == orders[1] and orders[0] != orders[2]


def test_random_in_a_huge_space():
    s = ConfigSpace()
    for k in range(8):
        s.define_knob(f"k{k}", list(range(10)))                # 10**8 configs
    tuner = RandomTuner(s, seed=0)
    picks = [s.index_of(c) for _ in range(5) for c in tuner.next_batch(20)]
    assert len(set(picks)) == 100


def test_best_ignores_errors():
    s = knob_space()
    tuner = GridTuner(s)
    configs = tuner.next_batch(4)
    assert tuner.best is None and tuner.best_cost == math.inf
    tuner.update(configs[:2], [Measured((), "compile", "boom"), Measured((), "timeout")])
    assert tuner.best is None and tuner.best_cost == math.inf
    tuner.update(configs[2:], [Measured((3.0,)), Measured((2.0, 2.0))])
    assert tuner.best == configs[3] and tuner.best_cost == 2.0 and tuner.trials == 4


def test_bad_updates_and_batches():
    s = knob_space()
    tuner = RandomTuner(s)
    with pytest.raises(ValueError, match="2 configs but 1 results"):
        tuner.update([s.get(0), s.get(1)], [Measured((1.0,))])
    with pytest.raises(ConfigError):
        tuner.update([Config({"a": 9, "b": "x", "c": True})], [Measured((1.0,))])
    with pytest.raises(ValueError, match="batch size"):
        tuner.next_batch(-1)
    with pytest.raises(TypeError, match="ConfigSpace"):
        RandomTuner([1, 2, 3])


# ------------------------------------------------------------------------------ xgb


def test_xgb_proposes_better_configs_than_random_on_a_real_template_space():
    for seed in range(3):
        xgb = XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=seed, min_train=16)
        measured = run(xgb, synthetic_cost, 48)
        guided = np.mean([synthetic_cost(c) for c in measured[24:48]])   # once the model leads
        drawn = np.mean([synthetic_cost(c) for c in run(RandomTuner(MATMUL.space, seed=seed), synthetic_cost, 48)[24:48]])
        assert xgb.model.is_trained
        assert guided < 0.7 * drawn, (seed, guided, drawn)
        assert xgb.best_cost <= min(synthetic_cost(c) for c in measured)


def test_xgb_reaches_the_optimum_in_fewer_trials_than_random():
    best = min(synthetic_cost(c) for c in MATMUL.space)

    def trials_to_best(tuner):
        while tuner.best_cost > best:
            configs = tuner.next_batch(8)
            tuner.update(configs, [Measured((synthetic_cost(c),)) for c in configs])
        return tuner.trials
    xgb = [trials_to_best(XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=s)) for s in range(8)]
    rnd = [trials_to_best(RandomTuner(MATMUL.space, seed=s)) for s in range(8)]
    assert sum(xgb) < sum(rnd)


def test_xgb_is_reproducible_with_a_seed():
    runs = [[c.to_json() for c in run(XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=s, min_train=8),
                                      synthetic_cost, 40)] for s in (5, 5, 6)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_xgb_exhausts_a_space_exactly_once():
    A = placeholder((4096,), name="A")
    t = template_for(compute((4096,), lambda i: A[i] * 2.0, name="B"))          # 32 configs
    tuner = XGBTuner(t.space, CachedFeatures(t), seed=0, min_train=4, retrain_every=2)
    measured = run(tuner, lambda c: 1e-6 * c["vector"] / c["unroll"], 10 ** 6, batch=5)
    indices = [t.space.index_of(c) for c in measured]
    assert sorted(indices) == list(range(len(t.space)))
    assert not tuner.has_next() and tuner.next_batch(5) == []
    assert tuner.model.is_trained


def test_xgb_goes_on_through_measurement_errors():
    def cost_or_error(cfg):
        return None if cfg["order"] == "ji" else synthetic_cost(cfg)      # half the space fails

    tuner = XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=1, min_train=8)
    errors = 0
    while tuner.trials < 64:
        configs = tuner.next_batch(8)
        results = []
        for c in configs:
            cost = cost_or_error(c)
            errors += cost is None
            results.append(Measured((), "runtime", "crash") if cost is None else Measured((cost,)))
        tuner.update(configs, results)
    assert errors > 0 and tuner.model.is_trained
    assert tuner.best["order"] == "ij" and math.isfinite(tuner.best_cost)


def test_configs_without_features_are_only_drawn_at_random():
    def featurize(cfg):
        if cfg["tile_j"] == 64:
            raise FeatureError(f"cannot lower {cfg.to_json()}")
        return MATMUL_FEATURES(cfg)

    tuner = XGBTuner(MATMUL.space, featurize, seed=2, min_train=8, epsilon=0.0)
    measured = run(tuner, synthetic_cost, 48)
    assert tuner.feature_errors and all("cannot lower" in m for m in tuner.feature_errors.values())
    # with epsilon 0, after the random start every proposal comes from the model
    assert all(c["tile_j"] != 64 for c in measured[16:])
    assert len({c.to_json() for c in measured}) == len(measured)


def test_transfer_records_warm_start_the_model():
    other = matmul_template(128, 96, 192)             # another task of the same template
    other_features = CachedFeatures(other)
    configs = other.space.sample(400, seed=0)
    transfer = (np.stack([other_features(c) for c in configs]),
                np.array([100.0 * synthetic_cost(c) for c in configs]), np.zeros(len(configs), dtype=int))
    space_mean = np.mean([synthetic_cost(c) for c in MATMUL.space])
    for seed in range(3):
        tuner = XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=seed, transfer=transfer, epsilon=0.0)
        first = tuner.next_batch(8)
        assert tuner.model.is_trained and tuner.trials == 0
        assert np.mean([synthetic_cost(c) for c in first]) < 0.5 * space_mean
        cold = XGBTuner(MATMUL.space, MATMUL_FEATURES, seed=seed)
        cold.next_batch(8)
        assert not cold.model.is_trained


def test_transfer_from_another_template_is_rejected():
    transfer = (np.zeros((4, 7)), np.ones(4), np.zeros(4, dtype=int))
    tuner = XGBTuner(MATMUL.space, MATMUL_FEATURES, transfer=transfer)
    with pytest.raises(ValueError, match="same template"):
        tuner.next_batch(4)
    with pytest.raises(ValueError, match="triple"):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, transfer=(np.zeros((4, 7)), np.ones(4)))
    with pytest.raises(ValueError, match="one cost and one group"):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, transfer=(np.zeros((4, 7)), np.ones(3), np.zeros(4, dtype=int)))
    with pytest.raises(ValueError, match="integers"):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, transfer=(np.zeros((2, 7)), np.ones(2), np.array([0.5, 1.5])))
    with pytest.raises(ValueError, match="> 0"):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, transfer=(np.zeros((2, 7)), [1.0, -1.0], [0, 0]))


def test_xgb_settings_are_checked():
    with pytest.raises(ValueError, match="epsilon"):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, epsilon=1.5)
    with pytest.raises(TypeError, match="callable"):
        XGBTuner(MATMUL.space, "features")
    with pytest.raises(ValueError):
        XGBTuner(MATMUL.space, MATMUL_FEATURES, plan_size=0)


# ------------------------------------------------------------------------------ helpers


def test_early_stopping_counts_measurements_since_the_best():
    stop = EarlyStopping(patience=3)
    assert [stop.record(c) for c in (5.0, math.inf, 4.0, 4.5, 4.0, math.inf)] == [False] * 5 + [True]
    assert stop.best_cost == 4.0 and stop.since_best == 3
    relative = EarlyStopping(patience=2, min_improvement=0.1)
    assert not relative.record_results([Measured((1.0,)), Measured((0.95,))])   # < 10% better
    assert relative.record_results([Measured((), "crash")])
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(0)
    with pytest.raises(ValueError, match="min_improvement"):
        EarlyStopping(3, min_improvement=1.0)


def test_make_tuner_by_name():
    s = knob_space()
    assert isinstance(make_tuner("grid", s), GridTuner)
    assert isinstance(make_tuner("random", s, seed=2), RandomTuner)
    assert isinstance(make_tuner("xgb", MATMUL.space, MATMUL_FEATURES, seed=2, epsilon=0.2), XGBTuner)
    with pytest.raises(ValueError, match="unknown tuner 'annealing'"):
        make_tuner("annealing", s)
    with pytest.raises(ValueError, match="featurize"):
        make_tuner("xgb", s)
    with pytest.raises(ValueError, match="no options"):
        make_tuner("random", s, epsilon=0.1)


@pytest.mark.parametrize("name", ["grid", "random", "xgb"])
def test_points_the_rules_rule_out_are_never_proposed(name):
    s = ConfigSpace()
    s.define_knob("a", [0, 1, 2, 3])
    s.define_knob("b", [0, 1, 2])
    s.define_rule(lambda v: v["a"] + v["b"] != 3)           # 3 of 12 points ruled out
    featurize = lambda c: np.array([c["a"], c["b"]], "float32")    # noqa: E731
    tuner = make_tuner(name, s, featurize=featurize, seed=1) if name == "xgb" else make_tuner(name, s, seed=1)
    measured = run(tuner, lambda c: 1.0 + c["a"] * 0.1 + c["b"] * 0.01, 100, batch=4)
    pairs = sorted((c["a"], c["b"]) for c in measured)
    assert len(pairs) == 9 and len(set(pairs)) == 9 and all(a + b != 3 for a, b in pairs)
    assert not tuner.has_next() and tuner.next_batch(4) == []


def test_winograd_points_of_a_convolution_skip_the_pack_knob():
    from tilefuse.tensorir import ops
    x = placeholder((1, 8, 8, 16), name="x")
    w = placeholder((3, 3, 16, 32), name="w", constant=True)
    space = template_for(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1])).space
    searchable = [space.get(i).values for i in range(len(space)) if space.searchable(i)]
    assert all(not (v["winograd"] and v["pack"]) for v in searchable)
    assert any(v["winograd"] == 0 and v["pack"] for v in searchable)
    # Winograd's products take neither blocks nor unrolling: one searchable point per tile, order and
    # prefetch distance, and fused, per tile that divides a row of tiles (8 pixels: 4 tiles of 2, 3 of 3, 2 of 4)
    winograd = [v for v in searchable if v["winograd"]]
    assert all(v["block_i"] == v["block_j"] == v["unroll_k"] == 1 for v in winograd)
    assert sum(not v["winograd_fused"] for v in winograd) == 3 * len(TILE_I) * len(TILE_J) * 2 * len(PREFETCH_BYTES)
    assert sorted({(v["winograd"], v["tile_i"]) for v in winograd if v["winograd_fused"]}) == \
        [(2, 1), (2, 2), (2, 4), (3, 1), (4, 1), (4, 2)]
    assert not any(v["winograd_fused"] for v in searchable if not v["winograd"])


def test_a_large_space_is_walked_on_knob_values_and_only_the_plans_are_lowered():
    lowered = set()

    def featurize(cfg):
        lowered.add(cfg.to_json())
        return MATMUL_FEATURES(cfg)
    tuner = XGBTuner(MATMUL.space, featurize, seed=0, min_train=8, plan_size=32)
    assert len(MATMUL.space) > tuner.search_options["exhaustive_threshold"]
    measured = run(tuner, synthetic_cost, 40)
    assert tuner.knob_model.is_trained and len({c.to_json() for c in measured}) == 40
    assert len(lowered) <= 40 + 4 * 4 * 8      # the measured configs and four batches per plan
    random_mean = np.mean([synthetic_cost(c) for c in MATMUL.space.sample(200, seed=1)])
    assert np.mean([synthetic_cost(c) for c in measured[8:]]) < random_mean      # the walk finds better ones


@pytest.mark.parametrize("name", ["random", "grid", "xgb"])
def test_start_with_configs_come_first_once_and_the_tuner_fills_the_batch(name):
    space = MATMUL.space
    first = [space.get(7), space.get(3), space.get(7)]
    tuner = make_tuner(name, space, featurize=MATMUL_FEATURES, seed=0)
    tuner.update([space.get(3)], [Measured((1.0,))])          # measured already: not again
    tuner.start_with(first)
    batch = tuner.next_batch(4)
    assert batch[0] == space.get(7) and space.get(3) not in batch and len(batch) == 4
    assert len({space.index_of(c) for c in batch}) == 4
    later = tuner.next_batch(8)
    assert not {space.index_of(c) for c in later} & {3, 7}
    with pytest.raises(ConfigError):
        tuner.start_with([Config({"tile_i": 999})])


def test_xgb_computes_the_rows_a_plan_needs_at_once_with_featurize_many():
    import functools
    from tilefuse.autotune.features import FeatureError, features_of
    t = template_for(compute((4096,), lambda i: placeholder((4096,), name="A")[i] * 2.0, name="B"))
    asked, bad = [], t.space.get(3)

    def many(configs):
        asked.append(len(configs))
        return [FeatureError("no") if c == bad else features_of(t, c) for c in configs]
    tuner = XGBTuner(t.space, functools.partial(features_of, t), seed=0, min_train=4, featurize_many=many)
    for _ in range(3):
        batch = tuner.next_batch(4)
        tuner.update(batch, [Measured((1e-6 * c["vector"] * c["unroll"],)) for c in batch])
    assert asked and max(asked) > 1 and tuner.model.is_trained
    fresh = XGBTuner(t.space, functools.partial(features_of, t), seed=0, featurize_many=many)
    fresh._compute_features([0, t.space.index_of(bad)])        # two rows missing: one call
    assert asked[-1] == 2
    assert np.array_equal(fresh.features(0), features_of(t, t.space.get(0)))
    assert fresh.features(t.space.index_of(bad)) is None and "no" in fresh.feature_errors[t.space.index_of(bad)]
    with pytest.raises(TypeError, match="featurize_many"):
        XGBTuner(t.space, functools.partial(features_of, t), featurize_many=3)
