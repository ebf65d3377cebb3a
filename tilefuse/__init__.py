"""tilefuse: a scheduling compiler for deep-learning graphs.

The packages are ``tilefuse.tensorir`` (tensor expressions, the loop IR, LLVM code generation
and the runtime), ``tilefuse.schedule`` (schedules, lowering, templates and their knobs),
``tilefuse.graph_api`` (oneDNN-Graph-style graphs, ONNX import, compiled graphs and sessions)
and ``tilefuse.autotune`` (tuning, its database and logs, the ``autotune`` command). The names
below are the entry points most programs need.

Example:
    >>> import numpy as np, tilefuse
    >>> sess = tilefuse.InferenceSession("examples/resnet_block.onnx")
    >>> x = sess.get_inputs()[0]
    >>> [y.shape for y in sess.run(None, {x.name: np.zeros(x.shape, "float32")})]
    [(1, 10)]
    >>> tilefuse.__version__
    '0.1.0'
"""
from tilefuse.graph_api import (Graph, GraphOptimizationLevel, InferenceSession, LogicalTensor, Op, OpKind,
                                RunOptions, SessionOptions, compile_graph, from_onnx, get_available_providers,
                                load_compiled, load_json)

__version__ = "0.1.0"

__all__ = ["Graph", "GraphOptimizationLevel", "InferenceSession", "LogicalTensor", "Op", "OpKind", "RunOptions",
           "SessionOptions", "compile_graph", "from_onnx", "get_available_providers", "load_compiled", "load_json",
           "__version__"]
