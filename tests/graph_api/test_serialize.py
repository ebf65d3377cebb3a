"""oneDNN graph JSON: reading real-dump quirks, writing, round trips and clear errors."""
import io
import json

import pytest

from tilefuse.graph_api import Graph, GraphError, LayoutType, LogicalTensor, Op, OpKind, PropertyType, graph_to_json, load_json
from tilefuse.graph_api.logical_tensor import INT64_MIN


def lt(i, shape, dtype="f32", **kw):
    return LogicalTensor(i, dtype, shape, **kw)


def sample_graph():
    g = Graph("cpu", "bf16", fpmath_mode_apply_to_int=True)
    conv = {"strides": [1, 1], "pads_begin": [1, 1], "pads_end": [1, 1], "dilations": [1, 1], "groups": 1,
            "data_format": "NCX", "weights_format": "OIX", "auto_pad": "None"}
    g.add_op(Op(0, OpKind.Convolution, [lt(0, (1, 3, 8, 8)), lt(1, (4, 3, 3, 3), property_type="constant")],
                [lt(2, (1, 4, 8, 8))], conv, name="conv"))
    g.add_op(Op(1, OpKind.Clamp, [lt(2, (1, 4, 8, 8))], [lt(3, (-1, 4, -1, -1), layout_type="any")],
                {"min": 0.0, "max": 6.5}))
    g.add_op(Op(2, OpKind.Quantize, [lt(3, None)], [lt(4, None, "u8")], {"scales": [0.25], "zps": [3]}))
    g.add_op(Op(3, OpKind.Divide, [lt(2, (1, 4, 8, 8)), lt(5, (), layout_type="undef")], [lt(6, (1, 4, 8, 8))]))
    g.add_op(Op(4, OpKind.MatMul, [lt(6, (1, 4, 8, 8)), lt(7, (8, 2), strides=(1, 8))], [lt(8, (1, 4, 8, 2))],
                {"transpose_b": False}))
    g.add_op(Op(5, OpKind.End, [lt(8, (1, 4, 8, 2))], []))
    g.finalize()
    return g


def assert_same_graph(a: Graph, b: Graph):
    assert (a.engine_kind, a.fpmath_mode, a.fpmath_mode_apply_to_int) == (b.engine_kind, b.fpmath_mode,
                                                                          b.fpmath_mode_apply_to_int)
    assert len(a.ops) == len(b.ops)
    for x, y in zip(a.ops, b.ops):
        assert (x.id, x.kind, x.name, x.inputs, x.outputs) == (y.id, y.kind, y.name, y.inputs, y.outputs)
        assert x.attrs == y.attrs
        assert {k: type(v) for k, v in x.attrs.items()} == {k: type(v) for k, v in y.attrs.items()}
    assert a.tensors == b.tensors


def test_round_trip_keeps_ops_ids_attrs_and_tensors():
    g = sample_graph()
    g2 = load_json(io.StringIO(graph_to_json(g)))
    assert g2.is_finalized
    assert_same_graph(g, g2)
    assert g2.tensor(7).strides == (1, 8) and g2.tensor(3).shape == (-1, 4, -1, -1)
    assert g2.tensor(4).shape is None and g2.tensor(1).property_type is PropertyType.constant


def test_written_attrs_carry_onednn_types():
    data = json.loads(sample_graph().to_json())
    conv, clamp, quant = data["graph"][0], data["graph"][1], data["graph"][2]
    assert conv["attrs"]["strides"] == {"type": "s64[]", "value": [1, 1]}
    assert conv["attrs"]["groups"] == {"type": "s64", "value": 1}
    assert conv["attrs"]["data_format"] == {"type": "string", "value": "NCX"}
    assert clamp["attrs"]["max"] == {"type": "f32", "value": 6.5}
    assert quant["attrs"]["scales"] == {"type": "f32[]", "value": [0.25]}
    assert data["graph"][4]["attrs"]["transpose_b"] == {"type": "bool", "value": 0}
    assert data["input_ports"] == [0, 1, 5, 7] and data["output_ports"] == [4, 8]


def test_unknown_dims_are_written_as_int64_min():
    data = json.loads(sample_graph().to_json())
    out = data["graph"][1]["outputs"][0]
    assert out["shape"] == [INT64_MIN, 4, INT64_MIN, INT64_MIN] and out["layout_type"] == "any"
    assert out["stride"] == [INT64_MIN] * 4


DUMP = """{
  "version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict",
  "graph": [
    {"id": 0, "name": "aten::relu", "kind": "ReLU",
     "inputs": [{"id": 0, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                 "property_type": "undef"}],
     "outputs": [{"id": 1, "dtype": "f32", "shape": [2, 3], "stride": [-9223372036854775808, -9223372036854775808],
                  "layout_type": "undef", "property_type": "undef"}]},
    {"id": 1, "name": "dropout", "kind": "Dropout",
     "inputs": [{"id": 1, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                 "property_type": "undef"},
                {"id": 2, "dtype": "s64", "shape": [], "stride": [], "layout_type": "strided",
                 "property_type": "host_scalar"},
                {"id": 3, "dtype": "s64", "shape": [], "stride": [], "layout_type": "strided",
                 "property_type": "host_scalar"},
                {"id": 4, "dtype": "f32", "shape": [], "stride": [], "layout_type": "strided",
                 "property_type": "host_scalar"}],
     "outputs": [{"id": 5, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                  "property_type": "undef"}]},
    {"id": 2, "name": "bn", "kind": "SoftMax", "attrs": {"axis": {"type": "s64", "value": 1}},
     "inputs": [{"id": 5, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                 "property_type": "undef"}],
     "outputs": [{"id": 6, "dtype": "f32", "shape": [2, 3], "stride": [3, 1], "layout_type": "strided",
                  "property_type": "undef"}]}
  ]
}"""


