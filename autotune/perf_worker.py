"""One engine of ``autotune perf`` in a process of its own, so that its peak memory is its own.

``cli_perf`` starts this file as a script (``runpy.run_path``: no package import, so an
onnxruntime process holds onnxruntime and numpy, not the compiler) and talks to it with
pickled messages, stdin in, a private copy of stdout out (the engine's own prints go to
stderr). The first message, ``{"engine", "model", "feeds", "threads", "db"}``, loads the
engine and runs it once; the answer is ``("ready", seconds, rss_before, outputs, notes)`` or
``("error", message)``. Then ``("block", seconds, pause, warmup)`` times a block
(``engine_blocks``: a pause, a warm-up, timed runs for ``seconds``) and answers
``("times", [seconds of each run])``; ``("end",)`` answers ``("rss", peak bytes)`` and exits.

Example:
    >>> sorted(ENGINES)
    ['onnxruntime', 'openvino', 'tilefuse']
"""
from __future__ import annotations

import importlib.util
import os
import pickle
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy  # the feeds' arrays: part of every engine's process, in the baseline peak_rss reports


def _blocks():
    """``engine_blocks``, loaded from its file beside this one (no package import)."""
    spec = importlib.util.spec_from_file_location("engine_blocks", Path(__file__).with_name("engine_blocks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes: Linux's ``VmHWM`` (the high-water
    mark of this program's memory, new at exec), else ``ru_maxrss``, which Linux carries over
    from the process that started this one (its parent's memory, at the fork) and so is not
    the engine's own.

    Example:
        >>> peak_rss() > 0
        True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _tilefuse(model, feeds, threads, db):
    if db is not None:
        from tilefuse.autotune import InferenceSession
        session = InferenceSession(model, db=db, num_threads=threads)
    else:
        from tilefuse.graph_api import InferenceSession
        session = InferenceSession(model, num_threads=threads)
    run_once = lambda: session.run(None, feeds)          # noqa: E731
    return run_once, run_once


def _onnxruntime(model, feeds, threads, db):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    run_once = lambda: session.run(None, feeds)          # noqa: E731
    return run_once, run_once


def _openvino(model, feeds, threads, db):
    import openvino
    core = openvino.Core()
    network = core.read_model(model)
    network.reshape({name: list(value.shape) for name, value in feeds.items()})
    compiled = core.compile_model(network, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                   "INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()

    def outputs():
        result = request.infer(feeds)
        return [result[port] for port in compiled.outputs]
    return (lambda: request.infer(feeds)), outputs


ENGINES = {"tilefuse": _tilefuse, "onnxruntime": _onnxruntime, "openvino": _openvino}
"""engine name -> function(model path, feeds by input name, threads, tuning db or None) that
loads the model and returns (a function running it once, one running it once and returning
its outputs as a list of arrays, in the model's order)."""


def _load(request) -> tuple:
    """(run once, seconds to load, compile and run once, the first run's outputs, notes: the
    warnings' texts, counted)."""
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_once, run_for_outputs = ENGINES[request["engine"]](request["model"], request["feeds"],
                                                               request["threads"], request["db"])
        outputs = [numpy.array(x) for x in run_for_outputs()]
    seconds = time.perf_counter() - started
    notes = {}
    for w in caught:                  # kind -> (count, the first message)
        count, first = notes.get(w.category.__name__, (0, str(w.message)))
        notes[w.category.__name__] = (count + 1, first)
    return run_once, seconds, outputs, notes


def serve(inbox, outbox) -> None:
    """Answer ``cli_perf``'s messages (see the module docstring) from ``inbox`` to ``outbox``
    (binary files) until ``("end",)`` or the end of ``inbox``."""
    def send(message):
        pickle.dump(message, outbox)
        outbox.flush()
    before = peak_rss()
    try:
        request = pickle.load(inbox)
        run_once, seconds, outputs, notes = _load(request)
    except Exception as err:          # the engine's own refusal of the model: reported, not raised
        text = (str(err).strip().splitlines() or [""])[0]
        send(("error", f"{type(err).__name__}: {text}"[:300]))
        return
    send(("ready", seconds, before, outputs, notes))
    blocks = _blocks()
    while True:
        try:
            message = pickle.load(inbox)
        except EOFError:
            return
        if message[0] == "end":
            send(("rss", peak_rss()))
            return
        _, block_seconds, pause, warmup = message
        blocks.settle(run_once, pause, warmup)
        send(("times", blocks.timed_runs(run_once, seconds=block_seconds)))


def main() -> None:
    """The worker's entry point: the protocol on stdin and a copy of stdout, whose descriptor
    then points at stderr so that an engine's prints cannot corrupt the messages."""
    outbox = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        serve(sys.stdin.buffer, outbox)
    except (KeyboardInterrupt, BrokenPipeError):      # Ctrl-C reaches the whole process group; perf reports it
        pass


if __name__ == "__main__":
    main()
