"""graph_api.ops.norm: the schema rules of the normalization kinds."""
import math

import pytest

from tilefuse.graph_api import DataType, Graph, GraphError, LogicalTensor, Op, OpKind, validate_op

F32 = DataType.f32


def _norm(kind, epsilon):
    """A ``kind`` op over (2, 4, 3) (channels 4) with its parameters and one output."""
    shapes = {OpKind.BatchNormInference: [(2, 4, 3)] + [(4,)] * 4, OpKind.LayerNorm: [(2, 4, 3)],
              OpKind.GroupNorm: [(2, 4, 3)], OpKind.RMSNorm: [(2, 4, 3)]}[kind]
    attrs = {"epsilon": epsilon}
    attrs.update({OpKind.BatchNormInference: {"data_format": "NCX"}, OpKind.LayerNorm: {"keep_stats": False},
                  OpKind.GroupNorm: {"keep_stats": False, "groups": 2, "data_format": "NCX"}}.get(kind, {}))
    ins = [LogicalTensor(i, F32, s) for i, s in enumerate(shapes)]
    return Op(0, kind, ins, [LogicalTensor(9, F32, None)], attrs)


@pytest.mark.parametrize("kind", [OpKind.BatchNormInference, OpKind.LayerNorm, OpKind.GroupNorm, OpKind.RMSNorm])
def test_a_negative_or_nan_epsilon_is_refused_when_the_op_is_added(kind):
    for eps in (-1e-5, math.nan):
        with pytest.raises(GraphError, match=rf"^op 0 \({kind.value}\): epsilon must be a non-negative number, "
                                             rf"got {eps}$"):
            Graph().add_op(_norm(kind, eps))
    validate_op(_norm(kind, 0.0))
