"""Engines, streams and tensors: where compiled partitions run and the data they run on."""
from __future__ import annotations

import numpy as np

from tilefuse.tensorir.runtime.aligned import aligned_empty

from .logical_tensor import GraphError, LogicalTensor


class Engine:
    """A device to compile for and run on; only "cpu" exists.

    Example:
        >>> Engine("cpu").kind
        'cpu'
    """

    def __init__(self, kind: str = "cpu", index: int = 0):
        if kind != "cpu":
            raise GraphError(f"engine kind {kind!r} is not supported; only 'cpu'")
        self.kind, self.index = kind, index

    def __repr__(self):
        return f"Engine({self.kind!r})"


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
