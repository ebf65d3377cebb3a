"""The common shape of a schedule template: a DAG, a config space, a default config and
``apply(config) -> Schedule``; and ``template_for``, which picks the template of a DAG's
operator class among the subclasses (each registers itself in ``TEMPLATES`` by its ``name``).
"""
from __future__ import annotations

import math

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime.target import Target, as_target
from tilefuse.tensorir.tensor import Tensor

from ..config_source import chosen_config
from ..hoist import build_prepacked
from ..schedule import Schedule, create_schedule
from ..space import Config, ConfigSpace
from .dag import Dag

CACHE_LINE_BYTES = 64


TEMPLATES: dict = {}
"""Template classes by operator class name (injective, reduction, complex, opaque)."""


def template_for(outputs, target: Target | str | None = None) -> "Template":
    """The template for the DAG under ``outputs`` (a tensor or a list of them), generating
    code for ``target`` (``as_target``: default the host, or a Target, or a string such as
    ``"llvm -mcpu=skylake-avx512"``): its vector lanes and registers, and what ``build``
    compiles for. A template that raises ``Unsupported`` for the
    DAG's shape gives way to the opaque template; any other error propagates.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] + 1.0, name="B")
        >>> template_for(B).name
        'injective'
        >>> t = template_for(B, "llvm -mcpu=skylake-avx512")
        >>> t.default_config()["vector"], "zmm" in t.build().source("asm")
        (16, True)
    """
    target = as_target(target)
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    dag = Dag.of(outputs)
    try:
        return TEMPLATES[dag.kind()](dag, target)
    except Unsupported:           # the DAG has the class but not a shape the template handles
        return TEMPLATES["opaque"](dag, target)


class Template:
    """Schedules one operator class for a target (default: the host; vector lanes come from
    it). Subclasses set ``name`` (their operator class) and define ``define(space)``,
    ``default()`` and ``schedule(s, cfg)``.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule.templates import template_for
        >>> A = placeholder((1000,), name="A"); B = compute((1000,), lambda i: A[i] * 2.0, name="B")
        >>> t = template_for(B)
        >>> s = t.apply(t.default_config()); f = t.build()
    """

    name = "template"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        TEMPLATES[cls.name] = cls

    def __init__(self, dag: Dag, target: Target | str | None = None):
        self.target = as_target(target)
        self.dag = dag
        self.outputs = dag.outputs
        self.space = ConfigSpace()
        self.define(self.space)

    # -- for subclasses
    def define(self, space: ConfigSpace) -> None:
        """Declare the knobs."""

    def default(self) -> dict:
        """Knob values chosen by a simple rule (not by tuning)."""
        return {}

    def schedule(self, s: Schedule, cfg: Config) -> None:
        """Apply ``cfg`` to the default schedule ``s``."""

    # -- public
    @property
    def args(self) -> list:
        """Kernel arguments: the inputs in order of first use, then the outputs."""
        return list(self.dag.placeholders) + list(self.outputs)

    def default_config(self) -> Config:
        """The template's default point of its space.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.tensorir.runtime.target import Target
            >>> A = placeholder((1000,), name="A"); B = compute((1000,), lambda i: A[i] * 2.0, name="B")
            >>> template_for(B, Target.of("haswell", "+avx2,+fma")).default_config()     # 8 lanes of float32
            Config({'vector': 8, 'unroll': 4, 'parallel': False})
        """
        cfg = Config(self.default())
        self.space.index_of(cfg)   # it must be a point of the space
        return cfg

    def starting_points(self) -> list[Config]:
        """Configs a search measures first, with the default: one per other algorithm the
        template can take, at its rule-based settings (a random point of a space of 10^4 is
        unlikely to fall in an algorithm's few hundred, so a tuner would seldom learn of it).
        Points of the space that its rules allow; none for most templates.

        Example:
            >>> from tilefuse.tensorir import placeholder, ops
            >>> x = placeholder((1, 8, 8, 4), name="x"); w = placeholder((3, 3, 4, 8), name="w", constant=True)
            >>> t = template_for(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))      # a 3x3 convolution
            >>> [(c["winograd"], c["winograd_fused"]) for c in t.starting_points()]  # Winograd F(m, 3), fused or not
            [(2, False), (2, True), (3, False), (3, True), (4, False), (4, True)]
        """
        default = self.default_config()
        found = [Config({**default.values, **values}) for values in self.alternatives()]
        return [cfg for cfg in found if cfg != default and self.space.searchable(self.space.index_of(cfg))]

    def alternatives(self) -> list[dict]:
        """The knob values, over the default's, of each other algorithm (``starting_points``)."""
        return []

    def chosen_config(self) -> Config:
        """The config of the innermost active ``ConfigSource`` (``schedule.using_configs``)
        that has one for this template, else ``default_config()``.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import FixedConfigs, using_configs
            >>> A = placeholder((100,), name="A"); t = template_for(compute((100,), lambda i: A[i] * 2.0))
            >>> with using_configs(FixedConfigs(lambda template: template.space.get(3))):   # as a tuning database would
            ...     t.chosen_config() == t.space.get(3)
            True
            >>> t.chosen_config() == t.default_config()          # no source active
            True
        """
        return chosen_config(self)

    def apply(self, config: Config | None = None) -> Schedule:
        """A schedule of the outputs with ``config`` (default: ``chosen_config()``) applied.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import lower
            >>> A = placeholder((64,), name="A"); B = compute((64,), lambda i: A[i] * 2.0, name="B")
            >>> t = template_for(B, Target.of("haswell", "+avx2,+fma"))
            >>> print(lower(t.apply(Config({"vector": 16, "unroll": 4, "parallel": False})), t.args))
            func main(A: float32[64], B: float32[64]) {
              unrolled (i.outer.inner, 0, 4) {
                vectorized (i.inner, 0, 16) {
                  B[i.outer.inner * 16 + i.inner] = A[i.outer.inner * 16 + i.inner] * 2f
                }
              }
            }
        """
        cfg = self.space.complete(self.chosen_config() if config is None else config)
        self.space.index_of(cfg)   # ConfigError if it is not a point of this space
        s = create_schedule(self.outputs)
        self.schedule(s, cfg)
        return s

    @property
    def constants(self) -> list:
        """The inputs marked constant (``placeholder(..., constant=True)``: weights)."""
        return [p for p in self.dag.placeholders if p.op.tag == "constant"]

    def build(self, config: Config | None = None, name: str = "main"):
        """Build the schedule for ``config`` (default: ``chosen_config()``) with ``args`` as the
        kernel's parameters; stages reading only ``constants`` (packed weights) run once per
        weight array (``schedule.hoist``).

        Example:
            >>> import numpy as np
            >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
            >>> A = placeholder((16, 32), name="A"); W = placeholder((32, 48), name="W", constant=True)
            >>> r = reduce_axis((0, 32), name="r")
            >>> C = compute((16, 48), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
            >>> t = template_for(C); f = t.build(t.default_config())      # W packed once per array
            >>> a, w = np.random.rand(16, 32).astype("float32"), np.random.rand(32, 48).astype("float32")
            >>> c = np.empty((16, 48), "float32"); f(a, w, c); np.allclose(c, a @ w, rtol=1e-5)
            True
        """
        return build_prepacked(self.apply(config), self.args, self.constants, name, self.target, self._build_pack)

    def _build_pack(self, tensor, name: str):
        """A prepacked stage built with the default config of its own template."""
        template = template_for(tensor, self.target)
        return template.build(template.default_config(), name=name), template.args[:-1]

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(t.name for t in self.outputs)}; {len(self.space)} configs)"


