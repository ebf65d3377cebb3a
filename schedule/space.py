"""Configuration spaces of schedule templates, in the spirit of AutoTVM.

A template declares knobs on a ``ConfigSpace``:

* ``define_split(name, extent, num_outputs, policy)`` - tile sizes for splitting an axis of
  ``extent`` into ``num_outputs`` loops, outermost first; the outermost size is -1 ("the rest").
  Policy "factors" keeps sizes whose product divides the extent, "power2" powers of two up to
  the extent, "candidate" an explicit list;
* ``define_knob(name, values)`` - one of a list of plain values;
* ``define_reorder(name, n, policy)`` - a permutation of n loops ("all", or "candidate");
* ``define_annotate(name, n, options)`` - one annotation per loop from ``options``.

The space is the product of the knobs; it can be enumerated, indexed, sampled. A ``Config``
is one point: a mapping from knob name to a JSON value, which round-trips through JSON exactly.
"""
from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from tilefuse.tensorir.errors import TilefuseError


class ConfigError(TilefuseError, ValueError):
    """A knob defined twice, an empty knob, an index out of range or a config that is not a
    point of the space."""


@dataclass(frozen=True)
class Knob:
    """A named list of candidate values (each a JSON value: int, str, bool or list of them);
    ``absent`` is () or the 1-tuple of the value a config without this knob has (a knob added
    to a template after configs of it were stored)."""
    name: str
    kind: str
    candidates: tuple
    absent: tuple = ()

    def __len__(self):
        return len(self.candidates)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else [1]


def _split_candidates(extent: int, num_outputs: int, policy: str, candidate, max_factor: int | None):
    if policy == "candidate":
        if not candidate:
            raise ConfigError("define_split with policy 'candidate' needs candidate=[...]")
        out = []
        for sizes in candidate:
            sizes = tuple(int(x) for x in sizes)
            if len(sizes) != num_outputs or any(x < 1 for x in sizes[1:]):
                raise ConfigError(f"split candidate {sizes} must have {num_outputs} sizes, inner ones >= 1")
            out.append((-1,) + sizes[1:])
        return out
    if policy == "factors":
        options = _divisors(extent)
    elif policy == "power2":
        options = [1 << p for p in range(max(extent, 1).bit_length())]
    else:
        raise ConfigError(f"unknown split policy {policy!r}; expected 'factors', 'power2' or 'candidate'")
    if max_factor is not None:
        options = [o for o in options if o <= max_factor]
    out = []
    for inner in itertools.product(options, repeat=num_outputs - 1):
        product = 1
        for x in inner:
            product *= x
        if policy == "factors" and extent % product:
            continue
        if policy == "power2" and product > max(extent, 1):
            continue
        out.append((-1,) + inner)
    return out


