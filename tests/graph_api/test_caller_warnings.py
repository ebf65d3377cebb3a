"""Warnings of an import or a compile point at the caller's line, not at tilefuse's own files;
a category with a summary becomes one warning; nested collection keeps them once."""
import warnings

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from tilefuse.graph_api import compile_graph, from_onnx  # noqa: E402
from tilefuse.graph_api.caller_warnings import warned_at_caller  # noqa: E402


def hardmax_model():
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], name="/hardmax", axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_import_and_compile_warnings_point_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = from_onnx(hardmax_model())
        compile_graph(graph)
    texts = [str(w.message) for w in caught]
    assert any("runs as a Wildcard" in t for t in texts) and any("reference interpreter" in t for t in texts)
    assert {w.filename for w in caught} == {__file__}


class Counted(UserWarning):
    @classmethod
    def summary(cls, messages):
        return f"{len(messages)} of them"


def test_a_category_with_a_summary_is_one_warning_and_nesting_keeps_each_once():
    def work():
        for k in range(3):
            warnings.warn(Counted(f"one {k}"))
        warnings.warn("plain")
        warnings.warn("plain")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warned_at_caller(warned_at_caller, work)
    assert sorted(str(w.message) for w in caught) == ["3 of them", "plain"]
    assert {w.filename for w in caught} == {__file__}
