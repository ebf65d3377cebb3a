"""A model's stored weights read in file order on a thread of their own while the import builds
the graph on the main one.

The importer asks for the large weights (``weights.ModelWeights``) as its nodes use them, and
reading one is mostly the kernel's work, done without the GIL: copying the file's cached pages
and faulting in the new array's. ``ReadAhead`` does that on a second core meanwhile, several
weights per system call (``os.preadv`` scatters a run of weights and the few bytes between
them): a thread that needs the GIL back while the importer runs Python waits out the
interpreter's switch interval (5 ms), so it asks for it once per run, not once per weight.

What it read is handed out once (``take``): a weight it has not read (yet, or at all) is read
by the caller, as without it. Its own reads never raise: a run that fails (the file changed in
place or cut short, an OSError, no memory) is left unread and the thread ends, so that the
caller's read of that weight meets the same error at the same point of the import. ``stop``
ends the thread and waits for it (no thread may outlive an import: ``build._build_in_workers``
forks only while no other thread runs) and drops what was not taken.

Example:
    >>> import numpy as np
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Stored:
    ...     name: str
    ...     offset: int
    ...     length: int
    >>> data = np.arange(20, dtype=np.uint8)
    >>> read = lambda run: [data[w.offset:w.offset + w.length].copy() for w in run]
    >>> ahead = ReadAhead([Stored("a", 0, 8), Stored("b", 10, 6)], read)
    >>> ahead.take("b").tolist(), ahead.take("b")     # handed out once: then the caller reads it
    ([10, 11, 12, 13, 14, 15], None)
    >>> ahead.stop()
"""
from __future__ import annotations

import threading

RUN_BYTES = 128 << 20
"""Bytes of weights one read of the thread fills, at most (more when one weight is larger)."""
FIRST_RUN_BYTES = 8 << 20
"""... the first read; each next one may fill twice as many (up to ``RUN_BYTES``): the import
soon has its first weights, and the thread asks for the GIL back a few times in all."""
RUN_GAP = 1 << 16
"""Bytes between two weights one read takes in (protobuf fields, small initializers), at most."""
RUN_WEIGHTS = 256
"""Weights one read fills, at most (each weight and each gap is a buffer: ``IOV_MAX`` is 1024)."""

_READING = object()


class ReadAhead:
    """Weights (objects with ``name``, ``offset`` and ``length``; in file order) read by
    ``read(run) -> [array per weight]`` on a thread started here, in runs of weights that lie
    close together (``RUN_BYTES``, ``RUN_GAP``, ``RUN_WEIGHTS``). See the module docstring."""

    def __init__(self, weights, read):
        self._order = sorted(weights, key=lambda w: w.offset)
        self._read = read
        self._state = {w.name: None for w in self._order}      # None: not read; _READING; the array
        self._next = 0
        self._run_bytes = FIRST_RUN_BYTES
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tilefuse-read-ahead", daemon=True)
        self._thread.start()

    def take(self, name: str):
        """The array of weight ``name`` when this reads it (waiting while it is being read),
        else None: then the caller reads it (never read yet, taken before, or its read failed).

        Example:
            >>> ReadAhead([], None).take("w") is None
            True
        """
        with self._changed:
            while self._state.get(name) is _READING:
                self._changed.wait()
            return self._state.pop(name, None)

    def stop(self) -> None:
        """End the thread (after the run it reads, if any), wait for it, and drop what was read
        and not taken.

        Example:
            >>> ahead = ReadAhead([], None); ahead.stop(); ahead.take("w") is None
            True
        """
        with self._changed:
            self._stopping = True
        self._thread.join()
        self._state.clear()

    def _run(self) -> None:
        while True:
            with self._changed:
                run = None if self._stopping else self._claim()
                if not run:
                    return
            try:
                arrays = self._read(run)
            except Exception:           # left to the caller's read, which meets the same
                arrays = None
            with self._changed:
                for weight, array in zip(run, arrays or [None] * len(run)):
                    self._state[weight.name] = array
                self._stopping = self._stopping or arrays is None
                self._changed.notify_all()

    def _claim(self) -> list:
        """The next run of weights not taken yet, marked as being read (with the lock held)."""
        order, run = self._order, []
        while self._next < len(order) and len(run) < RUN_WEIGHTS:
            weight = order[self._next]
            if weight.name not in self._state:          # taken (and read) by the caller already
                self._next += 1
                continue
            if run and (weight.offset - run[-1].offset - run[-1].length > RUN_GAP or
                        weight.offset + weight.length - run[0].offset > self._run_bytes):
                break
            run.append(weight)
            self._state[weight.name] = _READING
            self._next += 1
        self._run_bytes = min(2 * self._run_bytes, RUN_BYTES)
        return run
