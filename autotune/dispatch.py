"""Using tuning results: the best record of each workload decides its schedule, unless tuning
checked it against the default config side by side (``Database.pick``): then that check's
choice does, and a tuned config that measured slower than the default is never applied.

``HistoryBest(db)`` is a ``schedule.ConfigSource`` (the best config of a template's workload
on this CPU) and a ``tensorir.runtime.KernelCache`` (compiled kernels kept in the database).
Pass it to ``graph_api.compile_graph(graph, configs=...)``, or make it active for a block with
``apply_history_best(db)``, where every template applied without a config uses it. A workload
without a record compiles with the template's default config and a warning that names it,
once per workload, never silently; with ``strict=True`` it is an error instead.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import template_for
    >>> from tilefuse.autotune import Record
    >>> A = placeholder((1000,), name="A"); t = template_for(compute((1000,), lambda i: A[i] * 2.0, name="B"))
    >>> tuned = t.space.get(9)
    >>> db = Database(":memory:")            # or a path: "tuning.db", as autotune.tune filled it
    >>> _ = db.add(Record.create(workload_key(t), "B", t.name, tuned.values, costs=[1e-6]))
    >>> with apply_history_best(db):        # compile_graph(graph) here compiles with the best configs
    ...     t.chosen_config() == tuned       # what t.apply() and t.build() use
    True
    >>> HistoryBest(db).config_for(t) == tuned    # for compile_graph(graph, configs=HistoryBest(db))
    True
"""
from __future__ import annotations

import contextlib
import hashlib
import warnings

from tilefuse.schedule.config_source import active_sources, using_configs
from tilefuse.schedule.space import Config
from tilefuse.tensorir.errors import TilefuseError

from .database import Database
from .task import Task, canonical_text


class MissingTuningRecord(TilefuseError, LookupError):
    """A workload has no tuning record for this CPU (strict mode)."""


class MissingRecordWarning(UserWarning):
    """A workload compiles with its default config because the database has no record of it
    (``db``: the database's path, ``cpu``: the CPU it has none for). A session's compile
    raises the warnings of a model as one, ``summary``.

    Example:
        >>> many = [MissingRecordWarning(f"no tuning record for workload w{k}", "t.db", "skylake") for k in range(3)]
        >>> MissingRecordWarning.summary(many)
        '3 workloads have no tuning record for skylake in t.db: they compile with their default configs; tune them with `autotune tune MODEL --db t.db` (`autotune best --missing MODEL --db t.db` lists them)'
    """

    def __init__(self, message: str, db: str = "", cpu: str = ""):
        super().__init__(message)
        self.db, self.cpu = db, cpu

    @classmethod
    def summary(cls, warnings_: list) -> str:
        """One message for several of these warnings: how many, and the fix."""
        db, cpu = warnings_[0].db or "the database", warnings_[0].cpu or "this CPU"
        return (f"{len(warnings_)} workloads have no tuning record for {cpu} in {db}: they compile with their "
                f"default configs; tune them with `autotune tune MODEL --db {db}` (`autotune best --missing MODEL "
                f"--db {db}` lists them)")


def workload_key(template) -> str:
    """The key tuning records of ``template``'s workload are stored under (``Task.key``).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> workload_key(template_for(B)) == Task(B).key
        True
    """
    return hashlib.sha256(canonical_text(template.outputs, template.name).encode()).hexdigest()


