"""The common shape of a schedule template: a DAG, a config space, a default config and
``apply(config) -> Schedule``; and ``template_for``, which picks the template of a DAG's
operator class among the subclasses (each registers itself in ``TEMPLATES`` by its ``name``).
"""
from __future__ import annotations

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime.target import Target, as_target
from tilefuse.tensorir.tensor import Tensor

from ..config_source import chosen_config
from ..hoist import build_prepacked
from ..schedule import Schedule, create_schedule
from ..space import Config, ConfigSpace
from .dag import Dag


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
            >>> # t.default_config() -> Config({...})
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
            >>> # [c["winograd"] for c in t.starting_points()] -> [2, 4] for a 3x3 convolution
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
            >>> # t.chosen_config() -> the tuned config inside autotune.apply_history_best
        """
        return chosen_config(self)

    def apply(self, config: Config | None = None) -> Schedule:
        """A schedule of the outputs with ``config`` (default: ``chosen_config()``) applied.

        Example:
            >>> # s = t.apply(t.space.get(3))
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
            >>> # f = t.build(t.default_config()); f(*arrays)
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
        >>> # vectorize_by_registers(s[C], ji, 48, 16): three unrolled 16-lane vectors
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
    wide, read along the stage's reduce axes in order) ``nbytes`` bytes of panel ahead: each
    trip of the outermost reduce axis sweeps ``width`` values times the inner axes' extents.

    Example:
        >>> # fetch_panel_ahead(s[local], packed, 32, 2048)   # a 1x1 convolution: 16 channels ahead
    """
    outer, *inner = stage.op.reduce_axis
    stretch = width * itemsize(panel.dtype)
    for axis in inner:
        stretch *= axis.dom_extent
    stage.prefetch(panel, outer, max(1, round(nbytes / stretch)))
