import mmap

import numpy as np
import pytest

from tilefuse.tensorir.runtime.aligned import CACHE_LINE, aligned_empty, data_address
from tilefuse.tensorir.runtime.spare_memory import SpareMemory

WANTED = ((300, 200), "float32")


def test_the_memory_of_a_dropped_array_makes_a_wanted_array_of_its_size():
    spare = SpareMemory([WANTED, WANTED])
    held = {"a": aligned_empty((200, 300), "float32"), "b": np.empty(60000 + 16, np.float32)}
    addresses = [data_address(held["a"])]
    spare.give(held.pop("a"))
    got = spare.empty(*WANTED)
    assert data_address(got) == addresses[0] and data_address(got) % CACHE_LINE == 0
    assert got.shape == (300, 200) and got.dtype == np.float32 and got.flags.c_contiguous and got.flags.writeable
    got[...] = 7
    assert float(got.sum()) == 7 * 60000
    assert data_address(spare.empty(*WANTED)) != addresses[0]        # nothing spare left: new memory


def test_memory_anything_else_holds_is_never_kept():
    spare = SpareMemory([WANTED] * 4)
    kept = aligned_empty((200, 300), "float32")
    view_of = aligned_empty((200, 300), "float32")
    other_view = view_of.reshape(-1)
    arrays = {"named": kept, "viewed": view_of}
    del view_of
    spare.give(arrays.pop("named"))                 # the caller still has it as ``kept``
    spare.give(arrays.pop("viewed"))                # ``other_view`` still reads its memory
    for got in (spare.empty(*WANTED), spare.empty(*WANTED)):
        assert not np.shares_memory(got, kept) and not np.shares_memory(got, other_view)


def test_memory_numpy_did_not_allocate_or_that_no_later_array_wants_is_not_kept():
    spare = SpareMemory([WANTED])
    with mmap.mmap(-1, 240064) as mapped:
        arrays = {"mapped": np.frombuffer(mapped, np.uint8), "unwanted": aligned_empty((10, 30), "float32")}
        spare.give(arrays.pop("mapped"))
        spare.give(arrays.pop("unwanted"))
        spare.give("not an array")
        assert spare._spare == {}


def test_a_read_only_array_s_memory_makes_a_writable_one():
    spare = SpareMemory([WANTED])
    arrays = {"constant": aligned_empty((200, 300), "float32")}
    arrays["constant"].flags.writeable = False          # as a bound constant is
    address = data_address(arrays["constant"])
    spare.give(arrays.pop("constant"))
    got = spare.empty(*WANTED)
    assert data_address(got) == address and got.flags.writeable


@pytest.mark.parametrize("shape", [(0, 5), 7, ()])
def test_an_array_of_any_shape_can_be_asked_for(shape):
    got = SpareMemory().empty(shape, "float64")
    assert got.shape == np.empty(shape).shape and (got.size == 0 or data_address(got) % CACHE_LINE == 0)
