"""autotune: tile sizes and other schedule knobs chosen by a learned cost model trained on
real measurements, kept in a sqlite database and JSON-lines logs, and used by compilation.

Example:
    >>> from tilefuse import autotune
    >>> from tilefuse.graph_api import load_json
    >>> graph = load_json("examples/mlp.json")
    >>> tasks = autotune.extract_tasks(graph)              # one per distinct workload
    >>> [t.template.name for t in tasks]                   # each tuned over its template's space
    ['complex', 'complex', 'complex', 'reduction']

Then ``autotune.tune(tasks, trials=64, db="tuning.db", log="tuning_logs/model.jsonl")``
measures configs of each task in worker processes (seconds to minutes: see ``autotune.tune``),
and ``with autotune.apply_history_best("tuning.db"): compiled = compile_graph(graph)`` compiles
every partition with its best config (``autotune.dispatch``).
"""
from .cost_model import XGBCostModel
from .database import Database, TuningDatabaseError
from .dispatch import (HistoryBest, MissingRecordWarning, MissingTuningRecord, apply_history_best,
                       best_config, current_history)
from .executor import DaskExecutor, LocalExecutor, default_executor, executor_from
from .extract import extract_tasks
from .features import FeatureError, features_of, loop_features
from .log import append_records, export_log, import_log, read_log
from .measure import MeasureError, MeasureOptions, MeasureResult, measure_batch
from .record import ERROR_KINDS, SCHEMA_VERSION, Record, config_key
from .session import InferenceSession
from .target import current_target
from .task import Task, random_inputs
from .tune import TaskReport, tune
from .tuner import EarlyStopping, GridTuner, RandomTuner, Tuner, XGBTuner, make_tuner

__all__ = ["XGBCostModel", "Database", "TuningDatabaseError", "HistoryBest", "MissingRecordWarning",
           "MissingTuningRecord", "apply_history_best", "best_config", "current_history", "DaskExecutor",
           "LocalExecutor", "default_executor", "executor_from", "extract_tasks", "FeatureError",
           "features_of", "loop_features", "append_records", "export_log", "import_log", "read_log",
           "ERROR_KINDS", "MeasureError", "MeasureOptions", "MeasureResult", "measure_batch",
           "SCHEMA_VERSION", "Record", "config_key", "current_target", "Task", "random_inputs", "TaskReport", "tune",
           "EarlyStopping", "GridTuner", "RandomTuner", "Tuner", "XGBTuner", "make_tuner", "InferenceSession"]
