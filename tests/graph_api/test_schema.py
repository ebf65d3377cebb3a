"""Op schemas and validate_op: counts, attributes, enumerated values and data-type rules."""
import pytest

from tilefuse.graph_api import DataType, GraphError, LogicalTensor, Op, OpKind, get_attr, get_schema, validate_op


def lt(i, shape=(2, 3), dtype="f32"):
    return LogicalTensor(i, dtype, shape)


def relu(op_id=1, **attrs):
    return Op(op_id, OpKind.ReLU, [lt(0)], [lt(1)], attrs)


def conv(**attrs):
    base = {"strides": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0], "dilations": [1, 1]}
    return Op(9, OpKind.Convolution, [lt(0, (1, 3, 8, 8)), lt(1, (4, 3, 3, 3))], [lt(2, (1, 4, 6, 6))],
              {**base, **attrs})


def test_every_op_kind_has_a_schema():
    for kind in OpKind:
        assert get_schema(kind).kind is kind


def test_a_valid_op_passes():
    validate_op(relu())
    validate_op(conv(data_format="NCX", weights_format="OIX", auto_pad="None", groups=1))


def test_wrong_input_count_names_op_and_counts():
    op = Op(12, OpKind.Add, [lt(0)], [lt(1)])
    with pytest.raises(GraphError, match=r"^op 12 \(Add\): expected 2 inputs, got 1$"):
        validate_op(op)


def test_optional_inputs_allow_a_set_of_counts():
    with pytest.raises(GraphError, match=r"op 3 \(MatMul\): expected 2 or 3 inputs, got 4"):
        validate_op(Op(3, OpKind.MatMul, [lt(0), lt(1), lt(2), lt(4)], [lt(5)]))


def test_wrong_output_count():
    with pytest.raises(GraphError, match=r"op 1 \(ReLU\): expected 1 outputs, got 2"):
        validate_op(Op(1, OpKind.ReLU, [lt(0)], [lt(1), lt(2)]))


def test_missing_required_attribute():
    with pytest.raises(GraphError, match=r"op 1 \(Clamp\): missing required attribute 'max'"):
        validate_op(Op(1, OpKind.Clamp, [lt(0)], [lt(1)], {"min": 0.0}))


def test_unknown_attribute_is_named():
    with pytest.raises(GraphError, match=r"op 7 \(ReLU\): unknown attribute 'alpha'"):
        validate_op(relu(7, alpha=0.1))


def test_wrong_attribute_types():
    with pytest.raises(GraphError, match=r"op 9 \(Convolution\): attribute 'groups' must be s64, got 1.5"):
        validate_op(conv(groups=1.5))
    with pytest.raises(GraphError, match=r"attribute 'strides' must be s64\[\]"):
        validate_op(conv(strides=[1.0, 1]))
    with pytest.raises(GraphError, match=r"attribute 'transpose_a' must be bool, got 1"):
        validate_op(Op(2, OpKind.MatMul, [lt(0, (2, 2)), lt(1, (2, 2))], [lt(3, (2, 2))], {"transpose_a": 1}))


def test_f32_attributes_accept_ints():
    validate_op(Op(1, OpKind.Clamp, [lt(0)], [lt(1)], {"min": 0, "max": 6}))


def test_bad_enumerated_values():
    with pytest.raises(GraphError, match=r"op 9 \(Convolution\): attribute 'data_format' is 'NHWC'"):
        validate_op(conv(data_format="NHWC"))
    with pytest.raises(GraphError, match="attribute 'weights_format' is 'IOX'"):
        validate_op(conv(weights_format="IOX"))
    with pytest.raises(GraphError, match="attribute 'auto_pad' is 'full'"):
        validate_op(conv(auto_pad="full"))
    with pytest.raises(GraphError, match="attribute 'mode' is 'erf'"):
        validate_op(Op(4, OpKind.GELU, [lt(0)], [lt(1)], {"mode": "erf"}))


def test_auto_pad_ignores_letter_case():
    validate_op(conv(auto_pad="same_upper"))
    validate_op(conv(auto_pad="VALID"))


def test_binary_inputs_must_share_a_dtype():
    op = Op(5, OpKind.Multiply, [lt(0), lt(1, dtype="bf16")], [lt(2)])
    with pytest.raises(GraphError, match=r"op 5 \(Multiply\): input 1 \(src_1, tensor 1\) has data type bf16 "
                                         r"but input 0 \(src_0, tensor 0\) has f32"):
        validate_op(op)


