"""The largest tensor a graph may hold, so that a huge shape is refused with its name and size
before anything is allocated, instead of failing deep inside numpy or the allocator.

The limit is ``TILEFUSE_MAX_TENSOR_BYTES`` (bytes) when set, else half of the machine's
physical memory. The ONNX importer checks graph inputs and every value it computes at import;
the graph pipeline checks every tensor once shapes are inferred.

Example:
    >>> check_tensor_bytes("tensor 'x'", (2, 3), 4)        # 24 bytes: fine
    >>> max_tensor_bytes() > 0
    True
"""
from __future__ import annotations

import math
import os

import numpy as np

from tilefuse.tensorir.settings import positive_setting

from .logical_tensor import GraphError

ENV_VAR = "TILEFUSE_MAX_TENSOR_BYTES"


def max_tensor_bytes() -> int:
    """``TILEFUSE_MAX_TENSOR_BYTES`` when set (a positive integer), else half of physical memory.

    Example:
        >>> max_tensor_bytes() >= 1
        True
    """
    text = os.environ.get(ENV_VAR)
    if text is not None:
        return positive_setting(ENV_VAR, text, GraphError)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):     # no sysconf here: 8 GiB
        return 8 << 30


def check_tensor_bytes(what: str, shape, itemsize: int) -> None:
    """GraphError when a tensor of ``shape`` with elements of ``itemsize`` bytes is over the
    limit; ``what`` names it in the message.

    Example:
        >>> check_tensor_bytes("tensor 'big'", (10 ** 6, 10 ** 6), 4)
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: tensor 'big' of shape (1000000, 1000000) needs 3.6 TiB, over the limit of ...
    """
    nbytes = math.prod(int(d) for d in shape) * itemsize
    limit = max_tensor_bytes()
    if nbytes > limit:
        raise GraphError(f"{what} of shape {tuple(int(d) for d in shape)} needs {_size(nbytes)}, over the limit "
                         f"of {_size(limit)} ({ENV_VAR})")


def checked_array(what: str, value):
    """``value`` as a numpy array in row-major order, refused (GraphError) before any copy when
    its logical size is over the limit: a broadcast view of a few bytes can stand for far more.

    Example:
        >>> import numpy as np
        >>> checked_array("feed 'x'", [[1.0, 2.0]]).flags["C_CONTIGUOUS"]
        True
        >>> checked_array("feed 'x'", np.broadcast_to(np.float32(0), (10 ** 7, 3, 9, 9 * 10 ** 4)))
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: feed 'x' of shape (10000000, 3, 9, 90000) needs 88.4 TiB, over the limit of ...
    """
    array = np.asarray(value)
    check_tensor_bytes(what, array.shape, array.dtype.itemsize)
    return np.asarray(array, order="C")


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
