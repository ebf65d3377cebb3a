"""Model-guided search over config spaces: index arithmetic, exhaustive scoring of small spaces,
simulated annealing in large ones."""
import math
import random

import pytest

from tilefuse.autotune.search import (from_digits, make_rng, radices, random_neighbor, simulated_annealing,
                             to_digits)
from tilefuse.schedule.space import ConfigSpace


def mixed_space():
    s = ConfigSpace()
    s.define_split("tile", 24, num_outputs=2)           # 8 candidates
    s.define_knob("order", ["ij", "ji"])
    s.define_knob("vector", [8, 16, 32])
    s.define_knob("single", [True])                     # a knob without a choice
    return s


def big_space(knobs=6, values=12):
    s = ConfigSpace()
    for k in range(knobs):
        s.define_knob(f"k{k}", list(range(values)))
    return s


class CountingScore:
    """Score = minus the L1 distance of the digits to ``target``; counts what it scores."""

    def __init__(self, space, target):
        self.space, self.target, self.scored = space, target, []

    def __call__(self, indices):
        self.scored.extend(indices)
        return [-sum(abs(d - t) for d, t in zip(to_digits(self.space, i), self.target)) for i in indices]


def test_digits_match_the_space_indexing():
    s = mixed_space()
    assert radices(s) == [8, 2, 3, 1]
    for index in range(len(s)):
        digits = to_digits(s, index)
        cfg = s.get(index)
        assert [knob.candidates.index(cfg[name]) for name, knob in s.knobs.items()] == digits
        assert from_digits(s, digits) == index


def test_a_neighbor_changes_exactly_one_knob():
    s = mixed_space()
    rng = random.Random(0)
    changed_knobs = set()
    for index in range(0, len(s), 5):
        for _ in range(10):
            n = random_neighbor(s, index, rng)
            diff = [k for k, (a, b) in enumerate(zip(to_digits(s, n), to_digits(s, index))) if a != b]
            assert len(diff) == 1 and 0 <= n < len(s)
            changed_knobs.update(diff)
    assert changed_knobs == {0, 1, 2}                  # the knob without a choice never moves


def test_a_space_without_choices_has_no_other_neighbor():
    s = ConfigSpace()
    s.define_knob("only", [4])
    assert random_neighbor(s, 0, random.Random(0)) == 0
    assert simulated_annealing(s, lambda idx: [0.0] * len(idx), 3) == [0]


def test_small_space_is_scored_whole_and_best_first():
    s = mixed_space()
    score = CountingScore(s, [5, 1, 2, 0])
    exclude = {from_digits(s, [5, 1, 2, 0]), 3}
    best = simulated_annealing(s, score, 4, exclude=exclude, rng=1)
    assert sorted(score.scored) == [i for i in range(len(s)) if i not in exclude]
    values = score(best)
    assert values == sorted(values, reverse=True) and values[0] == -1
    assert not set(best) & exclude and len(best) == 4


def test_large_space_is_searched_without_enumeration():
    s = big_space()                                     # 12**6, about 3 million configs
    target = [3, 1, 4, 1, 5, 9]
    score = CountingScore(s, target)
    best = simulated_annealing(s, score, 5, rng=random.Random(0))
    assert len(best) == 5 and len(set(best)) == 5
    assert score(best[:1]) == [0]                      # found the optimum
    assert all(v >= -2 for v in score(best))
    assert len(set(score.scored)) < 15000               # a tiny part of the space


def test_large_space_respects_exclude_and_initial_points():
    s = big_space()
    target = [3, 1, 4, 1, 5, 9]
    optimum = from_digits(s, target)
    best = simulated_annealing(s, CountingScore(s, target), 3, exclude={optimum}, rng=2)
    assert optimum not in best and CountingScore(s, target)(best[:1]) == [-1]
    # no annealing steps: the result comes from the starting population, seeded with the optimum
    start = simulated_annealing(s, CountingScore(s, target), 1, rng=3, n_iter=0, initial=[optimum])
    assert start == [optimum]


def test_unscorable_configs_are_never_returned():
    s = mixed_space()
    bad = set(range(0, len(s), 2))

    def score(indices):
        return [(math.nan if i % 4 == 0 else -math.inf) if i in bad else float(i) for i in indices]
    best = simulated_annealing(s, score, len(s))
    assert best and not set(best) & bad and len(best) == len(s) - len(bad)
    big = big_space(4, 10)
    assert simulated_annealing(big, lambda idx: [-math.inf] * len(idx), 5, exhaustive_threshold=10) == []


def test_same_rng_seed_same_result():
    s = big_space()

    def score(indices):   # many ties: the random tie-break must be seeded too
        return [float(sum(to_digits(s, i)) // 10) for i in indices]
    runs = [simulated_annealing(s, score, 8, rng=random.Random(7)) for _ in range(2)]
    assert runs[0] == runs[1]
    small = [simulated_annealing(mixed_space(), lambda idx: [0.0] * len(idx), 5, rng=4) for _ in range(2)]
    assert small[0] == small[1]


def test_nothing_to_return():
    s = mixed_space()
    assert simulated_annealing(s, lambda idx: [0.0] * len(idx), 0) == []
    assert simulated_annealing(s, lambda idx: [0.0] * len(idx), 3, exclude=range(len(s))) == []


def test_bad_arguments():
    s = mixed_space()
    with pytest.raises(ValueError, match="batch_size"):
        simulated_annealing(s, lambda idx: [0.0] * len(idx), -1)
    with pytest.raises(ValueError, match="population"):
        simulated_annealing(s, lambda idx: [0.0] * len(idx), 2, population=0)
    with pytest.raises(ValueError, match="2 scores for"):
        simulated_annealing(s, lambda idx: [0.0, 1.0], 2)
    with pytest.raises(TypeError, match="rng"):
        simulated_annealing(s, lambda idx: [0.0] * len(idx), 2, rng="seed")
    assert make_rng(5).random() == random.Random(5).random()
