"""Data types of tensor expressions and the rules for combining them.

Mixing two different dtypes in one operation is an error; a Python number adapts to the
dtype of the expression it meets (an ``int`` to any numeric dtype, a ``float`` only to a
float dtype). Index variables are ``int64``.
"""
from __future__ import annotations

import functools

import numpy as np
from .errors import TilefuseError

DTYPES = ("float32", "float64", "int8", "uint8", "int32", "int64", "uint32", "uint64", "bool")
FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int8", "uint8", "int32", "int64", "uint32", "uint64")
INDEX_DTYPE = "int64"


class DTypeError(TilefuseError, TypeError):
    """Raised when dtypes meet without an explicit cast, or a dtype is not supported."""


def check_dtype(dtype) -> str:
    """Return the canonical name of ``dtype``, raising DTypeError if it is not supported.

    Example:
        >>> check_dtype(np.float32)
        'float32'
    """
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise DTypeError(f"unknown dtype {dtype!r}; supported: {', '.join(DTYPES)}") from None
    if name not in DTYPES:
        raise DTypeError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}")
    return name


def is_float(dtype: str) -> bool:
    """True for float32 and float64.

    Example:
        >>> is_float("float32"), is_float("int8")
        (True, False)
    """
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    """True for the integer dtypes (not bool).

    Example:
        >>> is_int("uint8"), is_int("bool")
        (True, False)
    """
    return dtype in INT_DTYPES


def is_signed(dtype: str) -> bool:
    """True for signed integer and float dtypes.

    Example:
        >>> is_signed("uint8"), is_signed("int8")
        (False, True)
    """
    return dtype not in ("uint8", "uint32", "uint64", "bool")


def bits(dtype: str) -> int:
    """Width in bits of one element as stored in memory (bool is stored as one byte).

    Example:
        >>> bits("float32"), bits("bool")
        (32, 8)
    """
    return np.dtype(dtype).itemsize * 8


def itemsize(dtype: str) -> int:
    """Bytes per element in memory.

    Example:
        >>> itemsize("int64")
        8
    """
    return np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=None)
def min_value(dtype: str):
    """The smallest value of ``dtype`` (-inf for floats): the identity of ``max``.

    Example:
        >>> min_value("int8")
        -128
    """
    if is_float(dtype):
        return float("-inf")
    if dtype == "bool":
        return False
    return int(np.iinfo(dtype).min)


@functools.lru_cache(maxsize=None)
def max_value(dtype: str):
    """The largest value of ``dtype`` (+inf for floats): the identity of ``min``.

    Example:
        >>> max_value("uint8")
        255
    """
    if is_float(dtype):
        return float("inf")
    if dtype == "bool":
        return True
    return int(np.iinfo(dtype).max)


def unify(op: str, a: str, b: str) -> str:
    """The dtype of ``a <op> b``; raises DTypeError naming both dtypes when they differ.

    Example:
        >>> unify("+", "float32", "float32")
        'float32'
    """
    if a != b:
        raise DTypeError(f"operator {op!r} got operands of dtypes {a} and {b}; "
                         f"insert an explicit cast(dtype, x)")
    return a
