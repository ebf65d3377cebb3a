"""``InferenceSession(model, db="tuning.db")``: a ``graph_api.InferenceSession`` compiled with
the best configs a tuning database holds for this CPU (``HistoryBest``), the kernels it keeps
sparing LLVM.

Example:
    >>> import warnings
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> from tilefuse.autotune import Database
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    >>> with warnings.catch_warnings(record=True) as caught:     # a path: "tuning.db", as autotune.tune filled it
    ...     sess = InferenceSession(model, db=Database(":memory:"))
    >>> [type(w.message).__name__ for w in caught]               # no record: the default config
    ['MissingRecordWarning']
    >>> sess.run(None, {"x": np.array([[-1, 2, -3]], np.float32)})[0].tolist()
    [[0.0, 2.0, 0.0]]
"""
from __future__ import annotations

from tilefuse.graph_api import session as graph_session

from .dispatch import HistoryBest


class InferenceSession(graph_session.InferenceSession):
    """A ``graph_api.InferenceSession`` (onnxruntime's arguments, ``SessionOptions`` and
    providers, as there) whose ``db`` (a path or a ``Database``; None: the templates'
    defaults) gives the configs; ``strict_records``: a workload without a record is
    ``MissingTuningRecord`` instead of a warning.

    Example:
        >>> import numpy as np
        >>> from onnx import TensorProto, helper
        >>> from tilefuse.autotune import Database, MissingTuningRecord
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        >>> model = helper.make_model(helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [x], [y]))
        >>> try:
        ...     InferenceSession(model, db=Database(":memory:"), strict_records=True)
        ... except MissingTuningRecord as e:
        ...     print(str(e).split(" (key")[0])
        no tuning record for workload abs
        >>> InferenceSession(model).run(None, {"x": np.array([[-1, 2, -3]], np.float32)})[0].tolist()   # no db
        [[1.0, 2.0, 3.0]]
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *, db=None,
                 strict: bool = False, num_threads: int | None = None,
                 max_compiled_shapes: int = graph_session.MAX_COMPILED_SHAPES, strict_records: bool = False,
                 target=None):
        configs = None if db is None else HistoryBest(db, strict=strict_records)
        super().__init__(path_or_bytes, sess_options, providers, provider_options, configs=configs, strict=strict,
                         num_threads=num_threads, max_compiled_shapes=max_compiled_shapes, target=target)
