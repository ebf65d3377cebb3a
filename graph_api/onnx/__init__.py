"""The ONNX front end: ONNX models as graphs (``from_onnx``, ``import_onnx``), the op mapping
(``ops.ONNX_OPS``), Wildcard nodes run by onnx's reference implementation (``node``) and an
``onnx.backend`` Backend (``backend``).

Example:
    >>> from tilefuse.graph_api.onnx import from_onnx, import_onnx
"""
from .builder import ONNX_DTYPES, OnnxDynamicShape, OnnxInputValueNeeded, OnnxUnsupported
from .importer import OnnxImport, from_onnx, import_onnx

__all__ = ["from_onnx", "import_onnx", "OnnxImport", "OnnxDynamicShape", "OnnxInputValueNeeded", "OnnxUnsupported",
           "ONNX_DTYPES"]
