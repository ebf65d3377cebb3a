"""The xgboost ranking cost model: it learns a known ranking, groups tasks, is deterministic,
and rejects bad input."""
import math

import numpy as np
import pytest

from tilefuse.autotune.cost_model import OBJECTIVES, XGBCostModel, relevance


def kendall_tau(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    i, j = np.triu_indices(len(a), 1)
    return float(np.mean(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])))


def synthetic(n, seed, scale=1.0, width=10):
    """Rows of random features; the cost is a known, non-linear function of three of them."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, width))
    costs = scale * np.exp(-(2.0 * x[:, 0] + x[:, 1] - 2.0 * (x[:, 2] - 0.5) ** 2))
    return x, costs


def test_relevance_is_min_over_cost_per_group_and_zero_for_errors():
    rel = relevance([4.0, 2.0, math.inf, math.nan, 300.0, 100.0], groups=[0, 0, 0, 0, 7, 7])
    np.testing.assert_allclose(rel, [0.5, 1.0, 0.0, 0.0, 1 / 3, 1.0])
    np.testing.assert_allclose(relevance([math.inf, math.inf]), [0.0, 0.0])


@pytest.mark.parametrize("costs", [[1.0, 0.0], [1.0, -2.0]])
def test_relevance_rejects_non_positive_costs(costs):
    with pytest.raises(ValueError, match="> 0"):
        relevance(costs)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_learns_a_synthetic_ranking_and_beats_random(objective):
    x, costs = synthetic(300, seed=0)
    model = XGBCostModel(seed=0, objective=objective).fit(x[:200], costs[:200])
    scores = model.predict(x[200:])
    held = costs[200:]
    assert kendall_tau(scores, -held) > 0.6
    # of the 10 truly best held-out rows, most are among the 20 the model likes best
    # (a random ranking would catch 2 on average)
    true_top = set(np.argsort(held)[:10])
    predicted_top = set(np.argsort(-scores)[:20])
    assert len(true_top & predicted_top) >= 6


def test_failed_candidates_rank_last():
    x, costs = synthetic(300, seed=1)
    costs = np.where(x[:, 3] > 0.7, np.inf, costs)          # a region of compile errors
    model = XGBCostModel(seed=0).fit(x[:200], costs[:200])
    scores = model.predict(x[200:])
    failed = ~np.isfinite(costs[200:])
    best = np.argsort(costs[200:])[:10]
    assert failed.any() and scores[failed].mean() < scores[best].mean()
    assert np.mean(np.isin(np.argsort(-scores)[:10], np.flatnonzero(failed))) <= 0.1


def test_groups_put_tasks_of_very_different_sizes_on_one_scale():
    # task 1 runs 1000x longer than task 0; each is ranked within its own group
    x0, c0 = synthetic(150, seed=2)
    x1, c1 = synthetic(150, seed=3, scale=1000.0)
    x = np.vstack([x0[:100], x1[:100]])
    costs = np.concatenate([c0[:100], c1[:100]])
    groups = np.array([0] * 100 + [1] * 100)
    model = XGBCostModel(seed=0).fit(x, costs, groups)
    assert kendall_tau(model.predict(x0[100:]), -c0[100:]) > 0.5
    assert kendall_tau(model.predict(x1[100:]), -c1[100:]) > 0.5


def test_group_rows_may_come_in_any_order():
    x, costs = synthetic(120, seed=9)
    groups = np.arange(120) % 3                          # interleaved task ids
    order = np.argsort(groups, kind="stable")
    shuffled = XGBCostModel(seed=0).fit(x, costs, groups).predict(x)
    grouped = XGBCostModel(seed=0).fit(x[order], costs[order], groups[order]).predict(x)
    np.testing.assert_allclose(shuffled, grouped)


def test_transfer_from_another_task_ranks_a_new_task_before_it_has_data():
    # same cost function, a different task: other feature distribution and 50x the cost
    x_other, c_other = synthetic(200, seed=4, scale=50.0)
    x_new, c_new = synthetic(100, seed=5)
    model = XGBCostModel(seed=0).fit(x_other, c_other, groups=np.repeat([3, 4], 100))
    assert kendall_tau(model.predict(x_new), -c_new) > 0.5


def test_same_seed_same_model():
    x, costs = synthetic(150, seed=6)
    a = XGBCostModel(seed=5).fit(x, costs).predict(x)
    b = XGBCostModel(seed=5).fit(x, costs).predict(x)
    np.testing.assert_array_equal(a, b)


def test_update_refits_on_all_rows():
    x, costs = synthetic(200, seed=7)
    model = XGBCostModel(seed=0).fit(x[:50], costs[:50])
    assert model.is_trained and model.num_rows == 50
    model.update(x[50:], costs[50:])
    assert model.num_rows == 200
    whole = XGBCostModel(seed=0).fit(x, costs)
    np.testing.assert_allclose(model.predict(x), whole.predict(x))


def test_missing_feature_values_are_allowed():
    x, costs = synthetic(100, seed=8)
    x[::7, 4] = np.nan
    scores = XGBCostModel(seed=0).fit(x, costs).predict(x)
    assert np.all(np.isfinite(scores))


def test_untrained_model_cannot_predict():
    model = XGBCostModel()
    assert not model.is_trained
    with pytest.raises(RuntimeError, match="not trained"):
        model.predict(np.zeros((2, 3)))


@pytest.mark.parametrize("features, costs, groups, message", [
    (np.zeros(5), np.ones(5), None, "2-D"),
    (np.zeros((5, 2)), np.ones(4), None, "5 feature rows for 4 costs"),
    (np.zeros((0, 2)), np.ones(0), None, "no training rows"),
    (np.zeros((3, 2)), np.ones(3), [0, 1], "2 group ids for 3 costs"),
    (np.zeros((3, 2)), np.ones(3), [0.5, 1.0, 1.0], "integers"),
    (np.zeros((3, 2)), [1.0, -1.0, 1.0], None, "> 0"),
])
def test_bad_training_data_is_rejected(features, costs, groups, message):
    with pytest.raises(ValueError, match=message):
        XGBCostModel().fit(features, costs, groups)


def test_bad_settings_and_shapes_are_rejected():
    with pytest.raises(ValueError, match="objective"):
        XGBCostModel(objective="rank:magic")
    with pytest.raises(ValueError):
        XGBCostModel(num_rounds=0)
    model = XGBCostModel().fit(np.zeros((4, 3)) + np.arange(4)[:, None], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="3 features"):
        model.predict(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="3"):
        model.update(np.zeros((2, 5)), [1.0, 1.0])
