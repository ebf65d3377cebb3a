import sys

import numpy as np
import pytest

from tilefuse.tensorir.runtime.aligned import aligned_empty, data_address
from tilefuse.tensorir.runtime.small_pages import use_small_pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def _flags_at(address: int) -> set:
    """The VmFlags of the mapping holding ``address`` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def test_a_large_array_s_pages_are_marked_for_small_pages_and_the_array_is_unchanged():
    array = aligned_empty((3, 1 << 20), "float32")         # 12 MB: numpy asks for huge pages
    array[...] = 2
    middle = data_address(array) + array.nbytes // 2
    assert "nh" not in _flags_at(middle)
    use_small_pages(array)
    assert "nh" in _flags_at(middle)
    assert float(array.sum()) == 2 * 3 * (1 << 20)


def test_an_array_within_one_page_is_left_alone():
    small = np.ones(100, np.float32)
    use_small_pages(small)
    assert float(small.sum()) == 100
