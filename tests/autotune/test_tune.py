"""The tuning loop: records in the database and the log, resume, budgets, reports."""
import math

import pytest

from tilefuse.autotune import Database, Task, read_log, tune
from tilefuse.autotune.record import config_key, first_measurements
from tilefuse.autotune.tune import _template_signature
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum


def matmul(n, k, m):
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return Task(compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C"))


def scale(n):
    A = placeholder((n,), name="A")
    return Task(compute((n,), lambda i: A[i] * 3.0 + 1.0, name="B"))


def test_records_go_to_db_and_log_and_the_report_adds_up(tmp_path):
    log = tmp_path / "logs" / "run.jsonl"
    db = Database(tmp_path / "t.db")
    task = matmul(19, 23, 37)
    seen = []
    (report,) = tune([task], trials=6, db=db, log=log, tuner="random", seed=1,
                     progress=lambda rep, done, planned: seen.append((done, planned)))
    assert report.trials == 6 and report.resumed == 0 and report.stopped == "trials"
    assert seen[-1] == (6, 6) and seen[0] == (1, 6)          # the default config is measured first
    default = dict(task.template.default_config().values)
    records = db.records(task.key)      # the baseline, then a batch of 5 between two more timings of the default
    assert len(records) == 8 and [dict(r.config) == default for r in records] == [True, True] + [False] * 5 + [True]
    assert len(first_measurements(records)) == 6 == len({r.config_key for r in records})
    contents = read_log(log)
    assert len(contents.records) == 8 and not contents.problems
    assert math.isfinite(report.default_cost) and report.best_cost <= report.default_cost
    assert report.best_config in [dict(r.config) for r in records]
    assert report.speedup >= 1 and report.gflops(report.best_cost) > 0


def test_a_second_run_resumes_and_measures_nothing_new(tmp_path):
    path = tmp_path / "t.db"
    task = scale(1000)
    tune([task], trials=5, db=path, tuner="random", seed=0)
    (again,) = tune([task], trials=5, db=path, tuner="random", seed=0)
    assert again.trials == 0 and again.resumed == 5
    (more,) = tune([task], trials=8, db=path, tuner="random", seed=0)
    assert more.trials == 3 and more.resumed == 5
    with Database(path) as db:
        records = db.records(task.key)
        firsts = {id(r) for r in first_measurements(records)}
        keys = [r.config_key for r in records if id(r) in firsts]
        retimed = [r.config_key for r in records if id(r) not in firsts]
        default_key = config_key(dict(task.template.default_config().values))
    assert len(keys) == 8 == len(set(keys))             # no candidate measured twice
    assert set(retimed) == {default_key}                # only the yardstick is timed again


def test_trials_are_shared_by_weight_and_spaces_run_out():
    tasks = [scale(4000).with_weight(3), matmul(8, 8, 16)]
    reports = tune(tasks, trials=8, tuner="grid", seed=0, scheduler="sequential")
    assert [r.trials for r in reports] == [min(6, len(tasks[0].space)), 8 - reports[0].trials]
    small = scale(17)
    (r,) = tune([small], trials=len(small.space) + 5, tuner="grid")
    assert r.trials == len(small.space) and r.stopped == "space exhausted"


def test_time_budget_stops_tuning():
    (r,) = tune([matmul(30, 30, 30)], trials=100, tuner="random", time_budget=0.01)
    assert r.stopped == "time budget" and r.trials <= 8


def test_xgb_tuner_warm_starts_from_an_earlier_task_of_the_same_template(monkeypatch):
    import sys
    tune_module = sys.modules["tilefuse.autotune.tune"]      # the package's ``tune`` is the function
    a, b = matmul(12, 20, 32), matmul(14, 20, 48)
    assert _template_signature(a) == _template_signature(b)
    given = []
    real = tune_module.make_tuner
    monkeypatch.setattr(tune_module, "make_tuner", lambda *args, **kw: given.append(kw.get("transfer")) or real(*args, **kw))
    reports = tune([a, b], trials=20, tuner="xgb", seed=0, scheduler="sequential")
    assert given[0] is None
    rows, costs, groups = given[1]
    assert len(rows) == len(costs) == len(groups) == 10 and set(groups.tolist()) == {0}
    assert [r.trials for r in reports] == [10, 10]
    assert all(math.isfinite(r.best_cost) for r in reports)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown tuner"):
        tune([scale(8)], trials=1, tuner="genetic")
    with pytest.raises(ValueError, match="trials"):
        tune([scale(8)], trials=-1)
    with pytest.raises(ValueError, match="time_budget"):
        tune([scale(8)], trials=1, time_budget=0)


def test_templates_use_the_best_record_inside_apply_history_best():
    import warnings

    import numpy as np

    from tilefuse.autotune import MissingRecordWarning, Record, apply_history_best
    task = matmul(9, 17, 33)
    other = next(c for c in (task.space.get(i) for i in range(len(task.space)))
                 if c != task.template.default_config())
    db = Database(":memory:")
    db.add(Record.create(task.key, task.name, task.template_name, dict(other.values), costs=[1e-5]))
    with apply_history_best(db):
        assert task.template.chosen_config() == other
        kernel = task.template.build()
    assert task.template.chosen_config() == task.template.default_config()
    a, b = np.ones((9, 17), "float32"), np.ones((17, 33), "float32")
    c = np.zeros((9, 33), "float32")
    kernel(a, b, c)
    assert (c == 17).all()
    with warnings.catch_warnings(record=True) as caught, apply_history_best(Database(":memory:")):
        warnings.simplefilter("always")
        assert scale(64).template.chosen_config() == scale(64).template.default_config()
    assert any(issubclass(w.category, MissingRecordWarning) for w in caught)


def test_the_default_is_measured_even_when_resumed_records_fill_the_budget(tmp_path):
    path = tmp_path / "t.db"
    task = scale(3000)
    default = task.template.default_config()
    others = [c for c in (task.space.get(i) for i in range(len(task.space))) if c != default][:3]
    from tilefuse.autotune import Record
    with Database(path) as db:
        db.add_many(Record.create(task.key, task.name, task.template_name, dict(c.values), costs=[1e-5])
                    for c in others)
    (r,) = tune([task], trials=3, db=path, tuner="random")
    assert r.resumed == 3 and r.trials == 1 and math.isfinite(r.default_cost)


@pytest.mark.parametrize("tuner", ["xgb", "random"])
def test_window_tasks_tune(tmp_path, tuner):
    """Pooling and depthwise convolution have a template of their own, and it takes part in
    tuning: its knobs are measured, its features read, its best config recorded."""
    from tilefuse.tensorir.ops import window
    X = placeholder((1, 4, 17, 23), name="X")
    task = Task(window.pool("max", X, [3, 3], [2, 2], [1, 1], [1, 1], data_format="NCX"))
    assert task.template.name == "window"
    (report,) = tune([task], trials=8, db=Database(tmp_path / "t.db"), log=tmp_path / "w.jsonl", tuner=tuner, seed=0)
    assert report.trials == 8 and report.errors == {} and math.isfinite(report.best_cost)
    assert report.best_config in [dict(c.values) for c in task.template.space]


def tune_beside_another(path, seed, barrier):
    barrier.wait()
    tune([scale(3000)], trials=10, db=path, tuner="random", seed=seed)


def test_two_tuners_on_one_database_measure_no_config_twice(tmp_path):
    import multiprocessing
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    workers = [ctx.Process(target=tune_beside_another, args=(path, seed, barrier)) for seed in (1, 2)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(300)
    assert [p.exitcode for p in workers] == [0, 0]
    with Database(path) as db:
        default_key = config_key(dict(scale(3000).template.default_config().values))
        keys = [r.config_key for r in db.records(scale(3000).key) if r.config_key != default_key]
        assert len(keys) == len(set(keys)) >= 9
        assert db.claims() == []                                 # every claim ended with its record


def test_claims_are_released_when_a_batch_is_not_stored(tmp_path, monkeypatch):
    import importlib
    tune_module = importlib.import_module("tilefuse.autotune.tune")
    db = Database(tmp_path / "t.db")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_module, "measure_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tune([scale(1000)], trials=4, db=db, tuner="random")
    assert db.claims() == [] and db.records() == []


def test_the_log_catches_up_with_the_database(tmp_path):
    path, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    task = scale(1000)
    tune([task], trials=4, db=path, log=log, tuner="random", seed=0)
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:1]) + "\n")                   # a log that lost three records
    (again,) = tune([task], trials=4, db=path, log=log, tuner="random", seed=0)
    assert again.trials == 0
    with Database(path) as db:
        assert {r.identity for r in read_log(log).records} == {r.identity for r in db.records()}


