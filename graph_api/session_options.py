"""What an ``InferenceSession`` takes besides its model, spelled as onnxruntime spells it:
``SessionOptions``, ``RunOptions``, ``GraphOptimizationLevel`` and the execution providers.

* ``providers``: ``["CPUExecutionProvider"]`` (also as ``("CPUExecutionProvider", {})``, with
  ``provider_options=[{}]``) or None; tilefuse runs on the CPU only, so any other provider, or
  a provider option, is a GraphError naming it.
* ``SessionOptions``: ``intra_op_num_threads`` (0: the process's count,
  ``tensorir.runtime.get_num_threads``; else this session's runs launch parallel loops with that
  many threads, whatever other sessions ask for), ``graph_optimization_level`` (which graph
  passes run, ``GRAPH_PASSES``), ``enable_profiling`` and ``profile_file_prefix`` (a Chrome
  trace of every run, ``graph_api.profiler``), ``log_severity_level`` (0 verbose and 1 info:
  each compile is reported on stderr; 2 warning, the default; 3 error and 4 fatal: the
  session's warnings are silenced) and ``logid`` (the tag of those lines). Setting any other
  field is a GraphError listing these.
* ``RunOptions``: ``log_severity_level`` (for the compiles a run does: a new input shape),
  ``logid`` (in the run's profile event) and ``terminate`` (checked before each step: a run
  whose options have it set, from another thread too, stops with a GraphError);
  ``only_execute_path_to_fetches=True`` and run config entries are refused at run, since
  tilefuse runs the whole compiled graph.

Example:
    >>> options = SessionOptions()
    >>> options.intra_op_num_threads = 2
    >>> options.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_BASIC
    >>> options.execution_mode = 1
    Traceback (most recent call last):
    ...
    tilefuse.graph_api.session_options.OptionError: SessionOptions has no field 'execution_mode'; tilefuse's are enable_profiling, graph_optimization_level, intra_op_num_threads, log_severity_level, logid, profile_file_prefix
    >>> checked_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], None)
    Traceback (most recent call last):
    ...
    tilefuse.graph_api.session_options.OptionError: provider 'CUDAExecutionProvider' is not available: tilefuse runs on the CPU only (providers=['CPUExecutionProvider'])
"""
from __future__ import annotations

import enum

from .logical_tensor import GraphError
from .passes import (DEFAULT, compute_half_floats_in_f32, eliminate_common_subexpressions, eliminate_dead_ops,
                     flatten_dense_rows, flatten_pointwise_convolutions, fold_batch_norms, fold_constants,
                     fold_into_weights, fold_transposes_into_attention, fuse_attention, recognize_norms,
                     simplify_algebra, split_grouped_convolutions)

CPU = "CPUExecutionProvider"
PROVIDERS = [CPU]
"""The providers tilefuse has, as ``get_providers`` lists them."""


def get_available_providers() -> list:
    """The execution providers tilefuse has, as onnxruntime's function of that name lists its own.

    Example:
        >>> get_available_providers()
        ['CPUExecutionProvider']
    """
    return list(PROVIDERS)


class OptionError(GraphError, AttributeError):
    """A session or run option tilefuse does not have or cannot honour; the message names it
    and what there is instead."""


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's levels (same names and values); ``GRAPH_PASSES`` says what each runs."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


_BASIC = (compute_half_floats_in_f32, fold_constants, fold_into_weights, fold_batch_norms, simplify_algebra,
          split_grouped_convolutions, eliminate_common_subexpressions, eliminate_dead_ops)
_EXTENDED = (compute_half_floats_in_f32, fold_constants, recognize_norms, fold_into_weights, fold_batch_norms,
             simplify_algebra, fuse_attention, fold_transposes_into_attention, split_grouped_convolutions,
             flatten_pointwise_convolutions, flatten_dense_rows, simplify_algebra, eliminate_common_subexpressions,
             eliminate_dead_ops)