def fuse_all(stage, axes):
    """Fuse ``axes`` (consecutive leaves) into one loop; a single axis is returned as is."""
    axes = list(axes)
    return axes[0] if len(axes) == 1 else stage.fuse(*axes)


def vectorize_by_registers(stage, axis, width: int, lanes: int) -> None:
    """Vectorize ``axis`` (``width`` long), split into unrolled register-wide vectors when it
    holds a number of registers that is not a power of two (a 48-wide vector of 16-lane
    registers is three vectors, not one 48-lane value LLVM would spill to the stack; 32 and 64
    lanes it splits into registers itself, with less code to generate).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, lower
        >>> A = placeholder((4, 48), name="A"); B = compute((4, 48), lambda i, j: A[i, j] + 1.0, name="B")
        >>> s = create_schedule(B); vectorize_by_registers(s[B], B.op.axis[1], 48, 16)
        >>> print(lower(s, [A, B]))         # three unrolled 16-lane vectors
        func main(A: float32[4, 48], B: float32[4, 48]) {
          for (i, 0, 4) {
            unrolled (j.outer, 0, 3) {
              vectorized (j.inner, 0, 16) {
                B[i, j.outer * 16 + j.inner] = A[i, j.outer * 16 + j.inner] + 1f
              }
            }
          }
        }
        >>> s = create_schedule(B); vectorize_by_registers(s[B], B.op.axis[1], 48, 24)
        >>> [iv.name for iv in s[B].leaf_iter_vars]      # two registers: one vector, LLVM splits it
        ['i', 'j']
    """
    registers = width // lanes
    if width > lanes and width % lanes == 0 and registers & (registers - 1):
        outer, inner = stage.split(axis, factor=lanes)
        stage.unroll(outer)
        stage.vectorize(inner)
    else:
        stage.vectorize(axis)


