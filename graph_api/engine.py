"""The graph API's engines, streams and tensors (oneDNN Graph's): where compiled partitions
run and the data they run on. An ``Engine`` is the CPU, described by the ``Target``
(``tensorir.runtime.target``) code is generated for; the host's by default.

Example:
    >>> Engine().target is Target.host()
    True
    >>> Engine("cpu", target="llvm -mcpu=skylake-avx512").target.lanes("float32")
    16
"""
from __future__ import annotations

import numpy as np

from tilefuse.tensorir.runtime.aligned import aligned_empty
from tilefuse.tensorir.runtime.target import Target, as_target

from .logical_tensor import GraphError, LogicalTensor

ENGINE_KINDS = ("cpu", "any")
"""The engine kinds code is compiled for: the CPU ("any" is the CPU too). There is no GPU backend."""

GRAPH_ENGINE_KINDS = ENGINE_KINDS + ("gpu",)
"""The engine kinds a graph may record (oneDNN's dumps made on a GPU say "gpu"): a description of
where it was built; it compiles for the CPU ``Engine`` it is given."""


def check_engine_kind(kind: str) -> str:
    """``kind`` when it is one of ENGINE_KINDS; GraphError otherwise ("gpu": no GPU backend).

    Example:
        >>> check_engine_kind("gpu")
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: engine kind 'gpu': tilefuse has no GPU backend; it compiles for CPUs ('cpu', or Engine('cpu', target=...) for another CPU)
    """
    if kind == "gpu":
        raise GraphError("engine kind 'gpu': tilefuse has no GPU backend; it compiles for CPUs "
                         "('cpu', or Engine('cpu', target=...) for another CPU)")
    if kind not in ENGINE_KINDS:
        raise GraphError(f"unknown engine kind {kind!r}; expected one of {list(ENGINE_KINDS)}")
    return kind


class Engine:
    """A device to compile for and run on: the CPU, whose ``target`` (a ``Target``, or a string
    ``Target.parse`` reads; default the host) is what its partitions' code is generated for.
    Code for a target whose features this host lacks can be compiled and saved, not run here.

    Example:
        >>> Engine("cpu").kind, Engine("cpu").target is Target.host()
        ('cpu', True)
        >>> Engine("cpu", target="llvm -mcpu=haswell")
        Engine('cpu', target='llvm -mcpu=haswell')
    """

    def __init__(self, kind: str = "cpu", index: int = 0, target: Target | str | None = None):
        if check_engine_kind(kind) != "cpu":
            raise GraphError(f"engine kind {kind!r}: an Engine is one device; use 'cpu'")
        self.kind, self.index = kind, index
        self.target = as_target(target)

    def __eq__(self, other):
        return isinstance(other, Engine) and (self.kind, self.index, self.target) == (other.kind, other.index,
                                                                                      other.target)

    def __hash__(self):
        return hash((self.kind, self.index, self.target))

    def __repr__(self):
        return "Engine('cpu')" if self.target is Target.host() else f"Engine('cpu', target={str(self.target)!r})"


class Stream:
    """An ordered queue of executions on an engine; execution here is synchronous.

    Example:
        >>> Stream(Engine()).wait()
    """

    def __init__(self, engine: Engine):
        if not isinstance(engine, Engine):
            raise GraphError(f"a stream needs an Engine, got {type(engine).__name__}")
        self.engine = engine

    def wait(self) -> None:
        """Block until queued work is done (nothing is ever queued)."""


class Tensor:
    """A logical tensor bound to memory: a C-contiguous numpy array of its shape and dtype
    (allocated when ``handle`` is None).

    Example:
        >>> from tilefuse.graph_api.logical_tensor import DataType
        >>> t = Tensor(LogicalTensor(0, DataType.f32, (2, 3)), Engine())
        >>> t.handle.shape, t.handle.dtype
        ((2, 3), dtype('float32'))
    """

    def __init__(self, logical_tensor: LogicalTensor, engine: Engine | None = None, handle=None):
        self.logical_tensor = logical_tensor
        self.engine = engine or Engine()
        lt = logical_tensor
        if handle is None:
            if not lt.is_known():
                raise GraphError(f"tensor {lt.id}: cannot allocate memory for unknown shape {lt.shape}")
            handle = aligned_empty(lt.shape, lt.dtype.numpy)
        elif not isinstance(handle, np.ndarray):
            raise GraphError(f"tensor {lt.id}: the handle must be a numpy array, got {type(handle).__name__}")
        self.handle = handle

    def get_data_handle(self) -> np.ndarray:
        return self.handle

    def set_data_handle(self, handle: np.ndarray) -> None:
        self.handle = handle

    def get_logical_tensor(self) -> LogicalTensor:
        return self.logical_tensor

    def __repr__(self):
        return f"Tensor(id={self.logical_tensor.id}, shape={self.handle.shape}, dtype={self.handle.dtype})"