GRAPH_PASSES = {
    GraphOptimizationLevel.ORT_DISABLE_ALL: ("debug", ()),
    GraphOptimizationLevel.ORT_ENABLE_BASIC: ("fusion", _BASIC),
    GraphOptimizationLevel.ORT_ENABLE_EXTENDED: ("fusion", _EXTENDED),
    GraphOptimizationLevel.ORT_ENABLE_LAYOUT: ("fusion", DEFAULT),
    GraphOptimizationLevel.ORT_ENABLE_ALL: ("fusion", DEFAULT),
}
"""(partition policy, graph passes) per level, onnxruntime's categories mapped onto ours.
DISABLE_ALL: no pass, every op a partition of its own (no fusion); BASIC: constant folding,
folds into weights and batch norms, algebraic simplification, grouped convolutions split,
common subexpressions, dead ops, elementwise ops fused into their producer's kernel;
EXTENDED: also norms and attention written op by op recognised as one op each (attention reading
and writing its heads where they lie), dense rows and the pixels of pointwise convolutions
flattened into one GEMM;
LAYOUT and ALL: also the channels-last layout plan (every pass, ``passes.DEFAULT``)."""


def optimization_level(value) -> GraphOptimizationLevel:
    """``value`` as a level: one of ours, its int value, or anything named like one
    (onnxruntime's own enum); OptionError otherwise.

    Example:
        >>> optimization_level(99), optimization_level("ORT_DISABLE_ALL")
        (<GraphOptimizationLevel.ORT_ENABLE_ALL: 99>, <GraphOptimizationLevel.ORT_DISABLE_ALL: 0>)
    """
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if isinstance(name, str) and name in GraphOptimizationLevel.__members__:
        return GraphOptimizationLevel[name]
    if isinstance(value, int) and not isinstance(value, bool) and value in set(GraphOptimizationLevel):
        return GraphOptimizationLevel(value)
    raise OptionError(f"graph_optimization_level must be one of {[m.name for m in GraphOptimizationLevel]} "
                      f"(or its value {[m.value for m in GraphOptimizationLevel]}), got {value!r}")


def _count(value, field: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise OptionError(f"{field} must be an int >= {least}, got {value!r}")
    return value


def _severity(value, field: str = "log_severity_level") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 4:
        raise OptionError(f"{field} must be 0 (verbose), 1 (info), 2 (warning), 3 (error) or 4 (fatal), "
                          f"got {value!r}")
    return value


def _flag(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{field} must be a bool, got {value!r}")
    return value


def _text(value, field: str) -> str:
    if not isinstance(value, str):
        raise OptionError(f"{field} must be a str, got {value!r}")
    return value


class _Options:
    """Fields checked as they are set; any other name is refused, listing the fields."""

    _CHECKS: dict = {}

    def __init__(self):
        for field, (_, default) in self._CHECKS.items():
            object.__setattr__(self, field, default)
        object.__setattr__(self, "set_fields", set())       # the fields given a value

    def __setattr__(self, field, value):
        if field not in self._CHECKS:
            raise OptionError(f"{type(self).__name__} has no field {field!r}; tilefuse's are "
                              f"{', '.join(sorted(self._CHECKS))}")
        object.__setattr__(self, field, self._CHECKS[field][0](value, field))
        self.set_fields.add(field)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._CHECKS)})"


class SessionOptions(_Options):
    """onnxruntime's ``SessionOptions`` fields that tilefuse honours (see the module docstring).

    Example:
        >>> options = SessionOptions()
        >>> options.enable_profiling = True; options.profile_file_prefix = "resnet"
        >>> options.intra_op_num_threads, options.graph_optimization_level.name
        (0, 'ORT_ENABLE_ALL')
    """

    _CHECKS = {"intra_op_num_threads": (lambda v, f: _count(v, f, 0), 0),
               "graph_optimization_level": (lambda v, f: optimization_level(v), GraphOptimizationLevel.ORT_ENABLE_ALL),
               "enable_profiling": (_flag, False),
               "profile_file_prefix": (_text, "tilefuse_profile"),
               "log_severity_level": (_severity, 2),
               "logid": (_text, "")}