def test_dtype_outside_the_allowed_set():
    with pytest.raises(GraphError, match=r"op 1 \(ReLU\): input 0 \(src, tensor 0\) has data type s8"):
        validate_op(Op(1, OpKind.ReLU, [lt(0, dtype="s8")], [lt(1, dtype="s8")]))


def test_select_condition_must_be_boolean():
    op = Op(6, OpKind.Select, [lt(0), lt(1), lt(2)], [lt(3)])
    with pytest.raises(GraphError, match=r"op 6 \(Select\): input 0 \(cond, tensor 0\) has data type f32"):
        validate_op(op)
    validate_op(Op(6, OpKind.Select, [lt(0, dtype="boolean"), lt(1), lt(2)], [lt(3)]))


def test_typecast_changes_the_dtype():
    validate_op(Op(1, OpKind.TypeCast, [lt(0)], [lt(1, dtype="bf16")]))
    with pytest.raises(GraphError, match=r"op 1 \(TypeCast\): input and output have the same data type f32"):
        validate_op(Op(1, OpKind.TypeCast, [lt(0)], [lt(1)]))
    with pytest.raises(GraphError, match="between bf16 and f16"):
        validate_op(Op(1, OpKind.TypeCast, [lt(0, dtype="f16")], [lt(1, dtype="bf16")]))


def test_comparison_outputs_boolean():
    validate_op(Op(1, OpKind.GreaterEqual, [lt(0, dtype="s32"), lt(1, dtype="s32")], [lt(2, dtype="boolean")]))


def test_concat_is_variadic_with_one_dtype():
    validate_op(Op(1, OpKind.Concat, [lt(0), lt(1), lt(2)], [lt(3)], {"axis": 0}))
    with pytest.raises(GraphError, match=r"input 2 \(src_i, tensor 2\) has data type f16"):
        validate_op(Op(1, OpKind.Concat, [lt(0), lt(1), lt(2, dtype="f16")], [lt(3)], {"axis": 0}))


def test_wildcard_takes_anything():
    validate_op(Op(1, OpKind.Wildcard, [lt(0, dtype="s8")], [lt(1, dtype="u8"), lt(2)], {"anything": 3}))


def test_layernorm_keep_stats_decides_the_outputs():
    validate_op(Op(1, OpKind.LayerNorm, [lt(0)], [lt(1), lt(2, (2,)), lt(3, (2,))]))
    with pytest.raises(GraphError, match=r"op 1 \(LayerNorm\): keep_stats=True needs 3 outputs, got 1"):
        validate_op(Op(1, OpKind.LayerNorm, [lt(0)], [lt(1)]))
    validate_op(Op(1, OpKind.LayerNorm, [lt(0)], [lt(1)], {"keep_stats": False}))


def test_reduce_needs_axes_once():
    with pytest.raises(GraphError, match=r"op 2 \(ReduceSum\): axes must be given"):
        validate_op(Op(2, OpKind.ReduceSum, [lt(0)], [lt(1)]))
    with pytest.raises(GraphError, match="both as an attribute and as a second input"):
        validate_op(Op(2, OpKind.ReduceSum, [lt(0), lt(5, (1,), "s32")], [lt(1)], {"axes": [0]}))


def test_quantize_scales_and_zero_points():
    ok = {"scales": [0.5], "zps": [3]}
    validate_op(Op(1, OpKind.Quantize, [lt(0)], [lt(1, dtype="u8")], ok))
    with pytest.raises(GraphError, match="1 scales but 2 zero points"):
        validate_op(Op(1, OpKind.Quantize, [lt(0)], [lt(1, dtype="u8")], {"scales": [0.5], "zps": [1, 2]}))


def test_get_attr_returns_schema_defaults():
    op = Op(1, OpKind.MatMul, [lt(0), lt(1)], [lt(2)], {"transpose_b": True})
    assert get_attr(op, "transpose_a") is False and get_attr(op, "transpose_b") is True
    assert get_attr(conv(), "data_format") == "NXC" and get_attr(conv(), "weights_format") == "XIO"
    assert get_schema("ConvTranspose").attrs["weights_format"].default == "XOI"


def test_low_precision_dtypes_are_known():
    op = Op(1, OpKind.Dequantize, [lt(0, dtype="f8_e4m3")], [lt(1)], {"scales": [1.0]})
    validate_op(op)
    assert DataType.s4.itemsize == 1