class HistoryBest:
    """The best records of a database for the CPU each template is compiled for (this one,
    unless the compile names another target): a ConfigSource and a KernelCache.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     HistoryBest(Database(":memory:")).config_for(template_for(B)) is None
        True
    """

    def __init__(self, db, strict: bool = False):
        self.db = db if isinstance(db, Database) else Database(db)
        self.strict = strict
        self._warned: set[str] = set()
        self._cache: dict[str, Config | None] = {}

    def config_for(self, template) -> Config | None:
        """The config ``template``'s workload compiles with on this CPU: its pick (the tuned
        best, or the default where that was not faster side by side), else its best record;
        None (with a warning, or MissingTuningRecord when strict) when the database has none.

        Example:
            >>> import warnings
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import template_for
            >>> from tilefuse.autotune import Record
            >>> A = placeholder((1000,), name="A"); t = template_for(compute((1000,), lambda i: A[i] * 2.0, name="B"))
            >>> db = Database(":memory:")
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     HistoryBest(db).config_for(t)          # no record: None, and a warning
            >>> [type(w.message).__name__ for w in caught]
            ['MissingRecordWarning']
            >>> _ = db.add(Record.create(workload_key(t), "B", t.name, t.space.get(9).values, costs=[1e-6]))
            >>> HistoryBest(db, strict=True).config_for(t) == t.space.get(9)     # the tuned config
            True
        """
        key = workload_key(template)
        target = template.target          # the records of the machine it is compiled for
        if (key, target.key) not in self._cache:
            pick = self.db.pick(key, target.key)      # checked against the default: it decides
            record = self.db.best(key, target.key) if pick is None else None
            chosen = pick.config if pick is not None else record.config if record is not None else None
            config = None
            if chosen is not None:
                config = template.space.complete(Config(chosen))      # a knob added since: its value when absent
                try:
                    template.space.index_of(config)
                except ValueError:      # the template's knobs changed since: not a point any more
                    config = None
            self._cache[key, target.key] = config
        config = self._cache[key, target.key]
        if config is None:
            name = "+".join(op.name for op in template.dag.ops)
            message = (f"no tuning record for workload {name} (key {key[:16]}) on "
                       f"{target.cpu} in {self.db.path}: it compiles with the default config")
            if self.strict:
                raise MissingTuningRecord(message)
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(MissingRecordWarning(message, str(self.db.path), target.cpu), stacklevel=3)
        return config

    def cached_kernel(self, key: str) -> bytes | None:
        """The database's compiled kernel under ``key`` (KernelCache), or None.

        Example:
            >>> HistoryBest(":memory:").cached_kernel("nothing") is None
            True
        """
        return self.db.cached_kernel(key)

    def cache_kernel(self, key: str, blob: bytes) -> None:
        """Keep a compiled kernel in the database (KernelCache).

        Example:
            >>> h = HistoryBest(":memory:"); h.cache_kernel("k", b"code"); h.cached_kernel("k")
            b'code'
        """
        self.db.cache_kernel(key, blob)


def current_history() -> HistoryBest | None:
    """The innermost active ``apply_history_best`` source of this thread, or None.

    Example:
        >>> current_history() is None
        True
    """
    return next((s for s in reversed(active_sources()) if isinstance(s, HistoryBest)), None)


@contextlib.contextmanager
def apply_history_best(db, strict: bool = False):
    """Compile with the best tuned configs of ``db`` (a Database or a path) inside the block:
    graph partitions, and schedule templates applied without an explicit config.

    Example:
        >>> with apply_history_best(":memory:") as history:
        ...     current_history() is history
        True
    """
    with using_configs(HistoryBest(db, strict)) as history:
        yield history


def best_config(task: Task, db=None) -> Config:
    """The config to compile ``task`` with: the best record of ``db`` (or of the active
    ``apply_history_best``), else the template's default.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((8,), name="A"); B = compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> best_config(Task(B)) == Task(B).template.default_config()
        True
    """
    history = HistoryBest(db) if db is not None else current_history()
    config = history.config_for(task.template) if history is not None else None
    return task.template.default_config() if config is None else config


def tuned_tasks(tasks, db) -> list:
    """The ``tasks`` that ``db`` (a Database, a path or a HistoryBest) gives a config other
    than their template's default: those a compiled graph runs tuned (a workload whose check
    kept the default, or that has no record, runs as an untuned one; no warning for those).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((8,), name="A"); task = Task(compute((8,), lambda i: A[i] * 2.0, name="B"))
        >>> tuned_tasks([task], ":memory:")
        []
    """
    history = db if isinstance(db, HistoryBest) else HistoryBest(db)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        return [t for t in tasks if history.config_for(t.template) not in (None, t.template.default_config())]
