"""An ONNX model's large weights read where they lie, not through protobuf.

Parsing a ``ModelProto`` copies every initializer's bytes into protobuf's memory, and reading
one as a numpy array copies them again: BERT-base's 440 MB of weights cost about 1.3 GB at the
import's peak, and the session kept the parsed model for the next shape. ``split_weights``
walks the serialized model's wire format instead: it copies everything but the ``raw_data`` of
large initializers (more than ``skeleton.SKELETON_ELEMENTS`` elements) into a small serialized
model that protobuf parses in milliseconds, and notes where each left-out ``raw_data`` lies
(``StoredWeight``). ``ModelWeights`` then reads one into an array of its own, on a cache line,
when the import needs it: each weight is read once, and the file's pages are never mapped.
During an import they are read ahead, in file order, on a thread of their own
(``ModelWeights.reading_ahead``), while the import builds its graph.

Only what the wire format needs is decoded: ``ModelProto.graph`` (field 7),
``GraphProto.initializer`` (field 5), and in each initializer its dims (1), data type (2),
name (8) and raw data (9); every other field, nodes and subgraphs included, is copied as it
is. Anything that is not well-formed protobuf is a ``MalformedModel``.

Example:
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> w = numpy_helper.from_array(np.arange(8192, dtype=np.float32).reshape(64, 128), "w")
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    >>> graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [], [w])
    >>> data = helper.make_model(graph).SerializeToString()
    >>> small, stored = split_weights(data)
    >>> len(small) < 200 < len(data), sorted(stored)
    (True, ['w'])
    >>> ModelWeights(data, stored).array("w")[1, :3].tolist()
    [128.0, 129.0, 130.0]
"""
from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass

import numpy as np

from tilefuse.tensorir.runtime.aligned import aligned_empty
from tilefuse.tensorir.runtime.small_pages import use_small_pages

from ..logical_tensor import GraphError
from ..mapped_file import file_stamp
from .read_ahead import ReadAhead
from .skeleton import SKELETON_ELEMENTS

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 8, 9


@dataclass(frozen=True)
class StoredWeight:
    """Where an initializer's ``raw_data`` lies in the serialized model, and what it holds."""
    name: str
    offset: int
    length: int
    data_type: int
    dims: tuple


def split_weights(data) -> tuple:
    """(the model serialized without the large initializers' ``raw_data``, {name:
    ``StoredWeight``}) of serialized model ``data`` (bytes, or any buffer: an ``mmap`` of the
    file reads only the pages around the fields it decodes). See the module docstring."""
    stored: dict = {}
    out = bytearray()
    with memoryview(data) as whole, whole.cast("B") as view:
        for number, kind, start, end, header in _fields(view, 0, len(view)):
            if number == _MODEL_GRAPH and kind == _LEN:
                _append_message(out, number, _graph(view, start, end, stored))
            else:
                out += view[header:end]
    return bytes(out), stored


class MalformedModel(ValueError):
    """Bytes that are not well-formed protobuf (the importer names the model)."""


