"""graph_api.lowering: the class each op kind's compute body gives, LOWERED_KINDS, and the
errors for ops that cannot lower."""
import dataclasses

import pytest

from tilefuse.graph_api import DataType, GraphError, LogicalTensor, Op, OpKind
from tilefuse.graph_api.lowering import LOWERED_KINDS, lower_op, op_class, placeholder_for
from tilefuse.tensorir.errors import Unsupported

F32 = DataType.f32


def make(kind, in_shapes, out_shapes, attrs=None, in_dtypes=None, out_dtypes=None):
    ins = [LogicalTensor(i, d, s) for i, (s, d) in enumerate(zip(in_shapes, in_dtypes or [F32] * len(in_shapes)))]
    outs = [LogicalTensor(100 + i, d, s)
            for i, (s, d) in enumerate(zip(out_shapes, out_dtypes or [F32] * len(out_shapes)))]
    return Op(7, kind, ins, outs, attrs or {})


CONVT = {"strides": [2, 2], "pads_begin": [1, 1], "pads_end": [1, 1], "dilations": [1, 1], "data_format": "NCX",
         "weights_format": "IOX"}


@pytest.mark.parametrize("op, cls", [
    (make(OpKind.ConvTranspose, [(1, 4, 5, 5), (4, 3, 3, 3)], [(1, 3, 9, 9)], CONVT), "complex"),
    (make(OpKind.ConvTranspose, [(1, 4, 5, 5), (4, 3, 3, 3), (6,)], [(1, 6, 9, 9)], {**CONVT, "groups": 2}),
     "complex"),
    (make(OpKind.Interpolate, [(1, 2, 5, 5)], [(1, 2, 7, 3)], {"mode": "linear", "sizes": [7, 3],
                                                             "data_format": "NCX"}), "injective"),
    (make(OpKind.ReLUBackward, [(3, 4), (3, 4)], [(3, 4)]), "injective"),
    (make(OpKind.GELUBackward, [(3, 4), (3, 4)], [(3, 4)]), "injective"),
    (make(OpKind.SoftMaxBackward, [(3, 4), (3, 4)], [(3, 4)], {"axis": -1}), "reduction"),
    (make(OpKind.BiasAddBackward, [(3, 4)], [(4,)]), "reduction"),
    (make(OpKind.BatchNormTrainingBackward, [(2, 3, 4), (2, 3, 4), (3,), (3,)], [(2, 3, 4)],
          {"epsilon": 0.1, "data_format": "NCX"}), "reduction"),
    (make(OpKind.Quantize, [(3, 4)], [(3, 4)], {"scales": [0.1]}, out_dtypes=[DataType.u8]), "injective"),
    (make(OpKind.Dequantize, [(3, 4)], [(3, 4)], {"scales": [0.1], "zps": [3]}, in_dtypes=[DataType.s8]),
     "injective"),
    (make(OpKind.GroupNorm, [(2, 4, 5)], [(2, 4, 5)], {"groups": 2, "use_affine": False, "keep_stats": False,
                                                       "data_format": "NCX"}), "reduction"),
    (make(OpKind.GenIndex, [(3, 4)], [(3, 4)], {"axis": 1}, out_dtypes=[DataType.s32]), "injective"),
    (make(OpKind.SoftMax, [(3, 4)], [(3, 4), (3, 1)], {"axis": -1}), "reduction"),
    (make(OpKind.Dropout, [(3, 4)], [(3, 4), (3, 4)], out_dtypes=[F32, DataType.u8]), "injective"),
    (make(OpKind.AvgPool, [(1, 2, 9, 8)], [(1, 2, 4, 4)], {"kernel": [2, 2], "strides": [2, 2],
                                                         "pads_begin": [0, 0], "pads_end": [-1, 0],
                                                         "exclude_pad": True, "data_format": "NCX"}), "reduction"),
])
def test_op_class_from_the_compute_body(op, cls):
    assert op.kind in LOWERED_KINDS
    assert op_class(op) == cls


def test_ops_that_do_not_lower_are_opaque():
    assert OpKind.MaxPoolBackward not in LOWERED_KINDS
    op = make(OpKind.MaxPoolBackward, [(1, 2, 4, 4), (1, 2, 2, 2)], [(1, 2, 4, 4)],
              {"kernel": [2, 2], "strides": [2, 2], "pads_begin": [0, 0], "pads_end": [0, 0]})
    assert op_class(op) == "opaque"
    with pytest.raises(Unsupported, match=r"op 7 \(MaxPoolBackward\): no compute definition"):
        lower_op(op, [placeholder_for(t) for t in op.inputs])


def test_bad_attributes_and_inputs_are_errors_not_opaque_ops():
    bad = make(OpKind.ConvTranspose, [(1, 4, 5, 5), (3, 3, 3, 3)], [(1, 3, 9, 9)], CONVT)   # 3 != 4 channels
    with pytest.raises(ValueError, match=r"ConvTranspose: weights .* input channels") as caught:
        op_class(bad)
    assert "while lowering op 7 (ConvTranspose)" in caught.value.__notes__
    with pytest.raises(ValueError, match=r"ConvTranspose: weights .* input channels"):
        lower_op(bad, [placeholder_for(t) for t in bad.inputs])
    one_input = make(OpKind.ReLUBackward, [(3, 4)], [(3, 4)])
    with pytest.raises(GraphError, match=r"op 7 \(ReLUBackward\): expected 2 inputs, got 1"):
        op_class(one_input)


def test_a_bug_in_a_lowering_is_not_an_unsupported_op(monkeypatch):


    def broken(op, xs):
        raise KeyError("a typo in a lowering")
    from tilefuse.graph_api.ops import REGISTRY
    monkeypatch.setitem(REGISTRY, OpKind.ReLU, dataclasses.replace(REGISTRY[OpKind.ReLU], lower=broken))
    with pytest.raises(KeyError, match="a typo"):
        op_class(make(OpKind.ReLU, [(3, 4)], [(3, 4)]))


def test_an_output_in_another_shape_or_dtype_is_opaque():
    assert op_class(make(OpKind.ReLUBackward, [(3, 4), (3, 4)], [(4, 3)])) == "opaque"
    assert op_class(make(OpKind.GenIndex, [(3, 4)], [(3, 4)], {"axis": 1}, out_dtypes=[DataType.s8])) == "opaque"


def test_interpolate_with_a_sizes_input_needs_the_output_shape():
    op = make(OpKind.Interpolate, [(1, 2, 5, 5), (2,)], [None], {"mode": "nearest", "data_format": "NCX"},
              in_dtypes=[F32, DataType.s32])
    with pytest.raises(Unsupported, match=r"^op 7 \(Interpolate\): sizes come from an input tensor and the output "
                                          r"shape is unknown"):
        lower_op(op, [placeholder_for(t) for t in op.inputs])
    assert op_class(op) == "opaque"
    known = make(OpKind.Interpolate, [(1, 2, 5, 5), (2,)], [(1, 2, 10, 3)], {"mode": "nearest", "data_format": "NCX"},
                 in_dtypes=[F32, DataType.s32])
    assert [t.shape for t in lower_op(known, [placeholder_for(t) for t in known.inputs])] == [(1, 2, 10, 3)]
