"""The common shape of a schedule template: a DAG, a config space, a default config and
``apply(config) -> Schedule``."""
from __future__ import annotations

from ..config_source import chosen_config
from ..hoist import build_prepacked
from ..schedule import Schedule, create_schedule
from ..space import Config, ConfigSpace
from .dag import Dag


class Template:
    """Schedules one operator class. Subclasses define ``define(space)``, ``default()`` and
    ``schedule(s, cfg)``.

    Example:
        >>> from tensorir import placeholder, compute
        >>> from schedule.templates import template_for
        >>> A = placeholder((1000,), name="A"); B = compute((1000,), lambda i: A[i] * 2.0, name="B")
        >>> t = template_for(B)
        >>> s = t.apply(t.default_config()); f = t.build()
    """

    name = "template"

    def __init__(self, dag: Dag):
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
        cfg = self.chosen_config() if config is None else config
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
        return build_prepacked(self.apply(config), self.args, self.constants, name=name)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(t.name for t in self.outputs)}; {len(self.space)} configs)"


def fuse_all(stage, axes):
    """Fuse ``axes`` (consecutive leaves) into one loop; a single axis is returned as is."""
    axes = list(axes)
    return axes[0] if len(axes) == 1 else stage.fuse(*axes)


def lanes_for(dtype: str) -> int:
    """Elements in one 512-bit vector."""
    return {"float64": 8, "int64": 8, "float32": 16, "int32": 16}.get(dtype, 32)
