"""An xgboost cost model that ranks schedule candidates by predicted speed.

Training data are feature rows (``autotune.features``) with measured costs (seconds, lower is
better; ``inf`` or NaN for a candidate that failed). Costs are turned into a relevance per
ranking group (one group per task): ``min_cost_of_group / cost`` in (0, 1], failures 0. So
tasks of very different sizes train one model together, which is how records of other tasks of
the same template warm-start a new task (transfer learning). The model is fit with a ranking
objective (``rank:pairwise`` by default, ``rank:ndcg`` or the regression
``reg:squarederror`` on the relevance), one thread and a fixed seed, so the same data give
the same model. ``predict`` returns scores: higher means predicted faster.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((64, 4)); costs = 1.0 + x[:, 0]          # cost grows with feature 0
    >>> model = XGBCostModel(seed=0).fit(x, costs)
    >>> scores = model.predict(x)
    >>> bool(scores[np.argmin(costs)] > scores[np.argmax(costs)])
    True
"""
from __future__ import annotations

import numpy as np

OBJECTIVES = ("rank:pairwise", "rank:ndcg", "reg:squarederror")


def relevance(costs, groups=None) -> np.ndarray:
    """Per-group relevance of measured ``costs``: ``min cost of the group / cost`` for a
    success, 0 for a failure (a non-finite cost). ValueError for a cost <= 0.

    Example:
        >>> relevance([2.0, 1.0, float("inf"), 30.0, 10.0], groups=[0, 0, 0, 1, 1]).tolist()
        [0.5, 1.0, 0.0, 0.3333333333333333, 1.0]
    """
    costs = np.asarray(costs, dtype=np.float64).reshape(-1)
    groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups).reshape(-1)
    if len(groups) != len(costs):
        raise ValueError(f"{len(groups)} group ids for {len(costs)} costs")
    ok = np.isfinite(costs)
    if np.any(costs[ok] <= 0):
        raise ValueError(f"costs must be > 0 (seconds), got {costs[ok][costs[ok] <= 0][:3].tolist()}")
    out = np.zeros(len(costs))
    for g in np.unique(groups):
        member = groups == g
        good = member & ok
        if good.any():
            out[good] = costs[good].min() / costs[good]
    return out