def test_real_dump_quirks_load():
    g = load_json(io.StringIO(DUMP))
    assert [op.kind for op in g.ops] == [OpKind.ReLU, OpKind.Dropout, OpKind.SoftMax]
    assert g.tensor(2).shape == () and g.tensor(2).property_type is PropertyType.host_scalar
    assert g.tensor(1).layout_type is LayoutType.strided and g.tensor(1).strides == (3, 1)
    assert g.ops[0].attrs == {} and g.ops[0].name == "aten::relu"
    assert [t.id for t in g.get_output_ports()] == [6]


def test_load_from_a_path(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(sample_graph().to_json())
    assert_same_graph(load_json(path), sample_graph())
    assert_same_graph(load_json(str(path)), sample_graph())


def test_bool_attrs_read_from_ints():
    data = json.loads(DUMP)
    data["graph"][2]["kind"] = "LayerNorm"
    data["graph"][2]["attrs"] = {"keep_stats": {"type": "bool", "value": 0}, "use_affine": {"type": "bool", "value": 0}}
    assert load_json(io.StringIO(json.dumps(data))).ops[2].attrs == {"keep_stats": False, "use_affine": False}


def test_bad_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"graph": [')
    with pytest.raises(GraphError, match=r"broken\.json: invalid JSON"):
        load_json(path)


def test_deeply_nested_and_non_utf8_json_name_the_file(tmp_path):
    stream = io.StringIO('{"graph": ' + "[" * 100000 + "]" * 100000 + "}")
    stream.name = "deep.json"
    with pytest.raises(GraphError, match=r"deep\.json: invalid JSON: nested too deeply"):
        load_json(stream)
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"graph": [], "x": "\xff"}')
    with pytest.raises(GraphError, match=r"latin1\.json: not UTF-8 text"):
        load_json(path)


def test_a_dim_beyond_64_bits_is_refused_at_load():
    bad(lambda d: d["graph"][0]["inputs"][0].update(shape=[2 ** 64, 3]), r"dim 18446744073709551616 .* 64 bits")


def test_missing_file():
    with pytest.raises(GraphError, match=r"nope\.json: cannot read"):
        load_json("nope.json")


def bad(mutate, match):
    data = json.loads(DUMP)
    mutate(data)
    stream = io.StringIO(json.dumps(data))
    stream.name = "dump.json"
    with pytest.raises(GraphError, match=match):
        load_json(stream)


def test_missing_fields_name_file_and_op():
    bad(lambda d: d.pop("graph"), r"^dump\.json: missing field 'graph'")
    bad(lambda d: d["graph"][1].pop("inputs"), r"^dump\.json: op 1: missing field 'inputs'")
    bad(lambda d: d["graph"][2]["outputs"][0].pop("dtype"),
        r"^dump\.json: op 2 \(SoftMax\): logical tensor 6: missing field 'dtype'")


def test_unknown_op_kind_names_file_and_op():
    bad(lambda d: d["graph"][1].update(kind="Frobnicate"), r"^dump\.json: op 1: unknown op kind 'Frobnicate'")


def test_invalid_op_names_file_and_op():
    bad(lambda d: d["graph"][2]["attrs"].update(bogus={"type": "s64", "value": 1}),
        r"^dump\.json: op 2 \(SoftMax\): unknown attribute 'bogus'")
    bad(lambda d: d["graph"][2]["attrs"].update(axis={"type": "f32", "value": 1.0}),
        r"op 2 \(SoftMax\): attribute 'axis' is declared f32 but oneDNN defines it as s64")
    bad(lambda d: d["graph"][2]["attrs"].update(axis={"type": "s64", "value": "one"}),
        r"op 2 \(SoftMax\): attribute 'axis' of type s64 has a bad value 'one'")
    bad(lambda d: d["graph"][0]["inputs"][0].update(dtype="f128"), r"op 0 \(ReLU\): logical tensor 0: unknown data type")


def test_inconsistent_tensors_name_file_and_op():
    bad(lambda d: d["graph"][1]["inputs"][0].update(shape=[3, 2]),
        r"^dump\.json: op 1 \(Dropout\): logical tensor 1 has shape")


def test_ports_must_name_known_tensors():
    bad(lambda d: d.update(input_ports=[0, 99]), r"input_ports names logical tensors that no op uses: \[99\]")


def test_graph_to_json_matches_the_method():
    g = sample_graph()
    assert graph_to_json(g) == g.to_json()