class ConfigSpace:
    """The knobs of a template and the configurations they span.

    Example:
        >>> space = ConfigSpace()
        >>> space.define_split("tile_i", 64, num_outputs=2, policy="power2")
        >>> space.define_knob("unroll", [1, 4])
        >>> len(space), space.get(0)["tile_i"], space.get(len(space) - 1)["unroll"]
        (14, [-1, 1], 4)
    """

    def __init__(self):
        self.knobs: dict[str, Knob] = {}
        self.rules: list = []           # predicates over a config's values that a point to search must meet
        self._searchable: dict[int, bool] = {}   # index -> searchable(index), while no knob or rule is added
        self._radices: tuple | None = None       # candidates per knob, while no knob is added

    def _add(self, name: str, kind: str, candidates, absent: tuple = ()) -> None:
        if name in self.knobs:
            raise ConfigError(f"knob {name!r} is defined twice")
        candidates = tuple(_jsonable(c) for c in candidates)
        if not candidates:
            raise ConfigError(f"knob {name!r} has no candidate values")
        absent = tuple(_jsonable(a) for a in absent)
        if absent and absent[0] not in candidates:
            raise ConfigError(f"knob {name!r}: its value when absent, {absent[0]!r}, is not a candidate")
        self.knobs[name] = Knob(name, kind, candidates, absent)
        self._searchable.clear()
        self._radices = None

    def define_split(self, name: str, axis, num_outputs: int = 2, policy: str = "factors",
                     candidate=None, max_factor: int | None = None) -> None:
        """Tile sizes for ``axis`` (an axis, or its extent): lists of ``num_outputs`` sizes,
        outermost -1.

        Example:
            >>> s = ConfigSpace(); s.define_split("t", 12, 2)
            >>> s.knobs["t"].candidates
            ([-1, 1], [-1, 2], [-1, 3], [-1, 4], [-1, 6], [-1, 12])
        """
        if num_outputs < 2:
            raise ConfigError(f"define_split {name!r}: num_outputs must be >= 2")
        extent = getattr(axis, "dom_extent", axis)
        self._add(name, "split", _split_candidates(int(extent), num_outputs, policy, candidate, max_factor))

    def define_knob(self, name: str, values, *absent) -> None:
        """One of ``values``; a knob added to a template later gives the value configs stored
        without it take, ``absent`` (one of ``values``), so they stay points of the space.

        Example:
            >>> s = ConfigSpace(); s.define_knob("vector", [8, 16]); len(s)
            2
            >>> s.define_knob("unroll", [1, 4], 1); s.index_of(Config({"vector": 16}))
            2
        """
        if len(absent) > 1:
            raise ConfigError(f"define_knob {name!r}: one value when absent, got {len(absent)}")
        self._add(name, "knob", list(values), absent)

    def define_reorder(self, name: str, axes, policy: str = "all", candidate=None) -> None:
        """A permutation of ``axes`` (a list of loops, or their number): all of them, or the
        ``candidate`` ones.

        Example:
            >>> s = ConfigSpace(); s.define_reorder("order", 3); len(s)
            6
        """
        n = axes if isinstance(axes, int) else len(axes)
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "candidate":
            perms = [tuple(p) for p in (candidate or [])]
            for p in perms:
                if sorted(p) != list(range(n)):
                    raise ConfigError(f"define_reorder {name!r}: {list(p)} is not a permutation of {n} loops")
        else:
            raise ConfigError(f"unknown reorder policy {policy!r}; expected 'all' or 'candidate'")
        self._add(name, "reorder", perms)

    def define_annotate(self, name: str, axes, options=("none", "unroll")) -> None:
        """One annotation ("none", "unroll", "vectorize", "parallel") for each of ``axes`` (a
        list of loops, or their number).

        Example:
            >>> s = ConfigSpace(); s.define_annotate("ann", 2, ["none", "unroll"]); len(s)
            4
        """
        for o in options:
            if o not in ("none", "unroll", "vectorize", "parallel"):
                raise ConfigError(f"define_annotate {name!r}: unknown annotation {o!r}")
        n = axes if isinstance(axes, int) else len(axes)
        self._add(name, "annotate", list(itertools.product(options, repeat=n)))

    def define_rule(self, predicate) -> None:
        """Only points whose values (a dict) meet ``predicate`` are worth searching: the
        others compute the same kernel as one that does, a kernel slower by construction (a
        loop split by a factor that does not divide it, where one that does costs no guard),
        or none. Tuners skip them before they are built; they stay points of the space (a
        stored config may be one, and it compiles as any other).

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [0, 1]); s.define_knob("b", [0, 1])
            >>> s.define_rule(lambda v: not (v["a"] and v["b"]))
            >>> [s.searchable(i) for i in range(len(s))]
            [True, True, True, False]
        """
        self.rules.append(predicate)
        self._searchable.clear()

    def searchable(self, index: int) -> bool:
        """Whether the point at ``index`` meets every rule (``define_rule``).

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.searchable(1)
            True
        """
        if not self.rules:
            return True
        known = self._searchable.get(index)
        if known is None:       # a search over a large space asks again for the points it walks back to
            values = self.get(index).values
            known = self._searchable[index] = all(rule(values) for rule in self.rules)
        return known

    # ------------------------------------------------------------------ points
    @property
    def radices(self) -> tuple:
        """The number of candidates of each knob, in knob order.

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", "xyz")
            >>> s.radices
            (2, 3)
        """
        if self._radices is None:
            self._radices = tuple(len(k) for k in self.knobs.values())
        return self._radices

    def __len__(self) -> int:
        n = 1
        for r in self.radices:
            n *= r
        return n

    def digits(self, index: int) -> list[int]:
        """The candidate position of each knob at point ``index``, in knob order (``index`` is
        mixed-radix over the knobs, the last knob fastest; not checked against the space's size).

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", ["x", "y", "z"])
            >>> s.digits(4)
            [1, 1]
        """
        picks = []
        for radix in reversed(self.radices):
            index, pick = divmod(index, radix)
            picks.append(pick)
        picks.reverse()
        return picks

    def get(self, index: int) -> "Config":
        """The configuration at ``index`` (mixed-radix over the knobs, last knob fastest).

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", ["x", "y", "z"])
            >>> s.get(4).values
            {'a': 2, 'b': 'y'}
        """
        if not isinstance(index, int) or not 0 <= index < len(self):
            raise ConfigError(f"config index {index!r} out of range for a space of {len(self)}")
        values = {}
        for knob, pick in zip(self.knobs.values(), self.digits(index)):
            value = knob.candidates[pick]       # a JSON value already: only a list is copied
            values[knob.name] = _jsonable(value) if type(value) is list else value
        return Config._of_candidates(values)

    def index_of(self, config: "Config") -> int:
        """The index of ``config`` in this space; ConfigError if it is not a point of it.

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2, 3])
            >>> s.index_of(s.get(2))
            2
        """
        config = self.complete(config)
        if set(config.values) != set(self.knobs):
            raise ConfigError(f"config knobs {sorted(config.values)} do not match the space's {sorted(self.knobs)}")
        index = 0
        for knob in self.knobs.values():
            try:
                pick = knob.candidates.index(config.values[knob.name])
            except ValueError:
                raise ConfigError(f"knob {knob.name!r} has no candidate {config.values[knob.name]!r}") from None
            index = index * len(knob) + pick
        return index

    def complete(self, config: "Config") -> "Config":
        """``config`` with each knob it lacks that has a value when absent set to it (a config
        stored before the knob was added); ``config`` itself when it lacks none.

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", [1, 2]); s.define_knob("b", [0, 4], 0)
            >>> s.complete(Config({"a": 2})).values
            {'a': 2, 'b': 0}
        """
        missing = {k.name: k.absent[0] for k in self.knobs.values() if k.absent and k.name not in config.values}
        return Config({**config.values, **missing}) if missing else config

    def __iter__(self):
        return (self.get(i) for i in range(len(self)))

    def sample(self, n: int, seed: int = 0) -> list["Config"]:
        """``n`` distinct configurations drawn uniformly (all of them if the space is smaller).

        Example:
            >>> s = ConfigSpace(); s.define_knob("a", list(range(10)))
            >>> len({c.to_json() for c in s.sample(5, seed=1)})
            5
        """
        total = len(self)
        indices = range(total) if n >= total else random.Random(seed).sample(range(total), n)
        return [self.get(i) for i in indices]


