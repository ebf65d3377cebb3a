"""Expressions, tensors and compute definitions: construction, dtype rules and bad input."""
import pytest

from tilefuse.tensorir import (DTypeError, cast, compute, const, exp, if_then_else, placeholder, reduce_axis,
                      sum, var)
from tilefuse.tensorir import max as tmax
from tilefuse.tensorir.expr import Add, Const, EQ, IterVar, Mul, Reduce, TensorLoad
from tilefuse.tensorir.node import same


def test_operator_overloading_builds_the_tree():
    A = placeholder((4, 8), name="A")
    B = placeholder((8, 3), name="B")
    r = reduce_axis((0, 8), name="r")
    i, j = var("i"), var("j")
    e = A[i, r] * B[r, j] + 1.0
    assert isinstance(e, Add) and isinstance(e.a, Mul) and isinstance(e.a.a, TensorLoad)
    assert e.dtype == "float32"
    assert str(e) == "A[i, r] * B[r, j] + 1f"


def test_python_numbers_adapt_to_the_expression_dtype():
    x = var("x", "float64")
    assert (x + 1).b == Const(1.0, "float64")
    n = var("n", "int8")
    assert (n * 3).dtype == "int8"


def test_mixing_dtypes_without_cast_names_both():
    x, n = var("x", "float32"), var("n", "int32")
    with pytest.raises(DTypeError, match="float32 and int32"):
        x + n
    assert (x + cast("float32", n)).dtype == "float32"


def test_float_literal_with_int_expression_is_an_error():
    with pytest.raises(DTypeError, match="int32"):
        var("n", "int32") + 0.5


def test_true_division_needs_floats():
    with pytest.raises(DTypeError, match="//"):
        var("n") / 2
    assert str(var("n") // 2) == "n // 2"


def test_bool_operations():
    i = var("i")
    cond = (i > 1) & (i < 5) | ~(i == 3)
    assert cond.dtype == "bool"
    with pytest.raises(DTypeError):
        i & i
    with pytest.raises(DTypeError, match="bool"):
        (i > 1) + (i < 2)


def test_expression_has_no_python_truth_value():
    with pytest.raises(TypeError, match="if_then_else"):
        bool(var("i") < 3)


def test_equality_is_structural_for_dict_keys():
    i = var("i")
    assert isinstance(i == 1, EQ)
    assert bool((i + 1) == (i + 1)) and same(i + 1, i + 1)
    assert not bool(var("i") == i)  # same name, different variable
    table = {i + 1: "a"}
    assert table[i + 1] == "a"


def test_const_checks_range():
    with pytest.raises(DTypeError, match="does not fit"):
        const(300, "int8")
    assert const(2.0, "int32").value == 2


def test_compute_knows_its_dag():
    A = placeholder((4, 8), name="A")
    r = reduce_axis((0, 8), name="r")
    B = compute((4,), lambda i: sum(A[i, r], axis=r), name="B")
    C = compute((4,), lambda i: exp(B[i]) + A[i, 0], name="C")
    assert [a.name for a in C.op.axis] == ["i"]
    assert [a.name for a in B.op.reduce_axis] == ["r"]
    assert [t.name for t in C.op.input_tensors] == ["B", "A"]
    assert isinstance(B.op.body, Reduce) and isinstance(C.op.axis[0], IterVar)
    assert C.op.axis[0].dom == (0, 4)


def test_compute_with_wrong_number_of_indices_names_the_tensor():
    A = placeholder((4, 8), name="A")
    with pytest.raises(ValueError, match="compute 'C'.*1 index.*2 axis"):
        compute((4, 8), lambda i: A[i, 0], name="C")


def test_indexing_with_wrong_rank_or_constant_out_of_bounds():
    A = placeholder((4, 8), name="A")
    with pytest.raises(IndexError, match="tensor A has 2"):
        A[0]
    with pytest.raises(IndexError, match="constant index 8 is out of bounds for dimension 1"):
        A[0, 8]
    with pytest.raises(TypeError, match="slices"):
        A[0, 1:3]
    with pytest.raises(DTypeError, match="integers"):
        A[0, var("x", "float32")]


def test_reduce_axis_outside_a_reducer_is_an_error():
    A = placeholder((4, 8), name="A")
    r = reduce_axis((0, 8), name="r")
    with pytest.raises(ValueError, match="reduce axis r is used outside a reducer"):
        compute((4,), lambda i: A[i, r] * 2.0, name="B")


def test_reducer_must_be_the_whole_body():
    A = placeholder((4, 8), name="A")
    r = reduce_axis((0, 8), name="r")
    with pytest.raises(ValueError, match="whole body"):
        compute((4,), lambda i: sum(A[i, r], axis=r) + 1.0, name="B")


def test_reducer_axis_must_be_a_reduce_axis():
    A = placeholder((4, 8), name="A")
    with pytest.raises(ValueError, match="not a reduce axis"):
        compute((4,), lambda i: sum(A[i, 0], axis=i), name="B")
    r = reduce_axis((0, 8), name="r")
    with pytest.raises(ValueError, match="twice"):
        compute((4,), lambda i: tmax(A[i, r], axis=[r, r]), name="B")


def test_axis_of_another_compute_is_rejected():
    A = placeholder((4,), name="A")
    B = compute((4,), lambda i: A[i], name="B")
    with pytest.raises(ValueError, match="belongs to another compute"):
        compute((4,), lambda j: A[B.op.axis[0]], name="C")


def test_bad_shapes_and_dtypes():
    with pytest.raises(ValueError, match="negative"):
        placeholder((3, -1), name="A")
    with pytest.raises(DTypeError, match="unsupported dtype 'float16'"):
        placeholder((3,), "float16", name="A")
    with pytest.raises(ValueError, match="hi < lo"):
        reduce_axis((5, 2), name="r")


def test_if_then_else_and_intrinsic_dtypes():
    i = var("i")
    with pytest.raises(DTypeError, match="condition must be bool"):
        if_then_else(i, 1, 2)
    with pytest.raises(DTypeError, match="exp\\(\\) needs a float"):
        exp(i)
    assert if_then_else(i > 0, var("x", "float64"), 0).dtype == "float64"


def test_tensor_used_as_value_is_a_clear_error():
    A = placeholder((4,), name="A")
    with pytest.raises(TypeError, match="returned tensor A; return an element"):
        compute((4,), lambda i: A, name="B")


def test_read_provably_out_of_bounds_is_rejected_at_definition():
    A = placeholder((10, 4), name="A")
    with pytest.raises(IndexError, match=r"index 0 of A \(i \+ 1\) ranges over \[1, 10\] but that dimension has size 10"):
        compute((10,), lambda i: A[i + 1, 0], name="B")
    r = reduce_axis((0, 5), name="r")
    with pytest.raises(IndexError, match="index 1 of A"):
        compute((10,), lambda i: sum(A[i, r], axis=r), name="S")
    with pytest.raises(IndexError, match=r"index 0 of A \(j // 2\) ranges over \[0, 10\]"):
        compute((21,), lambda j: A[j // 2, j % 4], name="P")


def test_reads_that_may_be_guarded_or_are_not_affine_are_not_rejected():
    A = placeholder((10,), name="A")
    compute((11,), lambda i: if_then_else(i < 10, A[i], 0.0), name="guarded")
    compute((4,), lambda i: A[i * i], name="square")        # bounds not exact: left to the user
    compute((20,), lambda i: A[i // 2], name="halves")      # in bounds
    compute((0,), lambda i: A[i + 50], name="empty")         # no iteration reads anything