class ModelWeights:
    """The stored weights of one model (``split_weights``) and where to read them: the model
    file (kept open, so that a file renamed over it later does not change what is read; one
    edited in place is refused) or the serialized model (bytes).

    Example:
        >>> import numpy as np
        >>> from onnx import helper, numpy_helper
        >>> w = numpy_helper.from_array(np.ones((100, 100), np.float16), "w")
        >>> data = helper.make_model(helper.make_graph([], "g", [], [], [w])).SerializeToString()
        >>> weights = ModelWeights(data, split_weights(data)[1])        # or an open model file
        >>> "w" in weights, weights.array("w").dtype, float(weights.array("w").sum())
        (True, dtype('float16'), 10000.0)
    """

    def __init__(self, source, stored: dict, path: str | None = None):
        """``source``: the serialized model, or the model file open for binary reading (named
        ``path`` in errors), which this object then owns."""
        self.stored, self.path = stored, path
        self._ahead = None              # a ReadAhead while ``reading_ahead``
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._file, self._data = None, source
        else:
            self._file, self._data = source, None
            self._stamp = file_stamp(os.fstat(source.fileno()))

    def __contains__(self, name: str) -> bool:
        return name in self.stored

    def array(self, name: str) -> np.ndarray:
        """The array of stored weight ``name``: its own memory, on a cache line."""
        weight = self.stored[name]
        ahead = self._ahead
        array = ahead.take(name) if ahead is not None else None
        return array if array is not None else self._read([weight])[0]

    @contextlib.contextmanager
    def reading_ahead(self):
        """Within it, the weights are read in file order on a thread of their own
        (``read_ahead.ReadAhead``; ``array`` waits for one being read, and reads one the thread
        has not reached), so that an import builds its graph while they are read; on leaving
        it, that thread has ended and what it read and no one took is dropped.

        Example:
            >>> import numpy as np
            >>> from onnx import helper, numpy_helper
            >>> w = numpy_helper.from_array(np.ones((100, 100), np.float32), "w")
            >>> data = helper.make_model(helper.make_graph([], "g", [], [], [w])).SerializeToString()
            >>> weights = ModelWeights(data, split_weights(data)[1])
            >>> with weights.reading_ahead():
            ...     float(weights.array("w").sum())
            10000.0
        """
        if self._ahead is not None:         # another import of this model reads them ahead
            yield self
            return
        readable = []
        for weight in self.stored.values():
            try:
                self._array_type(weight)
                readable.append(weight)
            except GraphError:              # refused when the import asks for it
                pass
        self._ahead = ReadAhead(readable, self._read)
        try:
            yield self
        finally:
            ahead, self._ahead = self._ahead, None
            ahead.stop()

    def _array_type(self, weight: StoredWeight) -> np.dtype:
        """The dtype of ``weight``'s array; GraphError when its data type has none or its data
        does not fill its dims."""
        from onnx import helper
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(weight.data_type))
        except (KeyError, TypeError, ValueError):
            raise GraphError(f"initializer {weight.name!r} has data type {weight.data_type}, which has no array "
                             f"type") from None
        count = math.prod(weight.dims)
        if count < 0 or dtype.itemsize * count != weight.length:
            raise GraphError(f"initializer {weight.name!r} cannot be read: {weight.length} bytes of data for dims "
                             f"{list(weight.dims)} of {dtype.name}")
        return dtype

    def _read(self, run: list) -> list:
        """The arrays of ``run``, stored weights in file order: from a file in one system call
        (the bytes between them read into a scratch buffer), GraphError when it changed in place
        since it was opened or ends inside one of them."""
        arrays = [aligned_empty(weight.dims, self._array_type(weight)) for weight in run]
        for array in arrays:                # filled once: no huge pages to fault in
            use_small_pages(array)
        targets = [array.reshape(-1).view(np.uint8) for array in arrays]
        if self._file is None:
            for weight, target in zip(run, targets):
                target[:] = np.frombuffer(self._data, np.uint8, weight.length, weight.offset)
        else:
            if file_stamp(os.fstat(self._file.fileno())) != self._stamp:
                raise GraphError(f"ONNX model file {self.path!r} was changed in place since it was opened; "
                                 f"open the model again")
            start, end = run[0].offset, run[-1].offset + run[-1].length
            gaps = [b.offset - a.offset - a.length for a, b in zip(run, run[1:])]
            scratch = memoryview(bytearray(max(gaps, default=0)))
            buffers = [targets[0]]
            for gap, target in zip(gaps, targets[1:]):
                buffers += [scratch[:gap], target] if gap else [target]
            done = _read_into(self._file.fileno(), buffers, start)
            if done < end - start:
                cut = next(weight for weight in run if weight.offset + weight.length > start + done)
                raise GraphError(f"initializer {cut.name!r} cannot be read: the file ends inside its data")
        if not np.little_endian:            # ONNX keeps raw data little-endian
            for array in arrays:
                array.byteswap(inplace=True)
        return arrays

    def fill(self, proto) -> None:
        """Put every stored weight's data back into ``proto`` (the model they were split from),
        which then stands alone."""
        for tensor in proto.graph.initializer:
            if tensor.name in self.stored and not tensor.raw_data:
                tensor.raw_data = self.array(tensor.name).tobytes()

    def close(self) -> None:
        """Let the model file go."""
        if self._file is not None:
            self._file.close()


