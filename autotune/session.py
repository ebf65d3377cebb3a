"""``InferenceSession(model, db="tuning.db")``: a ``graph_api.InferenceSession`` compiled with
the best configs a tuning database holds for this CPU (``HistoryBest``), the kernels it keeps
sparing LLVM.

Example:
    >>> # sess = InferenceSession("examples/resnet_block.onnx", db="tuning.db")
    >>> # y, = sess.run(None, {"x": x})
"""
from __future__ import annotations

from tilefuse.graph_api import session as graph_session

from .dispatch import HistoryBest


class InferenceSession(graph_session.InferenceSession):
    """A ``graph_api.InferenceSession`` whose ``db`` (a path or a ``Database``; None: the
    templates' defaults) gives the configs; ``strict_records``: a workload without a record is
    ``MissingTuningRecord`` instead of a warning.

    Example:
        >>> # InferenceSession("model.onnx", db="tuning.db", num_threads=2).run(None, {"x": x})
    """

    def __init__(self, model, db=None, strict: bool = False, num_threads: int | None = None,
                 max_compiled_shapes: int = graph_session.MAX_COMPILED_SHAPES, strict_records: bool = False):
        configs = None if db is None else HistoryBest(db, strict=strict_records)
        super().__init__(model, configs=configs, strict=strict, num_threads=num_threads,
                         max_compiled_shapes=max_compiled_shapes)
