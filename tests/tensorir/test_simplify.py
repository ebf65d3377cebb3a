"""The arithmetic simplifier: before/after pairs and bounds."""
import pytest

from tilefuse.tensorir import var
from tilefuse.tensorir.expr import Const
from tilefuse.tensorir.simplify import bound, linear_coefficient, make_const, prove, simplify, wrap_int

i, j, k, f = var("i"), var("j"), var("k"), var("f")
R = {i: (0, 4), j: (0, 16), k: (0, 100), f: (0, 1000)}


@pytest.mark.parametrize("before, after", [
    (lambda: (i * 16 + j) // 16, "i"),
    (lambda: (i * 16 + j) % 16, "j"),
    (lambda: (f // 16) * 16 + f % 16, "f"),
    (lambda: ((f // 16) * 16 + f % 16) * 4 + 3 - f * 4, "3"),
    (lambda: (k * 8 + 5) // 4, "k * 2 + 1"),
    (lambda: (k * 8 + 5) % 4, "1"),
    (lambda: i + 0 - i + j * 2 * 3, "j * 6"),
    (lambda: (f // 4) // 8, "f // 32"),
    (lambda: (f % 64) % 8, "f % 8"),
    (lambda: j + i * 16 + 2 - 1, "i * 16 + j + 1"),
    (lambda: (i + 1) * 3 - 3, "i * 3"),
    (lambda: (i * 16 + j) // 64, "0"),
    (lambda: i - i, "0"),
    # a reshape's flatten-then-split: the low terms stay inside one block of the divisor
    (lambda: (k * 64 + i * 16 + j) // 128, "k // 2"),
    (lambda: (k * 64 + i * 16 + j) % 128, "k % 2 * 64 + i * 16 + j"),
    # the floormod rule rewrites the remainder's operand modulo 28; the pair still merges
    (lambda: (k * 64 + j) // 28 * 28 + (k * 64 + j) % 28, "k * 64 + j"),
    (lambda: ((k * 64 + j) // 28 * 28 + (k * 64 + j) % 28) * 2, "k * 128 + j * 2"),
    # three dims flattened and split again (a 14x14 plane): the middle dim's remainder joins in
    (lambda: (k * 64 + j) // 196 * 196 + (k * 64 + j) // 14 % 14 * 14 + (k * 64 + j) % 14, "k * 64 + j"),
    (lambda: (k * 64 + j) // 14 % 14 * 14 + (k * 64 + j) % 14, "(k * 64 + j) % 196"),
    (lambda: (k * 64 + j) // 14 % 14 * 14 + (k * 64 + j + 1) % 14, "(k * 64 + j) // 14 % 14 * 14 + (k * 8 + j + 1) % 14"),
])
def test_index_rules(before, after):
    assert str(simplify(before(), R)) == after


@pytest.mark.parametrize("cond, expected", [
    (lambda: i * 16 + j < 64, True),
    (lambda: i * 16 + j < 60, None),
    (lambda: i * 16 + j >= 0, True),
    (lambda: j > 15, False),
    (lambda: (i < 4) & (j < 16), True),
    (lambda: (i < 2) | (j < 16), True),
    (lambda: i == i, True),
])
def test_prove_from_loop_ranges(cond, expected):
    assert prove(cond(), R) is expected


def test_constant_folding_wraps_and_rounds_like_numpy():
    a = var("a", "int8")
    assert simplify(Const(100, "int8") + Const(100, "int8")).value == -56
    assert wrap_int(256, "uint8") == 0
    assert make_const(0.1, "float32").value == float(__import__("numpy").float32(0.1))
    assert str(simplify(a * 1 + 0)) == "a"


def test_float_arithmetic_is_not_reassociated():
    x = var("x", "float32")
    assert str(simplify((x + 1.0) - 1.0)) == "x + 1f - 1f"
    assert str(simplify(x * 1.0)) == "x"


def test_division_by_zero_constant_is_left_alone():
    assert str(simplify(var("n") // 0)) == "n // 0"


def test_bounds():
    assert bound(i * 4 + 3, {i.uid: (0, 8)}) == (3, 31)
    assert bound(f % 16, {f.uid: (0, 1000)}) == (0, 15)
    assert bound((f // 16), {f.uid: (0, 1000)}) == (0, 62)


def test_linear_coefficient():
    c, rest = linear_coefficient(i * 64 + j * 2 + 1, j)
    assert c == 2 and str(rest) == "i * 64 + 1"
    assert linear_coefficient(i * j, j) is None
    c, rest = linear_coefficient((f // 16) * 16 + f % 16, f)
    assert c == 1 and str(rest) == "0"
    c, rest = linear_coefficient(i + 3, j)
    assert c == 0 and str(rest) == "i + 3"


def test_block_rules_need_the_low_terms_inside_one_block():
    # j spans 16, which does not fit a block of 8: no rewrite to k // ...
    assert str(simplify((k * 8 + j) // 16, R)) != "k // 2"
    # (k*8 + j) // 16 == k // 2 would be wrong for k=1, j=8
    e = simplify((k * 8 + j) // 16, R)
    from tilefuse.tensorir.walk import substitute
    assert simplify(substitute(e, {k: Const(1, "int64"), j: Const(8, "int64")})).value == 1


def test_a_remainder_merges_only_with_a_congruent_quotient():
    # (k*64 + j) % 28 and (k*64 + j + 1) // 28 are not a pair: nothing merges
    e = simplify((k * 64 + j + 1) // 28 * 28 + (k * 64 + j) % 28, R)
    assert "//" in str(e) and "%" in str(e)
