"""Using tuning results: the best record of each workload decides its schedule.

``apply_history_best(db)`` (a context manager) makes every compile inside it (``schedule``
templates applied without a config, ``graph_api`` partitions) use the best config the
database holds for the workload on this CPU. A workload without a record compiles with the
template's default config and a warning that names it, once per workload, never silently;
with ``strict=True`` it is an error instead.

Example:
    >>> # with apply_history_best("tuning.db"):
    >>> #     compiled = graph_api.compile_graph(graph)
"""
from __future__ import annotations

import contextlib
import threading
import warnings

from schedule.space import Config
from schedule.templates import config_source

from .database import Database
from .target import current_target
from .task import Task
from tensorir.errors import TilefuseError


class MissingTuningRecord(TilefuseError, LookupError):
    """A workload has no tuning record for this CPU (strict mode)."""


class MissingRecordWarning(UserWarning):
    """A workload compiles with its default config because the database has no record of it."""


class HistoryBest:
    """The best records of a database for this CPU, looked up per task.

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     HistoryBest(Database(":memory:")).config_for(Task(B)) is None
        True
    """

    def __init__(self, db, strict: bool = False):
        self.db = db if isinstance(db, Database) else Database(db)
        self.strict = strict
        self.target = current_target()
        self._warned: set[str] = set()
        self._cache: dict[str, Config | None] = {}

    def config_for(self, task: Task) -> Config | None:
        """The best config of ``task`` on this CPU, or None (with a warning, or
        MissingTuningRecord when strict) when the database has none.

        Example:
            >>> # HistoryBest("tuning.db").config_for(Task(C))
        """
        if task.key not in self._cache:
            record = self.db.best(task.key, self.target.key)
            config = None
            if record is not None:
                config = Config(record.config)
                try:
                    task.space.index_of(config)
                except ValueError:      # the template's knobs changed since: not a point any more
                    config = None
            self._cache[task.key] = config
        config = self._cache[task.key]
        if config is None:
            message = (f"no tuning record for workload {task.name} (key {task.key[:16]}) on "
                       f"{self.target.cpu} in {self.db.path}: it compiles with the default config")
            if self.strict:
                raise MissingTuningRecord(message)
            if task.key not in self._warned:
                self._warned.add(task.key)
                warnings.warn(message, MissingRecordWarning, stacklevel=3)
        return config


_local = threading.local()


def current_history() -> HistoryBest | None:
    """The innermost active ``apply_history_best`` context of this thread, or None.

    Example:
        >>> current_history() is None
        True
    """
    stack = getattr(_local, "stack", [])
    return stack[-1] if stack else None


@contextlib.contextmanager
def apply_history_best(db, strict: bool = False):
    """Compile with the best tuned configs of ``db`` (a Database or a path) inside the block:
    graph partitions, and schedule templates applied without an explicit config.

    Example:
        >>> with apply_history_best(":memory:") as history:
        ...     current_history() is history
        True
    """
    history = HistoryBest(db, strict)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(history)
    try:
        with config_source(lambda template: history.config_for(Task(template.outputs))):
            yield history
    finally:
        stack.pop()


def best_config(task: Task, db=None) -> Config:
    """The config to compile ``task`` with: the best record of ``db`` (or of the active
    ``apply_history_best``), else the template's default.

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> best_config(Task(B)) == Task(B).template.default_config()
        True
    """
    history = HistoryBest(db) if db is not None else current_history()
    config = history.config_for(task) if history is not None else None
    return task.template.default_config() if config is None else config
