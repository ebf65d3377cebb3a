"""Model-guided search over a ConfigSpace: which unmeasured configs does the model like best?

A ``ConfigSpace`` is a mixed-radix number system (``ConfigSpace.get``: one digit per knob, the
last knob fastest), so a config is an int index and a neighbour changes one digit: one knob or
split takes another of its candidates. ``simulated_annealing`` scores every config when the
space is small (cheaper and exact) and otherwise runs a population of annealing walkers,
never enumerating the space. Scores come from ``score_fn(indices) -> scores`` (higher is
better; ``-inf`` or NaN for a config that cannot be scored).

Example:
    >>> from tilefuse.schedule.space import ConfigSpace
    >>> s = ConfigSpace(); s.define_knob("a", list(range(10))); s.define_knob("b", list(range(10)))
    >>> best = simulated_annealing(s, lambda idx: [-abs(i - 42.2) for i in idx], 3, exclude={42})
    >>> sorted(best)
    [41, 43, 44]
"""
from __future__ import annotations

import heapq
import math
import random
from typing import Callable, Iterable, Sequence

from tilefuse.schedule.space import ConfigSpace

ScoreFn = Callable[[Sequence[int]], Sequence[float]]


def make_rng(rng=None) -> random.Random:
    """A ``random.Random`` from a seed (int), an existing one (returned as is) or None (seed 0).

    Example:
        >>> make_rng(3).random() == make_rng(3).random()
        True
    """
    if rng is None:
        return random.Random(0)
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return random.Random(rng)
    raise TypeError(f"rng must be a random.Random, an int seed or None, got {type(rng).__name__}")


def radices(space: ConfigSpace) -> list[int]:
    """Number of candidates of each knob, in the space's knob order.

    Example:
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", "xyz")
        >>> radices(s)
        [2, 3]
    """
    return list(space.radices)


def to_digits(space: ConfigSpace, index: int) -> list[int]:
    """The candidate position of each knob in config ``index`` (inverse of ``from_digits``).

    Example:
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", "xyz")
        >>> to_digits(s, 4), s.get(4).values
        ([1, 1], {'a': 2, 'b': 'y'})
    """
    return space.digits(index)


def from_digits(space: ConfigSpace, digits: Sequence[int]) -> int:
    """The config index whose knobs take candidate positions ``digits``.

    Example:
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", "xyz")
        >>> from_digits(s, [1, 1])
        4
    """
    index = 0
    for d, r in zip(digits, space.radices):
        index = index * r + d
    return index


def random_neighbor(space: ConfigSpace, index: int, rng: random.Random) -> int:
    """``index`` with one knob (that has a choice) moved to another of its candidates; the
    index itself when no knob has a choice.

    Example:
        >>> s = ConfigSpace(); s.define_knob("a", [1, 2, 3]); s.define_knob("b", [0, 1])
        >>> n = random_neighbor(s, 0, random.Random(1))
        >>> n != 0 and sum(x != y for x, y in zip(to_digits(s, n), to_digits(s, 0)))
        1
    """
    sizes = space.radices
    free = [k for k, r in enumerate(sizes) if r > 1]
    if not free:
        return index
    digits = to_digits(space, index)
    k = free[rng.randrange(len(free))]
    new = rng.randrange(sizes[k] - 1)
    digits[k] = new + 1 if new >= digits[k] else new
    return from_digits(space, digits)


class _Scores:
    """``score_fn`` behind a cache, checked: one finite-or-(-inf) float per index."""

    def __init__(self, score_fn: ScoreFn):
        self.score_fn = score_fn
        self.known: dict[int, float] = {}
        self.fresh: list[int] = []         # the indices the last call scored

    def __call__(self, indices: Sequence[int]) -> list[float]:
        unknown = self.fresh = [i for i in dict.fromkeys(indices) if i not in self.known]
        if unknown:
            values = list(self.score_fn(unknown))
            if len(values) != len(unknown):
                raise ValueError(f"score_fn returned {len(values)} scores for {len(unknown)} configs")
            for i, v in zip(unknown, values):
                v = float(v)
                self.known[i] = v if v == v else -math.inf     # NaN: cannot be scored
        return [self.known[i] for i in indices]


