"""rfactor: a reduce loop becomes a data axis of a new stage, so it can be vectorized."""
import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, create_schedule, lower
from schedule_testing import rand, run
from tilefuse.tensorir import compute, placeholder, reduce_axis
from tilefuse.tensorir import max as rmax
from tilefuse.tensorir import sum as rsum


@pytest.mark.parametrize("k, factor", [(100, 16), (64, 16), (5, 8), (1, 1)])
@pytest.mark.parametrize("reducer, ref", [(rsum, np.sum), (rmax, np.max)])
def test_rfactor_split_reduction_vectorized(k, factor, reducer, ref):
    X = placeholder((7, k), name="X")
    r = reduce_axis((0, k), name="r")
    Y = compute((7,), lambda i: reducer(X[i, r], axis=r), name="Y")
    s = create_schedule(Y)
    ro, ri = s[Y].split(r, factor=factor)
    YF = s.rfactor(Y, ri)
    assert YF.shape == (7, factor)
    s[YF].vectorize(YF.op.axis[1])
    x = rand((7, k))
    np.testing.assert_allclose(run(s, [X, Y], [x], (7,)), ref(x, axis=1), rtol=1e-5, atol=1e-5)


def test_rfactor_of_a_whole_axis_keeps_the_other_reduce_axes():
    X = placeholder((3, 4, 5), name="X")
    r1, r2 = reduce_axis((0, 4), name="r1"), reduce_axis((0, 5), name="r2")
    Y = compute((3,), lambda i: rsum(X[i, r1, r2], axis=[r1, r2]), name="Y")
    s = create_schedule(Y)
    YF = s.rfactor(Y, r1)
    assert YF.shape == (3, 4) and "r2" in str(lower(s, [X, Y]))
    x = rand((3, 4, 5))
    np.testing.assert_allclose(run(s, [X, Y], [x], (3,)), x.sum((1, 2)), rtol=1e-5)


def test_rfactor_errors():
    X = placeholder((3, 8), name="X")
    r = reduce_axis((0, 8), name="r")
    Y = compute((3,), lambda i: rsum(X[i, r], axis=r), name="Y")
    Z = compute((3,), lambda i: Y[i] * 2.0, name="Z")
    s = create_schedule(Z)
    with pytest.raises(ScheduleError, match="stage Z: rfactor needs a reduction"):
        s.rfactor(Z, Z.op.axis[0])
    with pytest.raises(ScheduleError, match="stage Y, axis i: rfactor needs a reduce loop"):
        s.rfactor(Y, Y.op.axis[0])
    s[Y].split(Y.op.axis[0], factor=2)
    with pytest.raises(ScheduleError, match="only loop changes are splits of reduce axes"):
        s.rfactor(Y, r)