class Config:
    """One point of a ConfigSpace: knob name -> value. ``cfg["tile_i"]`` reads a knob.

    Example:
        >>> c = Config({"tile_i": [-1, 4], "unroll": True})
        >>> Config.from_json(c.to_json()) == c
        True
    """

    def __init__(self, values: dict):
        self.values = {k: _jsonable(v) for k, v in values.items()}

    @classmethod
    def _of_candidates(cls, values: dict) -> "Config":
        """A Config of knob candidates (checked JSON values when their knob was defined)."""
        config = cls.__new__(cls)
        config.values = values
        return config

    def __getitem__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise ConfigError(f"config has no knob {name!r}; it has {sorted(self.values)}") from None

    def __eq__(self, other):
        return isinstance(other, Config) and self.values == other.values

    def __hash__(self):
        return hash(self.to_json())

    def __repr__(self):
        return f"Config({self.values})"

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no spaces).

        Example:
            >>> Config({"b": 1, "a": [-1, 2]}).to_json()
            '{"a":[-1,2],"b":1}'
        """
        return json.dumps(self.values, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "Config":
        """The Config written by ``to_json``; ConfigError for anything else.

        Example:
            >>> Config.from_json('{"a": 1}')["a"]
            1
        """
        try:
            values = json.loads(text)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"config is not valid JSON: {err}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"config JSON must be an object of knob values, got {type(values).__name__}")
        return Config(values)


def _jsonable(value):
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value
    raise ConfigError(f"knob value {value!r} is not a JSON value")