def _best_of(pool: list, scores: dict, fresh: list, exclude: set, k: int) -> list:
    """The ``k`` best (score, index) pairs of ``pool`` (what this returned before) and the
    ``fresh`` indices of ``scores``, as ``_top`` without ``rng`` ranks them: scores never
    change, so the best of all scored so far is among these."""
    items = pool + [(-scores[i], i) for i in fresh if i not in exclude and scores[i] > -math.inf]
    return heapq.nsmallest(k, items)


def _top(scores: dict, exclude: set, k: int, rng: random.Random | None = None) -> list[int]:
    """The ``k`` best-scored indices not in ``exclude``; ties broken at random with ``rng``,
    else by index."""
    items = [(s, rng.random() if rng else i, i) for i, s in scores.items()
             if i not in exclude and s > -math.inf]
    return [i for _, _, i in heapq.nsmallest(k, items, key=lambda t: (-t[0], t[1]))]


def simulated_annealing(space: ConfigSpace, score_fn: ScoreFn, batch_size: int,
                        exclude: Iterable[int] = (), rng=None, n_iter: int = 150,
                        population: int = 64, temperature: tuple = (1.0, 0.0),
                        initial: Iterable[int] = (), exhaustive_threshold: int = 2048,
                        patience: int = 30) -> list[int]:
    """Indices of up to ``batch_size`` configs not in ``exclude``, best score first.

    When ``len(space) <= exhaustive_threshold`` every config is scored. Otherwise
    ``population`` walkers start at the ``initial`` indices (e.g. the best measured configs)
    and random points, and for ``n_iter`` steps each moves to a random neighbour, accepted if
    it scores at least as well or else with probability ``exp(delta / (T * spread))``, the
    temperature ``T`` falling linearly from ``temperature[0]`` to ``temperature[1]`` and
    ``spread`` the standard deviation of the first scores. The walk stops early when the best
    ``batch_size`` have not changed for ``patience`` steps. Configs that score ``-inf`` (or
    NaN) are never returned, so fewer than ``batch_size`` may come back.

    Example:
        >>> s = ConfigSpace()
        >>> for k in "abcdef": s.define_knob(k, list(range(12)))      # 3 million configs
        >>> target = [3, 1, 4, 1, 5, 9]
        >>> def score(indices):
        ...     return [-sum(abs(d - t) for d, t in zip(to_digits(s, i), target)) for i in indices]
        >>> best = simulated_annealing(s, score, 4, rng=random.Random(0))
        >>> score(best[:1])
        [0]
    """
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    if population < 1 or n_iter < 0:
        raise ValueError(f"population must be >= 1 and n_iter >= 0, got {population} and {n_iter}")
    rng = make_rng(rng)
    exclude = set(exclude)
    size = len(space)
    scores = _Scores(score_fn)
    if batch_size == 0 or len(exclude) >= size:
        return []
    if size <= exhaustive_threshold:
        scores([i for i in range(size) if i not in exclude])
        return _top(scores.known, exclude, batch_size, rng)

    points = [i for i in dict.fromkeys(initial) if isinstance(i, int) and 0 <= i < size][:population]
    while len(points) < population:
        points.append(rng.randrange(size))
    current = scores(points)
    finite = [v for v in current if v > -math.inf]
    spread = _std(finite) or 1.0
    t_start, t_end = temperature
    pool = _best_of([], scores.known, list(scores.known), exclude, batch_size)
    best, stale = {i for _, i in pool}, 0
    for step in range(n_iter):
        t = t_start + (t_end - t_start) * step / max(n_iter - 1, 1)
        moved = [random_neighbor(space, p, rng) for p in points]
        new_scores = scores(moved)
        for k, (old, new) in enumerate(zip(current, new_scores)):
            if new >= old or old == -math.inf or (
                    t > 0 and new > -math.inf and rng.random() < math.exp((new - old) / (t * spread))):
                points[k], current[k] = moved[k], new
        pool = _best_of(pool, scores.known, scores.fresh, exclude, batch_size)
        top = {i for _, i in pool}
        if top == best:
            stale += 1
            if stale >= patience:
                break
        else:
            best, stale = top, 0
    return _top(scores.known, exclude, batch_size, rng)


def _std(values: list) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
