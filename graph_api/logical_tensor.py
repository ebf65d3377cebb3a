"""Logical tensors: the metadata (id, dtype, shape, layout, property) that ops connect through."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from tilefuse.tensorir.errors import TilefuseError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UNKNOWN_DIM = -1


class GraphError(TilefuseError, ValueError):
    """A malformed graph or op, or a request the graph cannot serve; the message names the op
    (or tensor) id and the reason."""


class DataType(enum.Enum):
    """Element types, as oneDNN names them (f64, u32 and u64, which ONNX models carry, named alike)."""
    undef = "undef"
    f32 = "f32"
    f64 = "f64"
    f16 = "f16"
    bf16 = "bf16"
    s32 = "s32"
    s64 = "s64"
    s8 = "s8"
    u8 = "u8"
    u32 = "u32"
    u64 = "u64"
    boolean = "boolean"
    f8_e4m3 = "f8_e4m3"
    f8_e5m2 = "f8_e5m2"
    s4 = "s4"
    u4 = "u4"

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this type (bf16: ml_dtypes' bfloat16; the 8- and 4-bit types
        have none: GraphError).

        Example:
            >>> DataType.f32.numpy, DataType.bf16.numpy
            (dtype('float32'), dtype(bfloat16))
        """
        try:
            return _NUMPY[self]
        except KeyError:
            raise GraphError(f"data type {self.value} has no numpy equivalent") from None

    @property
    def itemsize(self) -> int:
        """Bytes per element (4-bit types count a whole byte: packed layouts are not modelled).

        Example:
            >>> DataType.bf16.itemsize
            2
        """
        if self in _NUMPY:
            return _NUMPY[self].itemsize
        return 0 if self is DataType.undef else 1

    @staticmethod
    def of_numpy(dtype) -> "DataType":
        """The DataType of a numpy dtype.

        Example:
            >>> DataType.of_numpy("int8")
            <DataType.s8: 's8'>
        """
        dtype = np.dtype(dtype)
        for k, v in _NUMPY.items():
            if v == dtype:
                return k
        raise GraphError(f"numpy dtype {dtype.name} has no oneDNN data type")


_NUMPY = {k: np.dtype(v) for k, v in {
    DataType.f32: "float32", DataType.f64: "float64", DataType.f16: "float16", DataType.bf16: ml_dtypes.bfloat16,
    DataType.s32: "int32", DataType.s64: "int64", DataType.s8: "int8", DataType.u8: "uint8",
    DataType.u32: "uint32", DataType.u64: "uint64", DataType.boolean: "bool"}.items()}


class LayoutType(enum.Enum):
    undef = "undef"
    any = "any"
    strided = "strided"
    opaque = "opaque"


class PropertyType(enum.Enum):
    undef = "undef"
    variable = "variable"
    constant = "constant"
    host_scalar = "host_scalar"


def _enum(cls, value, what: str, tensor_id):
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        raise GraphError(f"logical tensor {tensor_id}: unknown {what} {value!r}; expected one of "
                         f"{[m.value for m in cls]}") from None


@dataclass(frozen=True)
class LogicalTensor:
    """Immutable tensor metadata. ``shape`` is a tuple of dims (-1: unknown) or None (unknown
    rank); oneDNN's INT64_MIN for an unknown dim is read as -1. Equality is by content.

    Example:
        >>> t = LogicalTensor(0, DataType.f32, (2, 3))
        >>> t.get_mem_size(), t.strides
        (24, (3, 1))
    """
    id: int
    dtype: DataType
    shape: tuple | None
    layout_type: LayoutType = LayoutType.strided
    property_type: PropertyType = PropertyType.variable
    strides: tuple | None = None

    def __post_init__(self):
        if isinstance(self.id, bool) or not isinstance(self.id, (int, np.integer)) or self.id < 0:
            raise GraphError(f"logical tensor id must be a non-negative int, got {self.id!r}")
        object.__setattr__(self, "id", int(self.id))
        object.__setattr__(self, "dtype", _enum(DataType, self.dtype, "data type", self.id))
        object.__setattr__(self, "layout_type", _enum(LayoutType, self.layout_type, "layout type", self.id))
        object.__setattr__(self, "property_type", _enum(PropertyType, self.property_type, "property type", self.id))
        if self.shape is not None:
            dims = []
            for d in self.shape:
                if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                    raise GraphError(f"logical tensor {self.id}: shape {self.shape!r} must hold ints")
                d = int(d)
                if d == INT64_MIN or d == UNKNOWN_DIM:
                    d = UNKNOWN_DIM
                elif d < 0:
                    raise GraphError(f"logical tensor {self.id}: negative dim {d} in shape {list(self.shape)}")
                elif d > INT64_MAX:
                    raise GraphError(f"logical tensor {self.id}: dim {d} in shape {list(self.shape)} does not fit "
                                     f"in 64 bits")
                dims.append(d)
            object.__setattr__(self, "shape", tuple(dims))
        if self.strides is not None:
            strides = tuple(int(s) for s in self.strides)
            if any(s == INT64_MIN for s in strides) or self.layout_type is not LayoutType.strided:
                strides = None    # real dumps carry INT64_MIN strides on undef/any layouts
            object.__setattr__(self, "strides", strides)
        if self.strides is None and self.layout_type is LayoutType.strided and self.is_known():
            object.__setattr__(self, "strides", _dense_strides(self.shape))

    @property
    def ndim(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def is_known(self) -> bool:
        """True when the rank and every dim are known.

        Example:
            >>> LogicalTensor(1, DataType.f32, (2, -1)).is_known()
            False
        """
        return self.shape is not None and all(d >= 0 for d in self.shape)

    def get_mem_size(self) -> int:
        """Bytes of a dense tensor of this shape; GraphError while the shape is unknown.

        Example:
            >>> LogicalTensor(2, DataType.s8, (4, 4)).get_mem_size()
            16
        """
        if not self.is_known():
            raise GraphError(f"logical tensor {self.id}: shape {self.shape} is not fully known")
        size = 1
        for d in self.shape:
            size *= d
        return size * self.dtype.itemsize

    def with_shape(self, shape) -> "LogicalTensor":
        """This tensor with a (now known) shape and dense strides.

        Example:
            >>> LogicalTensor(3, DataType.f32, (-1, 4)).with_shape((2, 4)).shape
            (2, 4)
        """
        layout = LayoutType.strided if self.layout_type in (LayoutType.any, LayoutType.undef) else self.layout_type
        return LogicalTensor(self.id, self.dtype, tuple(shape), layout, self.property_type, None)

    def is_dense(self) -> bool:
        """Row-major contiguous (what the compiled kernels read and write)."""
        return self.strides is None or not self.is_known() or self.strides == _dense_strides(self.shape)


def _dense_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
