"""graph_api.ops: one record per op kind, and the drivers that read it."""
import dataclasses

import pytest

from tilefuse.graph_api import GraphError, INFERABLE_KINDS, OpKind, get_schema
from tilefuse.graph_api.lowering import LOWERED_KINDS
from tilefuse.graph_api.ops import REGISTRY, define, op_def
from tilefuse.graph_api.reference import SUPPORTED_KINDS


def test_every_kind_has_exactly_one_record_under_its_own_kind():
    assert set(REGISTRY) == set(OpKind)
    for kind, record in REGISTRY.items():
        assert record.kind is kind and record.schema.kind is kind
        assert get_schema(kind) is record.schema


def test_the_drivers_kind_sets_come_from_the_registry():
    assert LOWERED_KINDS == {k for k, d in REGISTRY.items() if d.lower}
    assert SUPPORTED_KINDS == {k for k, d in REGISTRY.items() if d.reference}
    assert INFERABLE_KINDS == {k for k, d in REGISTRY.items() if d.shape}


def test_a_lowered_kind_has_a_reference_and_a_shape_rule_to_be_checked_against():
    for kind in LOWERED_KINDS:
        assert op_def(kind).reference is not None, kind
        assert op_def(kind).shape is not None, kind


def test_defining_a_kind_twice_or_looking_up_an_unknown_one_fails():
    with pytest.raises(GraphError, match="ReLU is defined twice"):
        define(op_def("ReLU").schema)
    with pytest.raises(GraphError, match="unknown op kind|not a valid|Frobnicate"):
        op_def("Frobnicate")


def test_a_record_missing_from_the_registry_is_reported_by_kind(monkeypatch):
    monkeypatch.delitem(REGISTRY, OpKind.ReLU)
    with pytest.raises(GraphError, match="ReLU has no definition"):
        op_def(OpKind.ReLU)


def test_records_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        op_def("Add").lower = None