def _is_check(task, configs):
    """Whether a batch is the final check: the default and the candidates, in rounds."""
    import sys
    rounds = sys.modules["tilefuse.autotune.tune"].CHECK_ROUNDS
    default = task.template.default_config()
    width = len(configs) // rounds
    return configs[0] == default and width >= 2 and list(configs) == list(configs[:width]) * rounds


def _check_measured_as(monkeypatch, default_ms, tuned_ms, runner_up_ms=None):
    """Measurements made up: while tuning, the default takes 1 ms and every other config
    0.5 ms (the first measured the fastest); in the final check, the default and the search's
    best take these times, the other candidates ``runner_up_ms`` (1.2 x ``tuned_ms`` unless
    given), rounds spread by 1%."""
    import sys
    from tilefuse.autotune.measure import MeasureResult
    tune_module = sys.modules["tilefuse.autotune.tune"]
    seen, count = [], [0]
    runner_up_ms = 1.2 * tuned_ms if runner_up_ms is None else runner_up_ms

    def fake(task, configs, options=None, executor=None, give_up=None):
        default = task.template.default_config()
        if _is_check(task, configs):
            seen.append(list(configs))
            width = len(configs) // tune_module.CHECK_ROUNDS
            ms = [default_ms, tuned_ms] + [runner_up_ms] * (width - 2)
            return [MeasureResult(dict(c.values), (ms[k % width] * (1 + k // width * 0.01) / 1e3,))
                    for k, c in enumerate(configs)]
        results = []
        for c in configs:
            count[0] += 1
            results.append(MeasureResult(dict(c.values), (1e-3 if c == default else 5e-4 * (1 + count[0] * 1e-3),)))
        return results
    monkeypatch.setattr(tune_module, "measure_batch", fake)
    return seen


@pytest.mark.parametrize("tuned_ms, applied", [(2.0, "default"), (0.995, "default"), (0.5, "tuned")])
def test_the_best_config_is_applied_only_when_it_beats_the_default_side_by_side(tmp_path, monkeypatch,
                                                                                 tuned_ms, applied):
    import sys
    from tilefuse.autotune import HistoryBest
    tune_module = sys.modules["tilefuse.autotune.tune"]
    seen = _check_measured_as(monkeypatch, 1.0, tuned_ms)
    task = matmul(19, 23, 37)
    path = tmp_path / "t.db"
    (report,) = tune([task], trials=6, db=path, tuner="random", seed=1)
    default = task.template.default_config()
    assert report.best_config != dict(default.values)
    assert len(seen) == 1
    width = 1 + tune_module.CHECK_CANDIDATES           # the default and the search's three best, in turn
    assert len(seen[0]) == width * tune_module.CHECK_ROUNDS and seen[0][0] == default
    assert dict(seen[0][1].values) == report.best_config and len(set(seen[0][:width])) == width
    assert report.applied == applied
    assert report.pick.speedup == pytest.approx(1.0 / tuned_ms) and report.pick.spread == pytest.approx(0.01, abs=1e-3)
    with Database(path) as db:
        pick = db.pick(task.key)
        assert pick.config == (report.best_config if applied == "tuned" else dict(default.values))
        assert dict(HistoryBest(db).config_for(task.template).values) == pick.config


def test_a_runner_up_of_the_search_that_is_faster_side_by_side_is_picked(tmp_path, monkeypatch):
    # the search's best measured in a batch that met a quiet machine: side by side, the
    # second and third best are faster than it (0.6 ms against 0.8 ms)
    seen = _check_measured_as(monkeypatch, 1.0, 0.8, runner_up_ms=0.6)
    task = matmul(19, 23, 37)
    (report,) = tune([task], trials=6, db=tmp_path / "t.db", tuner="random", seed=1)
    runner_up = dict(seen[0][2].values)
    assert runner_up != report.best_config
    assert report.pick.config == runner_up and report.applied == "tuned"
    assert report.pick.speedup == pytest.approx(1.0 / 0.6)


def test_one_interrupted_call_does_not_decide_a_round_of_the_check(tmp_path, monkeypatch):
    # the tuned config takes 0.6 ms against the default's 0.9 ms, but one of its ten calls per
    # round took 4 ms (a neighbour on the machine): the mean would say 0.94 ms and keep the default
    import sys
    from tilefuse.autotune.measure import MeasureResult
    tune_module = sys.modules["tilefuse.autotune.tune"]

    def fake(task, configs, options=None, executor=None, give_up=None):
        default = task.template.default_config()
        if _is_check(task, configs):
            width = len(configs) // tune_module.CHECK_ROUNDS
            return [MeasureResult(dict(c.values), (0.9e-3,) * 10 if k % width == 0 else
                                  (0.6e-3,) * 9 + (4e-3,) if k % width == 1 else (1e-3,) * 10)
                    for k, c in enumerate(configs)]
        return [MeasureResult(dict(c.values), (1e-3 if c == default else 5e-4,)) for c in configs]
    monkeypatch.setattr(tune_module, "measure_batch", fake)
    (report,) = tune([matmul(19, 23, 37)], trials=6, db=tmp_path / "t.db", tuner="random", seed=1)
    assert report.applied == "tuned" and report.pick.speedup == pytest.approx(1.5)


def test_a_run_that_measures_nothing_new_keeps_the_pick(tmp_path, monkeypatch):
    seen = _check_measured_as(monkeypatch, 1.0, 0.5)
    task = matmul(19, 23, 37)
    tune([task], trials=6, db=tmp_path / "t.db", tuner="random", seed=1)
    checks = len(seen)
    tune([task], trials=6, db=tmp_path / "t.db", tuner="random", seed=1)
    assert len(seen) == checks


def test_a_damaged_pick_falls_back_to_the_best_record_with_a_warning(tmp_path):
    from tilefuse.autotune import HistoryBest
    from tilefuse.autotune.database import Pick
    task = matmul(8, 8, 16)
    path = tmp_path / "t.db"
    tune([task], trials=4, db=path, tuner="random", seed=0)
    with Database(path) as db:
        db.set_pick(task.key, db.best(task.key).target_key, Pick({"tile": 1}, 1.0, 1.0, 0.0))
        db._conn().execute("UPDATE picks SET config = 'not json'")
        db._conn().conn.commit()
        with pytest.warns(UserWarning, match="pick .* is damaged"):
            assert db.pick(task.key) is None
        with pytest.warns(UserWarning, match="damaged"):
            config = HistoryBest(db).config_for(task.template)
        assert dict(config.values) == dict(db.best(task.key).config)


def test_the_gradient_scheduler_gives_the_trials_to_the_task_that_keeps_improving(monkeypatch):
    # one task saves 20 us with every config it measures, the other never saves anything: after
    # both baselines and a first look at each, the batches go to the one that keeps saving
    import sys
    from tilefuse.autotune.measure import MeasureResult
    tune_module = sys.modules["tilefuse.autotune.tune"]
    improving, flat = matmul(16, 16, 32), matmul(16, 16, 48)
    seen = {improving.key: 0, flat.key: 0}

    def fake(task, configs, options=None, executor=None, give_up=None):
        out = []
        for c in configs:
            seen[task.key] += 1
            cost = 1e-3 * max(0.2, 1 - 0.02 * seen[task.key]) if task.key == improving.key else 1e-3
            out.append(MeasureResult(dict(c.values), (cost,)))
        return out
    monkeypatch.setattr(tune_module, "measure_batch", fake)
    reports = tune([flat, improving], trials=40, tuner="random", seed=0, batch_size=4)
    assert sum(r.trials for r in reports) == 40 and all(math.isfinite(r.default_cost) for r in reports)
    assert reports[1].trials >= 3 * reports[0].trials, [r.trials for r in reports]
    assert reports[0].stopped == reports[1].stopped == "trials"


def test_the_gradient_scheduler_shares_a_time_budget_and_stops_every_task():
    reports = tune([matmul(30, 30, 30), scale(5000)], trials=500, tuner="random", time_budget=0.5)
    assert all(r.stopped == "time budget" for r in reports)
    assert all(math.isfinite(r.default_cost) for r in reports)


def test_an_unknown_scheduler_is_refused():
    with pytest.raises(ValueError, match="unknown scheduler"):
        tune([scale(8)], trials=1, scheduler="fifo")


def test_records_stored_before_the_winograd_knob_resume_and_apply_as_direct_convolutions(tmp_path):
    # a 3x3 channels-last convolution's records from before the knob existed lack it: they
    # are read as winograd 0 (direct), by the tuner resuming and by HistoryBest
    from tilefuse.autotune import HistoryBest
    from tilefuse.autotune.record import Record
    from tilefuse.tensorir import ops
    x = placeholder((1, 6, 6, 8), name="x")
    w = placeholder((3, 3, 8, 16), name="w", constant=True)
    task = Task(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))
    old = {k: v for k, v in task.template.default_config().values.items() if k not in ("winograd", "winograd_fused")}
    old["tile_j"] = 8
    path = tmp_path / "t.db"
    with Database(path) as db:
        db.add(Record.create(task.key, task.name, task.template_name, old, costs=[1e-9]))
        assert HistoryBest(db).config_for(task.template).values == {**old, "winograd": 0, "winograd_fused": False}
    (report,) = tune([task], trials=2, db=path, tuner="random", seed=0)
    assert report.resumed == 1 and report.best_config == old


def test_a_3x3_convolution_measures_winograd_at_each_tile_size_in_its_first_batch():
    # a random point of the 10^4-point space seldom falls among Winograd's few hundred:
    # the template's starting points put them in the first batch after the default
    from tilefuse.tensorir import ops
    x = placeholder((1, 9, 7, 8), name="x")
    w = placeholder((3, 3, 8, 16), name="w", constant=True)
    task = Task(ops.relu(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1])))
    db = Database(":memory:")
    (report,) = tune([task], trials=7, db=db, tuner="random", seed=0, batch_size=8)
    measured = [r.config for r in first_measurements(db.records(task.key))]
    assert [(c["winograd"], c["winograd_fused"]) for c in measured] == [(0, False), (2, False), (2, True), (3, False),
                                                                        (3, True), (4, False), (4, True)]
    assert all(r.is_ok for r in db.records(task.key)), [r.error_msg for r in db.records(task.key)]


