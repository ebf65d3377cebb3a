import threading
from dataclasses import dataclass

import numpy as np

from tilefuse.graph_api.onnx import read_ahead
from tilefuse.graph_api.onnx.read_ahead import ReadAhead

DATA = np.arange(1 << 16, dtype=np.uint8)


@dataclass(frozen=True)
class Stored:
    name: str
    offset: int
    length: int


def _weights(*spans):
    return [Stored(f"w{k}", offset, length) for k, (offset, length) in enumerate(spans)]


class Recorder:
    """A read function that records the runs it was given, and can be held or made to fail."""

    def __init__(self, fail_on=None):
        self.runs, self.fail_on = [], fail_on
        self.release, self.failed = threading.Event(), threading.Event()
        self.release.set()

    def __call__(self, run):
        self.release.wait()
        self.runs.append([w.name for w in run])
        if self.fail_on in self.runs[-1]:
            self.failed.set()
            raise OSError("disk gone")
        return [DATA[w.offset:w.offset + w.length].copy() for w in run]


def test_every_weight_is_read_once_in_file_order_and_handed_out_once():
    weights = _weights((300, 10), (0, 100), (120, 50))          # listed out of file order
    read = Recorder()
    ahead = ReadAhead(weights, read)
    ahead._thread.join(5)                                       # it ends once all is read
    for w in weights:
        np.testing.assert_array_equal(ahead.take(w.name), DATA[w.offset:w.offset + w.length])
        assert ahead.take(w.name) is None                       # once: the caller reads it again itself
    ahead.stop()
    assert read.runs == [["w1", "w2", "w0"]]                    # close together: one read


def test_runs_end_at_a_wide_gap_and_at_their_size_bound(monkeypatch):
    monkeypatch.setattr(read_ahead, "RUN_GAP", 50)
    monkeypatch.setattr(read_ahead, "RUN_BYTES", 1000)
    monkeypatch.setattr(read_ahead, "FIRST_RUN_BYTES", 1000)
    weights = _weights((0, 100), (140, 100), (300, 100), (400, 1000), (1400, 10), (1500, 2000))
    read = Recorder()
    ahead = ReadAhead(weights, read)
    ahead._thread.join(5)                                       # it ends once all is read
    ahead.stop()
    # a gap of 40 bytes, then of 60; 1100 bytes; 1010 bytes; one larger than the bound alone
    assert read.runs == [["w0", "w1"], ["w2"], ["w3"], ["w4"], ["w5"]]


def test_each_run_may_take_twice_the_bytes_of_the_one_before_up_to_the_bound(monkeypatch):
    monkeypatch.setattr(read_ahead, "FIRST_RUN_BYTES", 100)
    monkeypatch.setattr(read_ahead, "RUN_BYTES", 400)
    weights = _weights(*[(100 * k, 100) for k in range(12)])
    read = Recorder()
    ahead = ReadAhead(weights, read)
    ahead._thread.join(5)
    ahead.stop()
    assert [len(run) for run in read.runs] == [1, 2, 4, 4, 1]


def test_a_take_waits_for_the_weight_being_read_and_a_weight_taken_first_is_not_read():
    weights = _weights((0, 100), (1 << 20, 100))                # far apart: two runs
    read = Recorder()
    read.release.clear()                                        # the thread holds in its first read
    ahead = ReadAhead(weights, read)
    assert ahead.take("w1") is None                             # not read yet: the caller reads it
    got = []
    taker = threading.Thread(target=lambda: got.append(ahead.take("w0")))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive()                                     # waits while w0 is read
    read.release.set()
    taker.join(5)
    np.testing.assert_array_equal(got[0], DATA[:100])
    ahead.stop()
    assert read.runs == [["w0"]]                                # w1 was the caller's


def test_a_read_that_fails_leaves_its_run_and_the_rest_to_the_caller_and_raises_nothing():
    weights = _weights((0, 10), (1 << 20, 10), (2 << 20, 10))
    read = Recorder(fail_on="w1")
    ahead = ReadAhead(weights, read)
    assert read.failed.wait(5)
    assert ahead.take("w1") is None and ahead.take("w2") is None    # the caller's read meets the error
    np.testing.assert_array_equal(ahead.take("w0"), DATA[:10])
    ahead.stop()
    assert read.runs == [["w0"], ["w1"]]                        # the thread stopped at the failure


def test_stop_ends_the_thread_after_its_read_and_drops_what_was_not_taken():
    before = threading.active_count()
    read = Recorder()
    read.release.clear()
    ahead = ReadAhead(_weights((0, 10), (1 << 20, 10)), read)
    assert threading.active_count() == before + 1
    stopper = threading.Thread(target=ahead.stop)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive()                                   # waits for the read in progress
    read.release.set()
    stopper.join(5)
    assert threading.active_count() == before
    assert read.runs == [["w0"]] and ahead.take("w0") is None   # no read after stop; w0 dropped
