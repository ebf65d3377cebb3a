"""autotune.InferenceSession: a session compiled with a tuning database's best configs."""
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

from tilefuse.autotune import Database, InferenceSession, Record, extract_tasks  # noqa: E402
from tilefuse.graph_api import from_onnx  # noqa: E402
from tilefuse.graph_api import InferenceSession as DefaultSession  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "examples" / "resnet_block.onnx"


def non_default(task):
    default = task.template.default_config()
    return next(c for c in (task.space.get(i) for i in range(len(task.space))) if c != default)


def test_a_session_with_a_db_compiles_with_its_best_configs(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = extract_tasks(from_onnx(str(MODEL)))
    db = tmp_path / "tuning.db"
    with Database(db) as database:
        for t in tasks:
            database.add(Record.create(t.key, t.name, t.template_name, dict(non_default(t).values), costs=[1e-4]))
    tuned, default = InferenceSession(str(MODEL), db=db), DefaultSession(str(MODEL))
    (compiled,) = tuned._compiled.values()
    configs = [s.config for s in compiled.graph.steps if s.kernel is not None]
    assert configs and None not in configs and {c for c in configs} <= {non_default(t) for t in tasks}
    (x,) = tuned.get_inputs()
    feeds = {x.name: np.random.default_rng(0).standard_normal(x.shape).astype("float32")}
    for got, want in zip(tuned.run(None, feeds), default.run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_missing_records_are_one_warning_at_the_callers_line_naming_the_count_and_the_fix(tmp_path):
    from tilefuse.autotune.dispatch import MissingRecordWarning
    db = tmp_path / "empty.db"
    Database(db).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        InferenceSession(str(MODEL), db=str(db))
    missing = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    assert len(missing) == 1 and missing[0].filename == __file__
    text = str(missing[0].message)
    count = int(text.split()[0])
    assert count > 1 and "have no tuning record for" in text and f"in {db}" in text
    assert f"`autotune tune MODEL --db {db}`" in text and "autotune best --missing" in text
