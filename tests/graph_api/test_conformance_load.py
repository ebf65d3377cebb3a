"""Every oneDNN benchdnn graph input under ../shared/conformance/onednn_graph loads and finalizes;
files of forward ops with known input shapes get their output shapes inferred, and re-inferring
them from the inputs alone reproduces the shapes written in the file."""
from pathlib import Path

import pytest

from tilefuse.graph_api import INFERABLE_KINDS, Graph, GraphError, LayoutType, LogicalTensor, Op, infer_shapes, load_json

ROOT = Path(__file__).parents[2] / ".." / "shared" / "conformance" / "onednn_graph"
if not ROOT.is_dir():
    pytest.skip(f"conformance inputs not found at {ROOT}", allow_module_level=True)

FILES = sorted(ROOT.rglob("*.json"))
# Files that are truly invalid, with the GraphError text expected for each (none so far).
KNOWN_INVALID: dict[str, str] = {}


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def inferable(g: Graph) -> bool:
    return all(op.kind in INFERABLE_KINDS for op in g.ops) and all(t.is_known() for t in g.get_input_ports())


def blanked(g: Graph) -> Graph:
    """The same graph with every non-input tensor's shape forgotten."""
    inputs = {t.id for t in g.get_input_ports()}

    def forget(t):
        return t if t.id in inputs else LogicalTensor(t.id, t.dtype, None, LayoutType.any, t.property_type)

    out = Graph(g.engine_kind, g.fpmath_mode)
    for op in g.ops:
        out.add_op(Op(op.id, op.kind, [forget(t) for t in op.inputs], [forget(t) for t in op.outputs], op.attrs))
    out.finalize()
    return out


def test_the_conformance_set_is_there():
    assert len(FILES) >= 100


@pytest.mark.parametrize("path", FILES, ids=name)
def test_file_loads_and_finalizes(path):
    if name(path) in KNOWN_INVALID:
        with pytest.raises(GraphError, match=KNOWN_INVALID[name(path)]):
            load_json(path)
        return
    g = load_json(path)
    assert g.is_finalized and g.ops
    assert len(g.topological_ops()) == len(g.ops)
    assert g.get_output_ports()


@pytest.mark.parametrize("path", [p for p in FILES if name(p) not in KNOWN_INVALID], ids=name)
def test_output_shapes_are_inferred(path):
    g = load_json(path)
    if not inferable(g):
        pytest.skip("has ops without shape inference (backward ops) or unknown input shapes")
    given = infer_shapes(g)                          # checks every shape written in the file
    assert given == g.tensors
    again = infer_shapes(blanked(g))                 # and re-derives them from the inputs
    assert {i: t.shape for i, t in again.items()} == {i: t.shape for i, t in given.items()}


def test_summary(capsys):
    loaded = inferred = 0
    for path in FILES:
        try:
            g = load_json(path)
        except GraphError:
            assert name(path) in KNOWN_INVALID, f"{name(path)} failed to load"
            continue
        loaded += 1
        if inferable(g):
            infer_shapes(g)
            inferred += 1
    with capsys.disabled():
        print(f"\nconformance: {loaded}/{len(FILES)} files load, {inferred} get shapes inferred, "
              f"{len(KNOWN_INVALID)} known invalid")
    assert loaded == len(FILES) - len(KNOWN_INVALID)