def test_candidates_rank_against_the_default_timed_in_their_own_batch(monkeypatch):
    import importlib
    from tilefuse.autotune.measure import MeasureResult
    tune_module = importlib.import_module("tilefuse.autotune.tune")
    task = scale(4000)
    default = task.template.default_config()
    costs, batches = {default: 1e-3}, []
    own = iter([0.9e-3, 0.95e-3, 0.6e-3, 1.0e-3])    # the candidates' costs on a steady machine

    def measure(task_, configs, options, executor, give_up=None):
        batches.append(list(configs))
        slow = 2.0 if len(batches) == 3 else 1.0      # the third batch meets a machine twice as slow
        for c in configs:
            if c not in costs:
                costs[c] = next(own)
        return [MeasureResult(c.values, (costs[c] * slow,)) for c in configs]
    monkeypatch.setattr(tune_module, "measure_batch", measure)
    db = Database(":memory:")
    (report,) = tune([task], trials=5, db=db, tuner="grid", batch_size=2)
    assert [len(b) for b in batches[:3]] == [1, 4, 4] and all(b[0] == b[-1] == default for b in batches[:3])
    fast = next(c for c, cost in costs.items() if cost == 0.6e-3)       # measured at 1.2e-3 in the slow batch
    assert report.best_config == dict(fast.values) and report.best_cost == pytest.approx(0.6e-3)
    assert report.default_cost == pytest.approx(1e-3)            # the median of the default's timings
    records = db.records(task.key)
    assert max(r.mean_cost for r in records if r.config_key == config_key(dict(fast.values))) == pytest.approx(1.2e-3)