def fetch_panel_ahead(stage, panel: Tensor, width: int, nbytes: int) -> None:
    """Have the reduction of ``stage`` fetch ``panel`` (weights in panels ``width`` values
    wide, read along the stage's reduce axes in order) ``nbytes`` bytes of panel ahead, into
    L2: each trip of the outermost reduce axis sweeps ``width`` values times the inner axes'
    extents.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
        >>> from tilefuse.schedule import create_schedule, lower
        >>> A = placeholder((8, 64), name="A"); W = placeholder((64, 32), name="W")
        >>> r = reduce_axis((0, 64), name="r")
        >>> C = compute((8, 32), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
        >>> s = create_schedule(C); fetch_panel_ahead(s[C], W, 32, 1024)    # 1 KiB: 8 rows of 32 floats
        >>> print(lower(s, [A, W, C]))
        func main(A: float32[8, 64], W: float32[64, 32], C: float32[8, 32]) {
          for (i, 0, 8) {
            for (j, 0, 32) {
              C[i, j] = 0f
              for (r, 0, 64) {
                prefetch (L2) W[r + 8, j]
                C[i, j] = C[i, j] + A[i, r] * W[r, j]
              }
            }
          }
        }
    """
    outer, *inner = stage.op.reduce_axis
    stretch = width * itemsize(panel.dtype)
    for axis in inner:
        stretch *= axis.dom_extent
    stage.prefetch(panel, outer, max(1, round(nbytes / stretch)), level=2)


def fetch_next_panel(stage, panel: Tensor, rows: list, tile_i: int, width: int, unroll: int) -> None:
    """Have ``stage``, a register tile of ``tile_i`` rows by one ``width``-wide panel of
    ``panel`` (weights packed as (panels, ..., width), read along the stage's reduce axes),
    whose row tiles each sweep the whole panel in turn before the next panel starts (the "ji"
    order), fetch the next panel while this one serves its rows: each trip of the reduction
    (``unroll`` steps of its innermost looping axis) fetches a line or a few of it, each row
    tile its own share, so that the panel is in L2 when the first row tile reaches it (into L2
    only: in L1 a panel's lines fetched ahead evict the lines the tile reads now; resnext50 ran
    1.02-1.04x as fast as with its weights fetched into L1, resnet18 and BERT-base as fast). ``rows``: the stage's data axes
    (leading axes first, the tiled row axis last) and their extents, as (axis, extent) pairs.
    Without it, the first row tile of every panel reads it from memory at the pace of its
    multiply-adds: BERT's 128x768x3072 layer, weights from memory, took 1.18x the time it
    takes with them in cache.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
        >>> from tilefuse.schedule import create_schedule, lower
        >>> A = placeholder((12, 64), name="A"); W = placeholder((64, 64), name="W")
        >>> r = reduce_axis((0, 64), name="r")
        >>> C = compute((12, 64), lambda i, j: sum(A[i, r] * W[r, j], axis=r), name="C")
        >>> s = create_schedule(C); P = s.pack(W, axis=1, block=32)
        >>> jo, ji = s[C].split(C.op.axis[1], factor=32); io, ii = s[C].split(C.op.axis[0], factor=4)
        >>> s[C].reorder(jo, io, r, ii, ji)
        >>> fetch_next_panel(s[C], P, [(C.op.axis[0], 12)], tile_i=4, width=32, unroll=1)
        >>> [line.strip() for line in str(lower(s, [A, W, C])).splitlines() if "prefetch" in line]
        ['prefetch (L2) W.packed[j.outer + 1, 0, i.outer % 2 * 1024 + r * 16]']

    A panel holds 128 lines: row tile 0 fetches the first 64 of the next one, a line a step,
    row tile 1 the other 64, and row tile 2 the first 64 again.
    """
    reduces = list(stage.op.reduce_axis)
    depth = math.prod(r.dom_extent for r in reduces)
    per_line = CACHE_LINE_BYTES // itemsize(panel.dtype)
    lines = -(-depth * width // per_line)                   # a panel's cache lines
    trips = depth // unroll
    (row, row_extent), lead = rows[-1], rows[:-1]
    row_tiles = -(-row_extent // tile_i)
    sweeps = row_tiles * math.prod(n for _, n in lead)     # row tiles per panel
    fetches = -(-lines // (sweeps * trips))                 # lines a trip fetches
    column = next(a for a in stage.op.axis if all(a is not r for r, _ in rows))

    def index(coords, m):
        tile = coords[row] // tile_i
        for k, (axis, n) in enumerate(lead):            # the row tile's place in the panel's sweep
            tile = tile + coords[axis] * (row_tiles * math.prod(n for _, n in lead[k + 1:]))
        step = 0                                        # the reduction's step, in the reduce loops' order
        for r in reduces:
            step = step * r.dom_extent + coords[r]
        # past the next panel's end, around again: never a panel further on, whose lines would
        # crowd L2 (1500 rows would sweep 15 panels ahead)
        line = ((tile * trips + step // unroll) * fetches + m) % lines
        return (coords[column] // width + 1, *[0] * (len(panel.shape) - 2), line * per_line)
    for m in range(fetches):
        stage.prefetch_at(panel, lambda coords, m=m: index(coords, m), level=2)