class RunOptions(_Options):
    """onnxruntime's ``RunOptions`` (see the module docstring): ``log_severity_level``,
    ``logid``, ``terminate`` and ``only_execute_path_to_fetches`` (False only);
    ``add_run_config_entry`` keeps entries that the run then refuses.

    Example:
        >>> options = RunOptions(); options.logid = "request 7"; options.terminate
        False
    """

    _CHECKS = {"log_severity_level": (_severity, 2), "logid": (_text, ""), "terminate": (_flag, False), "only_execute_path_to_fetches": (_flag, False)}

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_entries", {})

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Keep a run config entry (onnxruntime's); a run given these options refuses it.

        Example:
            >>> options = RunOptions(); options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            >>> options.get_run_config_entry("memory.enable_memory_arena_shrinkage")
            'cpu:0'
        """
        self._entries[_text(key, "a run config key")] = _text(value, "a run config value")

    def get_run_config_entry(self, key: str) -> str:
        """The value of a run config entry; OptionError when there is none.

        Example:
            >>> RunOptions().get_run_config_entry("x")
            Traceback (most recent call last):
            ...
            tilefuse.graph_api.session_options.OptionError: no run config entry 'x'
        """
        if key not in self._entries:
            raise OptionError(f"no run config entry {key!r}")
        return self._entries[key]

    def check(self) -> None:
        """OptionError for what a run cannot honour: ``only_execute_path_to_fetches`` set, run
        config entries; and GraphError when ``terminate`` is set.

        Example:
            >>> options = RunOptions(); options.only_execute_path_to_fetches = True; options.check()
            Traceback (most recent call last):
            ...
            tilefuse.graph_api.session_options.OptionError: RunOptions.only_execute_path_to_fetches: tilefuse runs the whole compiled graph (each output computed once); set it False
        """
        if self.only_execute_path_to_fetches:
            raise OptionError("RunOptions.only_execute_path_to_fetches: tilefuse runs the whole compiled graph "
                              "(each output computed once); set it False")
        if self._entries:
            raise OptionError(f"run config entries {sorted(self._entries)}: tilefuse knows no run config entry")
        if self.terminate:
            raise GraphError("run terminated: RunOptions.terminate is set")


def checked_providers(providers, provider_options) -> list:
    """The providers a session runs with (``PROVIDERS``) when ``providers`` (None, or a list of
    names or of (name, options dict)) and ``provider_options`` (None, or a list of dicts, one
    per provider) ask for what tilefuse has: the CPU provider with no options. OptionError
    naming what it lacks otherwise.

    Example:
        >>> checked_providers([("CPUExecutionProvider", {})], None)
        ['CPUExecutionProvider']
        >>> checked_providers(["CPUExecutionProvider"], [{"arena_extend_strategy": "kSameAsRequested"}])
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.session_options.OptionError: CPUExecutionProvider options ['arena_extend_strategy']: tilefuse's CPU provider takes none
    """
    if providers is None:
        if provider_options is not None:
            raise OptionError("provider_options without providers; pass providers=['CPUExecutionProvider']")
        return list(PROVIDERS)
    if isinstance(providers, (str, bytes)) or not isinstance(providers, (list, tuple)):
        raise OptionError(f"providers must be a list such as ['CPUExecutionProvider'], got {providers!r}")
    if provider_options is not None and (not isinstance(provider_options, (list, tuple))
                                         or len(provider_options) != len(providers)):
        raise OptionError(f"provider_options must be a list of one dict per provider ({len(providers)}), "
                          f"got {provider_options!r}")
    for k, entry in enumerate(providers):
        name, options = entry, {}
        if isinstance(entry, tuple) and len(entry) == 2:
            name, options = entry
        if not isinstance(name, str):
            raise OptionError(f"a provider is a name or a (name, options dict) pair, got {entry!r}")
        if name != CPU:
            raise OptionError(f"provider {name!r} is not available: tilefuse runs on the CPU only "
                              f"(providers=['{CPU}'])")
        if provider_options is not None:
            options = {**options, **provider_options[k]} if isinstance(provider_options[k], dict) else None
        if not isinstance(options, dict):
            raise OptionError(f"the options of {name} must be a dict, got {entry!r}")
        if options:
            raise OptionError(f"{name} options {sorted(options)}: tilefuse's CPU provider takes none")
    return list(PROVIDERS)
