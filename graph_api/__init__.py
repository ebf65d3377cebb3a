"""graph_api: a front end in the style of the oneDNN Graph API.

Example:
    >>> from tilefuse.graph_api import LogicalTensor, DataType, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> Op(0, OpKind.ReLU, [x], [y]).kind.value
    'ReLU'
"""
from .logical_tensor import DataType, GraphError, LayoutType, LogicalTensor, PropertyType
from .op import Op, OpKind
from .ops.schema import AttrSpec, OpSchema, get_attr, get_schema, validate_op
from .graph import Graph
from .shape_inference import INFERABLE_KINDS, broadcast_shapes, infer_shapes, with_inferred_shapes
from .serialize import graph_to_json
from .deserialize import load_json

__all__ = ["DataType", "GraphError", "LayoutType", "LogicalTensor", "PropertyType", "Op", "OpKind"]
__all__ += ["AttrSpec", "OpSchema", "get_attr", "get_schema", "validate_op", "Graph", "INFERABLE_KINDS",
            "broadcast_shapes", "infer_shapes", "with_inferred_shapes", "graph_to_json", "load_json"]
from .engine import Engine, Stream, Tensor
from .partition import CompiledPartition, Partition
from .compiled_graph import CompiledGraph
from .compiler import compile_graph
from . import reference
from .onnx import from_onnx
from .session_options import GraphOptimizationLevel, RunOptions, SessionOptions, get_available_providers
from .session import InferenceSession, NodeArg, load_compiled

__all__ += ["Engine", "Stream", "Tensor", "Partition", "CompiledPartition", "CompiledGraph", "compile_graph",
            "reference", "from_onnx", "InferenceSession", "NodeArg", "load_compiled", "GraphOptimizationLevel",
            "RunOptions", "SessionOptions", "get_available_providers"]
