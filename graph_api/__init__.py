"""graph_api: a front end in the style of the oneDNN Graph API.

Example:
    >>> from graph_api import LogicalTensor, DataType, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> Op(0, OpKind.ReLU, [x], [y]).kind.value
    'ReLU'
"""
from .logical_tensor import DataType, GraphError, LayoutType, LogicalTensor, PropertyType
from .op import Op, OpKind

__all__ = ["DataType", "GraphError", "LayoutType", "LogicalTensor", "PropertyType", "Op", "OpKind"]
