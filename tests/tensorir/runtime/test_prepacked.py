"""PanelPack: a constant's panels copied by numpy equal the compiled pack stage they replace,
on shapes the block does not divide, along any axis (that a template's prepacked kernel packs
its constant weights this way, with no pack kernel: tests/schedule/test_hoist.py)."""
import numpy as np
import pytest

from tilefuse.schedule import create_schedule
from tilefuse.schedule.hoist import _plain_pack
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.runtime.prepacked import PanelPack


@pytest.mark.parametrize("shape, axis, block", [((13, 37), 1, 16), ((13, 37), 0, 4), ((5, 3, 2, 7), 2, 8),
                                                ((32, 6), 0, 16), ((1,), 0, 4)])
def test_panels_equal_the_compiled_pack_stage(shape, axis, block):
    W = placeholder(shape, name="W", constant=True)
    Y = compute(shape, lambda *i: W[i] * 2.0, name="Y")
    s = create_schedule(Y)
    packed = s.pack(W, axis=axis, block=block)
    source, pack = s.numpy_packs[id(packed.op)]
    assert source is W and pack.recipe() == PanelPack(shape, "float32", axis, block).recipe()
    kernel, inputs = _plain_pack(packed, "pack", None)
    w = np.random.default_rng(0).standard_normal(shape).astype("float32")
    want = np.full(packed.shape, np.nan, "float32")
    kernel(w, want)
    panels = PanelPack(shape, "float32", axis, block)
    got = np.full(panels.args[-1].shape, np.nan, "float32")
    panels(w, got)
    np.testing.assert_array_equal(got, want)
    assert PanelPack(**panels.recipe()).args == panels.args


def test_a_panel_pack_refuses_arrays_of_other_shapes():
    panels = PanelPack((4, 6), "float32", 1, 4)
    with pytest.raises(ValueError, match="panel pack"):
        panels(np.zeros((4, 5), "float32"), np.zeros(panels.args[-1].shape, "float32"))
