"""Tuners: which configs of a template's space to measure next, AutoTVM style.

A tuner proposes batches (``next_batch(n)``), is told the measurements (``update(configs,
results)``) and keeps the best. No config is proposed twice, nor one already measured
(configs given to ``update`` count as measured, so a resumed run passes its old records to
``update`` first). Seeded tuners are reproducible: the same seed and the same results give
the same proposals.

* ``GridTuner`` walks the space in index order;
* ``RandomTuner`` draws uniformly without repetition;
* ``XGBTuner`` draws at random until it has ``min_train`` measurements (or at once, when it is
  given ``transfer`` records of other tasks of the same template), then trains an
  ``XGBCostModel`` on the measured features and costs and fills each batch from a plan made
  by ``simulated_annealing`` over the model's scores, a fraction ``epsilon`` of the batch
  drawn at random (exploration). The model is refit every ``retrain_every`` new measurements.
  On a space too large to score whole (``exhaustive_threshold``), the annealing walks on a
  second model's scores, trained on the task's own measurements by knob values alone
  (``config_features``: microseconds a config, where the loop features cost a lowering), and
  the first model ranks the plan it finds.

``EarlyStopping`` says when the best cost has not improved for ``patience`` measurements.

Example:
    >>> from tilefuse.schedule.space import ConfigSpace
    >>> space = ConfigSpace(); space.define_knob("tile", [4, 8, 16, 32])
    >>> tuner = make_tuner("grid", space)
    >>> batch = tuner.next_batch(2); [c["tile"] for c in batch]
    [4, 8]
    >>> tuner.update(batch, [Measured((2e-3,)), Measured((1e-3,))])
    >>> tuner.best["tile"], tuner.best_cost
    (8, 0.001)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from tilefuse.schedule.space import Config, ConfigSpace

from .cost_model import XGBCostModel, relevance
from .features import FeatureError, config_features_at
from .search import make_rng, simulated_annealing

SHORTLIST = 2     # on a large space, configs lowered for the loop-feature model per config wanted


class MeasureResultLike(Protocol):
    """What a tuner reads from a measurement: ``costs`` (seconds per run, one per repeat) and
    ``error_kind`` (None for a success, else a short kind such as "compile" or "timeout")."""

    costs: tuple
    error_kind: str | None


@dataclass(frozen=True)
class Measured:
    """A minimal ``MeasureResultLike`` (for tests, examples and replayed records).

    Example:
        >>> result_cost(Measured((1.0, 3.0))), result_cost(Measured((), "timeout"))
        (2.0, inf)
    """
    costs: tuple = ()
    error_kind: str | None = None
    error_msg: str = ""


def result_cost(result: MeasureResultLike) -> float:
    """The cost a tuner ranks by: the mean of ``costs`` for a success, ``inf`` for an error
    (or a result without usable costs).

    Example:
        >>> result_cost(Measured((2e-3, 4e-3)))
        0.003
    """
    costs = tuple(getattr(result, "costs", ()) or ())
    if getattr(result, "error_kind", None) is not None or not costs:
        return math.inf
    mean = float(sum(costs)) / len(costs)
    return mean if math.isfinite(mean) and mean > 0 else math.inf


class Tuner:
    """Base class: bookkeeping of proposals, measurements and the best config. Subclasses
    implement ``_propose(n) -> list[int]`` (indices, unvisited, distinct).

    Example:
        >>> from tilefuse.schedule.space import ConfigSpace
        >>> space = ConfigSpace(); space.define_knob("tile", [4, 8, 16, 32])
        >>> tuner = RandomTuner(space, seed=0)
        >>> while tuner.has_next():
        ...     batch = tuner.next_batch(3)
        ...     tuner.update(batch, [Measured((1e-3 / c["tile"],)) for c in batch])   # measured instead
        >>> tuner.best, len(tuner.history)
        (Config({'tile': 32}), 4)
    """

    def __init__(self, space: ConfigSpace, seed: int = 0):
        if not isinstance(space, ConfigSpace):
            raise TypeError(f"a tuner needs a ConfigSpace, got {type(space).__name__}")
        self.space = space
        self.seed = seed
        self.rng = make_rng(seed)
        self.visited: set[int] = set()                  # proposed or measured
        self._first: list[int] = []                     # start_with's configs, not yet proposed
        self.history: list[tuple[int, float]] = []      # (index, cost) per measurement
        self.best_index: int | None = None
        self.best_cost: float = math.inf

    # ------------------------------------------------------------------ public
    def has_next(self) -> bool:
        """True while some config has been neither proposed nor measured."""
        return len(self.visited) < len(self.space)

    def start_with(self, configs: Sequence[Config]) -> None:
        """Propose ``configs`` (points of the space) before any of the tuner's own choices,
        those not measured by then (a template's ``starting_points``).

        Example:
            >>> from tilefuse.schedule.space import ConfigSpace
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2, 3])
            >>> tuner = RandomTuner(s, seed=0); tuner.start_with([Config({"a": 3})])
            >>> tuner.next_batch(1)
            [Config({'a': 3})]
        """
        self._first += [self.space.index_of(c if isinstance(c, Config) else Config(c)) for c in configs]

    def next_batch(self, n: int) -> list[Config]:
        """Up to ``n`` configs never proposed or measured before (fewer when the space runs
        out), ``start_with``'s first; points the space's rules rule out
        (``ConfigSpace.define_rule``) are skipped, counted as visited, and never built.

        Example:
            >>> from tilefuse.schedule.space import ConfigSpace
            >>> space = ConfigSpace(); space.define_knob("tile", [4, 8, 16, 32])
            >>> tuner = RandomTuner(space, seed=0)
            >>> tuner.next_batch(3), tuner.next_batch(3)        # the space runs out
            ([Config({'tile': 32}), Config({'tile': 8}), Config({'tile': 4})], [Config({'tile': 16})])
        """
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"batch size must be an int >= 0, got {n!r}")
        batch: list[int] = []
        while self._first and len(batch) < n:
            index = self._first.pop(0)
            if index not in self.visited:
                self.visited.add(index)
                batch.append(index)
        while len(batch) < n:
            want = min(n - len(batch), len(self.space) - len(self.visited))
            if want <= 0:
                break
            picks = self._propose(want)
            if len(set(picks)) != len(picks) or any(i in self.visited for i in picks) or len(picks) > want:
                raise RuntimeError(f"{type(self).__name__} proposed a repeated config: {picks}")
            if not picks:
                break
            self.visited.update(picks)
            batch += [i for i in picks if self.space.searchable(i)]
        return [self.space.get(i) for i in batch]

    def update(self, configs: Sequence[Config], results: Sequence[MeasureResultLike]) -> None:
        """Record measurements of ``configs`` (Configs or knob dicts: any points of the space,
        proposed here or not, e.g. records of an earlier run being resumed).

        Example:
            >>> from tilefuse.schedule.space import ConfigSpace
            >>> space = ConfigSpace(); space.define_knob("tile", [4, 8, 16, 32])
            >>> tuner = GridTuner(space)
            >>> tuner.update([Config({"tile": 8}), {"tile": 16}], [Measured((2e-3,)), Measured((), "timeout")])
            >>> tuner.best, tuner.history                      # an error costs inf
            (Config({'tile': 8}), [(1, 0.002), (2, inf)])
            >>> tuner.next_batch(4)                            # measured configs are not proposed
            [Config({'tile': 4}), Config({'tile': 32})]
        """
        configs, results = list(configs), list(results)
        if len(configs) != len(results):
            raise ValueError(f"{len(configs)} configs but {len(results)} results")
        for config, result in zip(configs, results):
            index = self.space.index_of(config if isinstance(config, Config) else Config(config))
            cost = result_cost(result)
            self.visited.add(index)
            self.history.append((index, cost))
            if cost < self.best_cost:
                self.best_index, self.best_cost = index, cost
        self._on_update()

    @property
    def best(self) -> Config | None:
        """The config with the lowest measured cost, None before any success."""
        return None if self.best_index is None else self.space.get(self.best_index)

    @property
    def trials(self) -> int:
        """Measurements recorded so far."""
        return len(self.history)

    # ------------------------------------------------------------------ for subclasses
    def _propose(self, n: int) -> list[int]:
        raise NotImplementedError

    def _on_update(self) -> None:
        pass

    def _random_unvisited(self, n: int, taken: set | None = None) -> list[int]:
        """``n`` distinct random searchable indices outside ``visited`` and ``taken`` (fewer if
        the space runs out); enumerates only when few configs are left."""
        taken = self.visited | (taken or set())
        size, searchable = len(self.space), self.space.searchable
        left = size - len(taken)
        n = min(n, left)
        if n <= 0:
            return []
        picks: list[int] = []
        if not (left <= 4 * n or (size <= 1 << 16 and len(taken) > size // 2)):
            for _ in range(64 * n):             # draws; the rules may leave few points searchable
                i = self.rng.randrange(size)
                if i not in taken:
                    taken.add(i)
                    if not searchable(i):
                        self.visited.add(i)     # ruled out: as good as visited
                        continue
                    picks.append(i)
                    if len(picks) == n:
                        return picks
        pool = []
        for i in range(size):
            if i not in taken:
                if searchable(i):
                    pool.append(i)
                else:
                    self.visited.add(i)     # ruled out: as good as visited
        return picks + self.rng.sample(pool, min(n - len(picks), len(pool)))


class GridTuner(Tuner):
    """Configs in index order, skipping measured ones.

    Example:
        >>> from tilefuse.schedule.space import ConfigSpace
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2, 3])
        >>> [c["a"] for c in GridTuner(s).next_batch(5)]
        [1, 2, 3]
    """

    def __init__(self, space: ConfigSpace, seed: int = 0):
        super().__init__(space, seed)
        self._cursor = 0

    def _propose(self, n: int) -> list[int]:
        picks = []
        while len(picks) < n and self._cursor < len(self.space):
            if self._cursor not in self.visited:
                picks.append(self._cursor)
            self._cursor += 1
        return picks


class RandomTuner(Tuner):
    """Uniformly random configs without repetition.

    Example:
        >>> from tilefuse.schedule.space import ConfigSpace
        >>> s = ConfigSpace(); s.define_knob("a", list(range(10)))
        >>> t = RandomTuner(s, seed=1)
        >>> len({c["a"] for c in t.next_batch(4) + t.next_batch(6)})
        10
    """

    def _propose(self, n: int) -> list[int]:
        return self._random_unvisited(n)


class XGBTuner(Tuner):
    """Model-guided tuner: an xgboost ranking model over ``featurize(config)`` rows proposes
    each batch through simulated annealing, with epsilon-greedy exploration.

    ``featurize``: config -> 1-D feature array of a fixed length, e.g.
    ``functools.partial(features_of, template)``; a config it rejects with ``FeatureError``
    gets no score (it is only ever drawn at random) and is listed in ``feature_errors``.
    ``featurize_many`` (optional): configs -> a row or a FeatureError each, for the rows a plan
    or a fit needs at once (``features_on``: the measuring workers lower them in parallel).
    ``transfer``: None or ``(features, costs, groups)`` measured on other tasks of the same
    template (2-D rows of the same length, costs with ``inf`` for errors, a task id per row):
    the model trains on them from the first batch. ``search_options`` go to
    ``simulated_annealing``.

    Example:
        >>> import functools
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import template_for
        >>> from tilefuse.autotune.features import features_of
        >>> A = placeholder((4096,), name="A"); B = compute((4096,), lambda i: A[i] * 2.0, name="B")
        >>> t = template_for(B)
        >>> tuner = XGBTuner(t.space, functools.partial(features_of, t), seed=0, min_train=4)
        >>> for _ in range(3):
        ...     batch = tuner.next_batch(4)
        ...     tuner.update(batch, [Measured((1e-6 * c["vector"] * c["unroll"],)) for c in batch])
        >>> tuner.model.is_trained, tuner.trials, tuner.best_cost <= 8e-6
        (True, 12, True)
    """

    def __init__(self, space: ConfigSpace, featurize: Callable[[Config], np.ndarray], seed: int = 0,
                 plan_size: int = 64, epsilon: float = 0.1, transfer=None, model: XGBCostModel | None = None,
                 min_train: int = 16, retrain_every: int = 8, search_options: dict | None = None,
                 featurize_many: Callable[[list], list] | None = None):
        super().__init__(space, seed)
        if not callable(featurize):
            raise TypeError(f"featurize must be callable (config -> features), got {type(featurize).__name__}")
        if featurize_many is not None and not callable(featurize_many):
            raise TypeError(f"featurize_many must be callable (configs -> rows or FeatureErrors), "
                            f"got {type(featurize_many).__name__}")
        self.featurize_many = featurize_many
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if plan_size < 1 or min_train < 1 or retrain_every < 1:
            raise ValueError("plan_size, min_train and retrain_every must be >= 1")
        self.featurize = featurize
        self.plan_size, self.epsilon = int(plan_size), float(epsilon)
        self.min_train, self.retrain_every = int(min_train), int(retrain_every)
        self.model = model if model is not None else XGBCostModel(seed=seed)
        self.knob_model = XGBCostModel(seed=seed)     # knob values -> rank: the walk over a large space
        self._knob_rows: dict[int, np.ndarray] = {}
        self.search_options = {"population": 32, "n_iter": 80, "patience": 15, "exhaustive_threshold": 1024}
        self.search_options.update(search_options or {})
        self.transfer = _check_transfer(transfer)
        self.feature_errors: dict[int, str] = {}
        self._features: dict[int, np.ndarray | None] = {}
        self._width: int | None = None
        self._plan: list[int] = []
        self._trained_on: int | None = None       # own measurements in the last fit

    # ------------------------------------------------------------------ features and scores
    def features(self, index: int) -> np.ndarray | None:
        """The (cached) feature row of config ``index``; None if ``featurize`` rejected it."""
        if index not in self._features:
            try:
                row = self.featurize(self.space.get(index))
            except FeatureError as err:
                row = err
            self._keep_features(index, row)
        return self._features[index]

    def _keep_features(self, index: int, row) -> None:
        if isinstance(row, FeatureError):
            self.feature_errors[index] = str(row)
            self._features[index] = None
            return
        row = np.asarray(row, dtype=np.float64).reshape(-1)
        self._check_width(len(row))
        self._features[index] = row

    def _compute_features(self, indices) -> None:
        """Compute the missing feature rows of ``indices`` at once with ``featurize_many``
        (on the measuring workers, in parallel), when it is given and more than one is missing."""
        missing = list(dict.fromkeys(i for i in indices if i not in self._features))
        if self.featurize_many is None or len(missing) < 2:
            return
        rows = self.featurize_many([self.space.get(i) for i in missing])
        if len(rows) != len(missing):
            raise RuntimeError(f"featurize_many returned {len(rows)} rows for {len(missing)} configs")
        for index, row in zip(missing, rows):
            self._keep_features(index, row)

    def _check_width(self, width: int) -> None:
        if self._width is None:
            self._width = width
            if self.transfer is not None and self.transfer[0].shape[1] != width:
                raise ValueError(f"transfer records have {self.transfer[0].shape[1]} features but this "
                                 f"task's have {width}: they do not come from the same template")
        elif width != self._width:
            raise ValueError(f"featurize returned {width} features, earlier {self._width}")

    def scores(self, indices) -> np.ndarray:
        """Model scores of config ``indices`` (higher = predicted faster; -inf if unscorable or
        ruled out by the space's rules, which are never lowered)."""
        indices = list(indices)
        self._compute_features([i for i in indices if self.space.searchable(i)])
        rows = [self.features(i) if self.space.searchable(i) else None for i in indices]
        out = np.full(len(rows), -np.inf)
        valid = [k for k, r in enumerate(rows) if r is not None]
        if valid:
            out[valid] = self.model.predict(np.stack([rows[k] for k in valid]))
        return out

    # ------------------------------------------------------------------ training and planning
    def training_set(self):
        """(feature rows, costs) of the measured configs whose features could be computed;
        a later task of the same template takes them as transfer records.

        Example:
            >>> import functools
            >>> from tilefuse.schedule.space import ConfigSpace
            >>> from tilefuse.autotune.features import config_features
            >>> s = ConfigSpace(); s.define_knob("tile", [4, 8, 16, 32]); s.define_knob("unroll", [1, 2, 4])
            >>> tuner = XGBTuner(s, functools.partial(config_features, s), seed=0)
            >>> measured = [s.get(0), s.get(11)]
            >>> tuner.update(measured, [Measured((1e-3 / (c["tile"] * c["unroll"]),)) for c in measured])
            >>> rows, costs = tuner.training_set()
            >>> [row.tolist() for row in rows], costs           # log2(1 + knob value) per knob
            ([[2.321928094887362, 1.0], [5.044394119358453, 2.321928094887362]], [0.00025, 7.8125e-06])
        """
        rows, costs = [], []
        self._compute_features([index for index, _ in self.history])
        for index, cost in self.history:
            row = self.features(index)
            if row is not None:
                rows.append(row)
                costs.append(cost)
        return rows, costs

    def _train_if_due(self) -> bool:
        """Fit the model when it is due; True when the model is ready to guide the search."""
        self._compute_features([index for index, _ in self.history])
        own = sum(1 for index, _ in self.history if self.features(index) is not None)
        if own < self.min_train and self.transfer is None:
            return False
        fresh = self._trained_on is None or own - self._trained_on >= self.retrain_every
        if not fresh and self.model.is_trained:
            return True
        rows, costs = self.training_set()
        groups = [0] * len(rows)
        if self.transfer is not None:
            t_x, t_costs, t_groups = self.transfer
            own_group = int(t_groups.max()) + 1 if len(t_groups) else 0
            x = np.vstack([t_x] + ([np.stack(rows)] if rows else []))
            costs = np.concatenate([t_costs, costs])
            groups = np.concatenate([t_groups, np.full(len(rows), own_group, dtype=np.int64)])
        elif rows:
            x = np.stack(rows)
        else:
            return False
        self.model.fit(x, costs, groups)
        if len(self.history) >= 2:          # this task's own measurements, by knob values
            self.knob_model.fit(np.stack([config_features_at(self.space, i) for i, _ in self.history]),
                                np.array([c for _, c in self.history]))
        self._trained_on = own
        self._plan = []
        return True

    def _make_plan(self, taken: set, size: int, wanted: int) -> None:
        """A plan of up to ``size`` unvisited configs, best first; on a large space, the
        ``SHORTLIST * wanted`` the knob model likes best, ranked by the loop-feature model (each
        costs a lowering, and the plan is made anew at every refit)."""
        measured = sorted((c, i) for i, c in self.history if math.isfinite(c))
        exclude, initial = self.visited | taken, [i for _, i in measured[:8]]
        if len(self.space) <= self.search_options["exhaustive_threshold"]:
            self._plan = simulated_annealing(self.space, self.scores, size, exclude=exclude, rng=self.rng,
                                             initial=initial, **self.search_options)
            return
        # a large space: the walk scores knob values (microseconds a config, where the loop
        # features cost a lowering, tens of milliseconds), the model ranks what it found
        self._plan = []
        for _ in range(3):          # again while configs without features leave the plan short
            if self.knob_model.is_trained:
                shortlist = simulated_annealing(self.space, self.knob_scores, SHORTLIST * wanted, exclude=exclude,
                                                rng=self.rng, initial=initial, **self.search_options)
            else:       # trained on other tasks' records alone: it ranks a random sample as large
                shortlist = self._random_unvisited(4 * SHORTLIST * wanted, exclude - self.visited)
            scored = sorted(zip(self.scores(shortlist), shortlist), key=lambda t: -t[0])
            self._plan += [i for score, i in scored if score > -math.inf]
            exclude = exclude | set(shortlist)
            if len(self._plan) >= wanted or not shortlist:
                break

    def knob_scores(self, indices) -> np.ndarray:
        """Scores of config ``indices`` by ``knob_model`` (higher = predicted faster), from
        their knob values alone (``config_features``): what the search over a large space walks on.

        Example:
            >>> import functools
            >>> from tilefuse.schedule.space import ConfigSpace
            >>> from tilefuse.autotune.features import config_features
            >>> s = ConfigSpace(); s.define_knob("tile", [4, 8, 16, 32]); s.define_knob("unroll", [1, 2, 4])
            >>> tuner = XGBTuner(s, functools.partial(config_features, s), seed=0, min_train=4)
            >>> measured = [s.get(i) for i in range(0, 12, 2)]
            >>> tuner.update(measured, [Measured((1e-3 / (c["tile"] * c["unroll"]),)) for c in measured])
            >>> _ = tuner.next_batch(2)                        # trains the models
            >>> scores = tuner.knob_scores([1, 3, 11])         # higher: predicted faster
            >>> s.get([1, 3, 11][int(scores.argmax())])
            Config({'tile': 32, 'unroll': 4})
        """
        rows = []
        for i in indices:
            row = self._knob_rows.get(i)
            if row is None:
                row = self._knob_rows[i] = config_features_at(self.space, i)
            rows.append(row)
        scores = self.knob_model.predict(np.stack(rows)) if rows else np.zeros(0)
        featureless = [k for k, i in enumerate(indices) if i in self._features and self._features[i] is None
                       or not self.space.searchable(i)]
        scores[featureless] = -np.inf       # the loop-feature model cannot rank them, or the rules rule them out
        return scores

    def _propose(self, n: int) -> list[int]:
        if not self._train_if_due():
            return self._random_unvisited(n)
        n_random = sum(1 for _ in range(n) if self.rng.random() < self.epsilon)
        picks: list[int] = []
        taken: set[int] = set()
        replanned = False
        while len(picks) < n - n_random:
            if not self._plan:
                if replanned:
                    break
                self._make_plan(taken, max(self.plan_size, n), n)
                replanned = True
                if not self._plan:
                    break
            i = self._plan.pop(0)
            if i not in self.visited and i not in taken:
                picks.append(i)
                taken.add(i)
        return picks + self._random_unvisited(n - len(picks), taken)


def _check_transfer(transfer):
    if transfer is None:
        return None
    try:
        x, costs, groups = transfer
    except (TypeError, ValueError):
        raise ValueError("transfer must be None or a (features, costs, groups) triple") from None
    x = np.asarray(x, dtype=np.float64)
    costs = np.asarray(costs, dtype=np.float64).reshape(-1)
    groups = np.asarray(groups).reshape(-1)
    if x.ndim != 2 or len(x) != len(costs) or len(groups) != len(costs):
        raise ValueError(f"transfer needs 2-D features with one cost and one group per row, got "
                         f"shapes {x.shape}, {costs.shape}, {groups.shape}")
    if not len(x):
        return None
    if groups.dtype.kind not in "iu":
        raise ValueError(f"transfer group ids must be integers, got dtype {groups.dtype}")
    relevance(costs, groups)                    # costs > 0 (or non-finite for errors)
    return x, costs, groups.astype(np.int64)


class EarlyStopping:
    """Stop when the best cost has not improved (by more than ``min_improvement``, a fraction)
    for ``patience`` measurements.

    Example:
        >>> stop = EarlyStopping(patience=2)
        >>> [stop.record(c) for c in (3.0, 2.0, 2.5, 2.1)]
        [False, False, False, True]
    """

    def __init__(self, patience: int, min_improvement: float = 0.0):
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if not 0.0 <= min_improvement < 1.0:
            raise ValueError(f"min_improvement must be in [0, 1), got {min_improvement}")
        self.patience, self.min_improvement = int(patience), float(min_improvement)
        self.best_cost = math.inf
        self.since_best = 0

    def record(self, cost: float) -> bool:
        """Count one measurement of ``cost`` (inf for an error); True when tuning should stop."""
        if cost < self.best_cost * (1.0 - self.min_improvement):
            self.best_cost, self.since_best = cost, 0
        else:
            self.since_best += 1
        return self.should_stop

    def record_results(self, results: Sequence[MeasureResultLike]) -> bool:
        """``record`` each result's cost; True when tuning should stop."""
        for r in results:
            self.record(result_cost(r))
        return self.should_stop

    @property
    def should_stop(self) -> bool:
        return self.since_best >= self.patience


TUNERS = {"random": RandomTuner, "grid": GridTuner, "xgb": XGBTuner}


def make_tuner(name: str, space: ConfigSpace, featurize: Callable | None = None, seed: int = 0, **options) -> Tuner:
    """A tuner by name: "random", "grid" or "xgb" (which needs ``featurize``); ``options`` go
    to the XGBTuner (``plan_size``, ``epsilon``, ``transfer``, ...).

    Example:
        >>> from tilefuse.schedule.space import ConfigSpace
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2])
        >>> type(make_tuner("random", s, seed=3)).__name__
        'RandomTuner'
    """
    if name not in TUNERS:
        raise ValueError(f"unknown tuner {name!r}; expected one of {sorted(TUNERS)}")
    if name == "xgb":
        if featurize is None:
            raise ValueError("the xgb tuner needs featurize (config -> feature row)")
        return XGBTuner(space, featurize, seed=seed, **options)
    if options:
        raise ValueError(f"the {name} tuner takes no options, got {sorted(options)}")
    return TUNERS[name](space, seed=seed)
