"""Graph plumbing: End (marks a graph output) and Wildcard (an op with no semantics of its own;
one the ONNX importer made runs its ONNX node through onnx's reference implementation).

Example:
    >>> from tilefuse.graph_api.ops import op_def
    >>> op_def("Wildcard").schema.open_attrs
    True
"""
from __future__ import annotations

import sys

import numpy as np

from ..logical_tensor import GraphError
from ..op import Op
from ._numpy import _err, _nin, _nout
from .registry import define
from .schema import schema


# ---- reference --------------------------------------------------------------------------------------

def _ref_end(op: Op, xs: list) -> list:
    _nin(op, xs, {1})
    _nout(op, {0})
    return []


def _ref_wildcard(op: Op, xs: list) -> list:
    """A Wildcard the ONNX importer made from an op it does not map runs that ONNX node through
    onnx's own reference implementation; any other Wildcard has no semantics here."""
    if "onnx_node" not in op.attrs:
        raise _err(op, "the reference interpreter does not implement this op")
    from ..onnx.node import run_onnx_node
    try:
        return run_onnx_node(op.attrs, [np.asarray(x) for x in xs])
    except GraphError as e:
        raise _err(op, str(e)) from None


# ---- the records ----------------------------------------------------------------------------------

define(schema("End", "src:any", "", {}, {}, n_in={1}, n_out={0}), shape=lambda op, s: [], reference=_ref_end)
define(schema("Wildcard", "src:any", "dst:any", {}, {}, n_in=range(0, sys.maxsize), n_out=range(0, sys.maxsize),
              variadic=True, open_attrs=True), reference=_ref_wildcard)
