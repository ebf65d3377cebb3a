"""schedule: Halide/TVM-style schedules over tensorir algorithms, lowering and building.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import create_schedule, lower, build
    >>> A = placeholder((100,), name="A")
    >>> B = compute((100,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B)
    >>> xo, xi = s[B].split(B.op.axis[0], factor=16)
    >>> s[B].vectorize(xi)
    >>> f = build(s, [A, B])
"""
from .build import build
from .config_source import ConfigSource, FixedConfigs, chosen_config, using_configs
from .lower import lower
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .space import Config, ConfigError, ConfigSpace
from .templates import Template, template_for

__all__ = ["build", "lower", "Schedule", "ScheduleError", "Stage", "create_schedule", "ConfigSource", "FixedConfigs",
           "chosen_config", "using_configs",
           "Config", "ConfigError", "ConfigSpace", "Template", "template_for"]
