"""Compiling with a tuning database: the best record of each workload is used; a workload
without one warns (or fails in strict mode)."""
import warnings

import numpy as np
import pytest

from tilefuse.autotune import Database, HistoryBest, Record, apply_history_best, extract_tasks
from tilefuse.autotune.dispatch import MissingRecordWarning, MissingTuningRecord
from tilefuse.graph_api import compile_graph, reference
from graph_building import mlp


def non_default(task):
    default = task.template.default_config()
    return next(c for c in (task.space.get(i) for i in range(len(task.space))) if c != default)


def test_best_record_is_used_and_results_stay_right():
    b = mlp(batch=7, sizes=(37, 50, 19))
    g = b.finalize()
    tasks = extract_tasks(g)
    assert [t.template_name for t in tasks] == ["complex", "complex"]
    db = Database(":memory:")
    chosen = {}
    for t in tasks:
        cfg = non_default(t)
        chosen[t.key] = cfg
        db.add(Record.create(t.key, t.name, t.template_name, dict(cfg.values), costs=[1e-3]))
        db.add(Record.create(t.key, t.name, t.template_name, dict(t.template.default_config().values),
                             costs=[2e-3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cg = compile_graph(g, configs=HistoryBest(db))
    used = [step.config for step in cg.steps]
    assert used == [chosen[t.key] for t in tasks]
    feeds = b.feeds()
    want = reference.run(g, feeds)
    got = cg.run(feeds)
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-4)


def test_missing_records_are_one_warning_naming_their_count_or_fail_when_strict():
    g = mlp(batch=3, sizes=(20, 30, 30, 30)).finalize()
    db = Database(":memory:")
    with pytest.warns(MissingRecordWarning, match="no tuning record") as caught:
        cg = compile_graph(g, configs=HistoryBest(db))
    keys = {t.key for t in extract_tasks(g)}
    (missing,) = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    assert len(keys) > 1 and str(missing.message).startswith(f"{len(keys)} workloads have no tuning record")
    assert missing.filename == __file__ and "autotune tune MODEL --db :memory:" in str(missing.message)
    assert all(step.config is None for step in cg.steps)
    with pytest.raises(MissingTuningRecord, match="no tuning record"):
        compile_graph(g, configs=HistoryBest(db, strict=True))


def test_apply_history_best_context_applies_without_db_argument():
    g = mlp(batch=5, sizes=(16, 24)).finalize()
    (task,) = extract_tasks(g)
    db = Database(":memory:")
    cfg = non_default(task)
    db.add(Record.create(task.key, task.name, task.template_name, dict(cfg.values), costs=[1e-4]))
    with apply_history_best(db):
        cg = compile_graph(g)
    assert cg.steps[0].config == cfg
    assert compile_graph(g).steps[0].config is None


def test_second_compile_of_a_tuned_model_does_no_llvm_work(tmp_path, monkeypatch):
    from tilefuse.graph_api import build
    b = mlp(batch=6, sizes=(21, 40))
    g = b.finalize()
    (task,) = extract_tasks(g)
    path = tmp_path / "tuning.db"
    with Database(path) as db:
        db.add(Record.create(task.key, task.name, task.template_name, dict(non_default(task).values), costs=[1e-4]))
    first = compile_graph(g, configs=HistoryBest(path))
    build.clear_memory_cache()           # as in a new process
    from tilefuse.schedule.templates import base
    monkeypatch.setattr(base.Template, "build", lambda *a, **k: pytest.fail("built with LLVM"))
    second = compile_graph(g, configs=HistoryBest(path))
    feeds = b.feeds()
    out = next(iter(reference.run(g, feeds)))
    np.testing.assert_allclose(second.run(feeds)[out], first.run(feeds)[out], rtol=0, atol=0)


def test_a_corrupt_cached_kernel_is_rebuilt(tmp_path):
    from tilefuse.graph_api import build
    g = mlp(batch=6, sizes=(21, 40)).finalize()
    (task,) = extract_tasks(g)
    path = tmp_path / "tuning.db"
    with Database(path) as db:
        db.add(Record.create(task.key, task.name, task.template_name, dict(non_default(task).values), costs=[1e-4]))
    compile_graph(g, configs=HistoryBest(path))
    with Database(path) as db:
        (key,) = [row["key"] for row in db._conn()["kernels"].rows]
        db.cache_kernel(key, b"\x05\x00\x00\x00\x00\x00\x00\x00junk!")
    build.clear_memory_cache()
    with pytest.warns(UserWarning, match="cannot be used here"):
        cg = compile_graph(g, configs=HistoryBest(path))
    assert cg.steps[0].config == non_default(task)
    with Database(path) as db:           # replaced by the kernel the disk cache under it held
        assert build._thaw(db.cached_kernel(key)) is not None