def _read_into(fd: int, buffers: list, offset: int) -> int:
    """Bytes read from ``fd`` at ``offset`` into ``buffers`` in turn (``os.preadv``, again
    after a short read) until they are full or the file ends."""
    total = 0
    while buffers:
        got = os.preadv(fd, buffers, offset + total)
        if got == 0:
            break
        total += got
        while buffers and got >= len(buffers[0]):
            got -= len(buffers[0])
            buffers = buffers[1:]
        if got:
            buffers = [buffers[0][got:], *buffers[1:]]
    return total


def _graph(view, start: int, end: int, stored: dict) -> bytearray:
    out = bytearray()
    for number, kind, f_start, f_end, header in _fields(view, start, end):
        if number == _GRAPH_INITIALIZER and kind == _LEN:
            _append_message(out, number, _tensor(view, f_start, f_end, stored))
        else:
            out += view[header:f_end]
    return out


def _tensor(view, start: int, end: int, stored: dict):
    """The initializer's bytes, without its raw data when that is stored (noted in ``stored``)."""
    dims, data_type, name, raw = [], 0, None, None
    fields = list(_fields(view, start, end))
    for number, kind, f_start, f_end, _ in fields:
        if number == _TENSOR_DIMS and kind == _VARINT:
            dims.append(_varint(view, f_start, f_end)[0])
        elif number == _TENSOR_DIMS and kind == _LEN:
            at = f_start
            while at < f_end:
                value, at = _varint(view, at, f_end)
                dims.append(value)
        elif number == _TENSOR_TYPE and kind == _VARINT:
            data_type = _varint(view, f_start, f_end)[0]
        elif number == _TENSOR_NAME and kind == _LEN:
            name = bytes(view[f_start:f_end]).decode("utf-8", "replace")
        elif number == _TENSOR_RAW and kind == _LEN:
            raw = (f_start, f_end)
    elements = math.prod(_signed(d) for d in dims) if dims else 1
    if raw is None or name is None or name in stored or elements <= SKELETON_ELEMENTS or \
            sum(1 for f in fields if f[0] == _TENSOR_RAW) != 1:
        return view[start:end]
    stored[name] = StoredWeight(name, raw[0], raw[1] - raw[0], data_type, tuple(_signed(d) for d in dims))
    out = bytearray()
    for number, _, _, f_end, header in fields:
        if number != _TENSOR_RAW:
            out += view[header:f_end]
    return out


def _signed(value: int) -> int:
    """An int64 field's value (protobuf writes a negative one as a 10-byte varint)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _fields(view, start: int, end: int):
    """(field number, wire type, value start, value end, header start) of each field in
    ``view[start:end]``; for a varint the value is its bytes."""
    at = start
    while at < end:
        header = at
        key, at = _varint(view, at, end)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise MalformedModel("a protobuf field numbered 0")
        if kind == _VARINT:
            value_start = at
            _, at = _varint(view, at, end)
            yield number, kind, value_start, at, header
        elif kind in (_I64, _I32):
            size = 8 if kind == _I64 else 4
            if at + size > end:
                raise MalformedModel("a protobuf field runs past its message")
            yield number, kind, at, at + size, header
            at += size
        elif kind == _LEN:
            length, at = _varint(view, at, end)
            if at + length > end:
                raise MalformedModel("a protobuf field runs past its message")
            yield number, kind, at, at + length, header
            at += length
        else:
            raise MalformedModel(f"protobuf wire type {kind} (groups are not used by ONNX)")


def _varint(view, at: int, end: int) -> tuple:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise MalformedModel("a protobuf varint is cut short or too long")
        byte = view[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _append_message(out: bytearray, number: int, body) -> None:
    out += _encode_varint(number << 3 | _LEN)
    out += _encode_varint(len(body))
    out += body


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
