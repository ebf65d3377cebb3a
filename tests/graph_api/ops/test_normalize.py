"""graph_api.ops.normalize_op and the pipeline's normalize step."""
import pytest

from tilefuse.graph_api import DataType, Graph, GraphError, LogicalTensor, Op, OpKind
from tilefuse.graph_api.ops import normalize_op
from tilefuse.graph_api.pipeline import STEPS, prepare

F32 = DataType.f32


def _op(kind, attrs, in_shapes=((2, 3),), n_out=1):
    ins = [LogicalTensor(i, F32, s) for i, s in enumerate(in_shapes)]
    outs = [LogicalTensor(10 + i, F32, None) for i in range(n_out)]
    return Op(0, kind, ins, outs, attrs)


def test_defaults_are_filled_in_and_given_values_kept():
    op = _op(OpKind.LayerNorm, {"epsilon": 0.5}, n_out=3)
    assert normalize_op(op).attrs == {"keep_stats": True, "use_affine": True, "epsilon": 0.5, "begin_norm_axis": -1}
    assert op.attrs == {"epsilon": 0.5}                     # the input op is not changed


def test_an_already_normalized_op_is_returned_as_it_is():
    op = normalize_op(_op(OpKind.SoftMax, {}))
    assert normalize_op(op) is op


def test_case_free_strings_take_the_schemas_spelling():
    op = _op(OpKind.MaxPool, {"kernel": [2, 2], "strides": [2, 2], "pads_begin": [0, 0], "pads_end": [0, 0],
                              "auto_pad": "valid", "data_format": "NCX"}, in_shapes=((1, 3, 6, 6),))
    assert normalize_op(op, [(1, 3, 6, 6)]).attrs["auto_pad"] == "None"       # resolved: explicit pads
    assert normalize_op(op, [None]).attrs["auto_pad"] == "VALID"              # unknown shape: only spelled


def test_twelve_value_dilations_of_a_onednn_dump_are_trimmed():
    op = _op(OpKind.MaxPool, {"kernel": [3, 3], "strides": [1, 1], "pads_begin": [1, 1], "pads_end": [1, 1],
                              "dilations": [1] * 12, "data_format": "NCX"}, in_shapes=((1, 3, 6, 6),))
    assert normalize_op(op, [(1, 3, 6, 6)]).attrs["dilations"] == [1, 1]


def test_an_op_that_cannot_normalize_is_named():
    op = _op(OpKind.AvgPool, {"kernel": [3], "strides": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0],
                              "exclude_pad": True, "data_format": "NCX"}, in_shapes=((1, 3, 6, 6),))
    with pytest.raises(GraphError, match=r"op 0 \(AvgPool\): kernel \[3\] needs 2 values"):
        normalize_op(op, [(1, 3, 6, 6)])


def test_the_pipeline_normalizes_after_shape_inference():
    assert [name for name, _ in STEPS] == ["infer shapes", "check sizes", "normalize", "passes"]
    x = LogicalTensor(0, F32, (1, 3, 7, 7)); y = LogicalTensor(1, F32, None)
    g = Graph()
    g.add_op(Op(0, OpKind.MaxPool, [x], [y], {"kernel": [3, 3], "strides": [2, 2], "pads_begin": [0, 0],
                                              "pads_end": [0, 0], "auto_pad": "SAME_UPPER", "data_format": "NCX"}))
    g.finalize()
    op = prepare(g, "debug").ops[0]
    assert (op.attrs["pads_begin"], op.attrs["pads_end"], op.attrs["auto_pad"]) == ([1, 1], [1, 1], "None")
    assert op.outputs[0].shape == (1, 3, 4, 4)
    assert g.ops[0].attrs["auto_pad"] == "SAME_UPPER"      # the user's graph keeps its own spelling