class XGBCostModel:
    """Gradient-boosted trees ranking candidates; ``fit``/``update`` with measured costs,
    ``predict`` scores (higher = faster).

    ``objective``: "rank:pairwise" (default), "rank:ndcg" or "reg:squarederror".
    ``num_rounds``, ``max_depth``, ``eta``, ``colsample``, ``max_bin`` and
    ``min_child_weight`` are the usual xgboost knobs, set for a few hundred rows trained in
    well under a second (ranking gradients have small hessians, hence the small
    ``min_child_weight``); ``pairs_per_sample`` is xgboost's ``lambdarank_num_pair_per_sample``
    with the deterministic "topk" pair method.

    Example:
        >>> import numpy as np
        >>> x = np.arange(20, dtype=float).reshape(10, 2)
        >>> m = XGBCostModel(seed=1).fit(x, 1.0 + x[:, 0])
        >>> m.is_trained, m.num_rows
        (True, 10)
    """

    def __init__(self, seed: int = 0, objective: str = "rank:pairwise", num_rounds: int = 60,
                 max_depth: int = 6, eta: float = 0.3, colsample: float = 0.8, max_bin: int = 32,
                 min_child_weight: float = 0.01, pairs_per_sample: int = 64):
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
        if num_rounds < 1 or max_depth < 1 or not 0 < colsample <= 1 or max_bin < 2:
            raise ValueError("num_rounds and max_depth must be >= 1, colsample in (0, 1], max_bin >= 2")
        self.seed, self.objective, self.num_rounds = int(seed), objective, int(num_rounds)
        self.params = {
            "objective": objective, "max_depth": int(max_depth), "eta": float(eta),
            "colsample_bytree": float(colsample), "max_bin": int(max_bin),
            "min_child_weight": float(min_child_weight), "tree_method": "hist",
            "nthread": 1, "seed": int(seed), "verbosity": 0,
        }
        if objective.startswith("rank:"):
            # "topk" pairs are built deterministically (no sampling), focused on the best
            self.params.update(lambdarank_pair_method="topk", lambdarank_num_pair_per_sample=int(pairs_per_sample))
        if objective == "rank:ndcg":
            self.params["ndcg_exp_gain"] = False     # relevance is a real number in [0, 1]
        self._booster = None
        self._x = np.zeros((0, 0))
        self._costs = np.zeros(0)
        self._groups = np.zeros(0, dtype=np.int64)

    @property
    def is_trained(self) -> bool:
        """True once ``fit`` (or ``update``) has built a model."""
        return self._booster is not None

    @property
    def num_rows(self) -> int:
        """Rows the current model was trained on."""
        return len(self._costs)

    def fit(self, features, costs, groups=None) -> "XGBCostModel":
        """Train from scratch on ``features`` (rows x columns; NaN = missing), ``costs`` (one
        per row, lower is better, non-finite = failed) and ``groups`` (a task id per row,
        default all 0). Returns self.

        Example:
            >>> import numpy as np
            >>> x = np.random.default_rng(0).random((20, 3)); costs = 1.0 + x[:, 0]
            >>> model = XGBCostModel(seed=0).fit(x, costs, groups=[0] * 10 + [1] * 10)   # two tasks
            >>> model.is_trained, model.num_rows
            (True, 20)
        """
        x, costs, groups = self._check(features, costs, groups)
        self._x, self._costs, self._groups = x, costs, groups
        self._train()
        return self

    def update(self, features, costs, groups=None) -> "XGBCostModel":
        """Add rows to the training data and refit on all of them. Returns self.

        Example:
            >>> import numpy as np
            >>> x = np.random.default_rng(0).random((20, 3)); costs = 1.0 + x[:, 0]
            >>> model = XGBCostModel(seed=0).fit(x[:10], costs[:10])
            >>> model.update(x[10:], costs[10:]).num_rows        # as measurements arrive
            20
        """
        x, costs, groups = self._check(features, costs, groups)
        if len(self._costs) and x.shape[1] != self._x.shape[1]:
            raise ValueError(f"new rows have {x.shape[1]} features, the model's have {self._x.shape[1]}")
        if len(self._costs):
            x = np.vstack([self._x, x])
            costs = np.concatenate([self._costs, costs])
            groups = np.concatenate([self._groups, groups])
        self._x, self._costs, self._groups = x, costs, groups
        self._train()
        return self

    def predict(self, features) -> np.ndarray:
        """Scores of ``features`` rows: higher means predicted faster. RuntimeError before
        the model is trained.

        Example:
            >>> import numpy as np
            >>> x = np.random.default_rng(0).random((20, 3)); costs = 1.0 + x[:, 0]
            >>> model = XGBCostModel(seed=0).fit(x, costs)
            >>> order = np.argsort(-model.predict(x))            # predicted fastest first
            >>> bool(costs[order[:5]].mean() < costs[order[-5:]].mean())
            True
        """
        if self._booster is None:
            raise RuntimeError("the cost model is not trained yet; call fit() first")
        import xgboost as xgb
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self._x.shape[1]:
            raise ValueError(f"predict needs rows of {self._x.shape[1]} features, got shape {x.shape}")
        if not len(x):
            return np.zeros(0)
        return self._booster.predict(xgb.DMatrix(x, missing=np.nan))

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _check(features, costs, groups):
        x = np.asarray(features, dtype=np.float64)
        costs = np.asarray(costs, dtype=np.float64).reshape(-1)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-D array (rows x features), got shape {x.shape}")
        if len(x) != len(costs):
            raise ValueError(f"{len(x)} feature rows for {len(costs)} costs")
        if not len(x):
            raise ValueError("no training rows")
        groups = np.zeros(len(costs), dtype=np.int64) if groups is None else np.asarray(groups).reshape(-1)
        if len(groups) != len(costs):
            raise ValueError(f"{len(groups)} group ids for {len(costs)} costs")
        try:
            groups = groups.astype(np.int64, casting="safe")
        except TypeError:
            raise ValueError(f"group ids must be integers, got dtype {groups.dtype}") from None
        relevance(costs, groups)                 # validates the costs
        return x, costs, groups

    def _train(self) -> None:
        import xgboost as xgb
        order = np.argsort(self._groups, kind="stable")      # xgboost wants qid sorted
        x, groups = self._x[order], self._groups[order]
        label = relevance(self._costs, self._groups)[order]
        dtrain = xgb.DMatrix(x, label=label, missing=np.nan)
        if self.objective.startswith("rank:"):
            dtrain.set_info(qid=groups)
        self._booster = xgb.train(self.params, dtrain, num_boost_round=self.num_rounds)
