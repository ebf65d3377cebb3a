"""Seeded cases of threads running one session over many shapes: a model with symbolic dims
(a convolution block, a dense layer with a softmax, a layer norm), an ``InferenceSession`` that
keeps 1 to 3 compiled shapes, and 2 to 4 threads each running it several times on feeds of 2 to
5 different shapes at once, every result checked against onnxruntime. A thread that raises is
a leak or a wrong refusal; threads still running after ``THREAD_TIMEOUT`` seconds are a HANG.

Example:
    >>> case = threads_case(1)
    >>> case.cls, "threads" in case.description
    ('threads', True)
"""
from __future__ import annotations

import threading

import numpy as np

from fuzz_onnx_models import floats, initializer, node, onnx_model, value_info
from fuzz_outcomes import HANG, OK, WRONG, Outcome, classify_exception, worst

THREAD_TIMEOUT = 120.0
"""Seconds all threads of a case may take together (compiles included) before it is a HANG."""


def conv_block(rng):
    """x[batch, C, height, W] -> Conv 3x3 (pads 1) + bias, Relu, MaxPool 2x2 (ceil_mode), and
    (dim names, the static dims)."""
    c, w, f = int(rng.integers(1, 5)), int(rng.integers(3, 9)), int(rng.integers(1, 6))
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)]
    model = onnx_model(nodes, [value_info("x", ["batch", c, "height", w])], [value_info("y", None)],
                       [initializer("w", floats(rng, [f, c, 3, 3])), initializer("b", floats(rng, [f]))])
    return "conv block", model, lambda batch, height: [batch, c, height, w]


def dense_softmax(rng):
    """x[batch, seq, K] -> MatMul, Add, Softmax over the last axis."""
    k, n = int(rng.integers(1, 33)), int(rng.integers(1, 40))
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["a"]), node("Softmax", ["a"], ["y"], axis=-1)]
    model = onnx_model(nodes, [value_info("x", ["batch", "seq", k])], [value_info("y", None)],
                       [initializer("w", floats(rng, [k, n])), initializer("b", floats(rng, [n]))])
    return "dense + softmax", model, lambda batch, seq: [batch, seq, k]


def layer_norm(rng):
    """x[batch, seq, D] + r -> LayerNormalization over the last axis, then Relu."""
    d = int(rng.integers(1, 40))
    nodes = [node("Add", ["x", "r"], ["h"]), node("LayerNormalization", ["h", "g", "b"], ["n"], axis=-1),
             node("Relu", ["n"], ["y"])]
    model = onnx_model(nodes, [value_info("x", ["batch", "seq", d])], [value_info("y", None)],
                       [initializer("r", floats(rng, [d])), initializer("g", floats(rng, [d], 0.5, 1.5)),
                        initializer("b", floats(rng, [d]))])
    return "layer norm", model, lambda batch, seq: [batch, seq, d]


THREAD_MODELS = [conv_block, dense_softmax, layer_norm]


def check_threads(seed: int) -> Outcome:
    """Build the case of ``seed``, compute onnxruntime's outputs for every feed first, then run
    the threads and compare.

    Example:
        >>> check_threads(0).kind
        'ok'
    """
    from tilefuse.graph_api import InferenceSession
    from fuzz_cases import compare_outputs, onnxruntime_outputs
    rng = np.random.default_rng(seed)
    _, model, shape_of = THREAD_MODELS[seed % len(THREAD_MODELS)](rng)
    data = model.SerializeToString()
    count = int(rng.integers(2, 6))
    shapes = {tuple(shape_of(int(rng.integers(1, 4)), int(rng.integers(1, 12)))) for _ in range(count)}
    feeds = [{"x": floats(rng, list(s))} for s in sorted(shapes)]
    expected = []
    for feed in feeds:
        want, problem = onnxruntime_outputs(data, feed)
        if want is None:
            return Outcome(OK, f"onnxruntime refuses a feed ({problem}); nothing to compare")
        expected.append(want["y"])
    session = InferenceSession(data, max_compiled_shapes=int(rng.integers(1, 4)))
    n_threads = int(rng.integers(2, 5))
    plans = [[int(k) for k in rng.integers(0, len(feeds), int(rng.integers(3, 7)))] for _ in range(n_threads)]
    results = [[] for _ in plans]

    def work(k):
        for index in plans[k]:
            try:
                got = session.run(None, feeds[index])[0]
            except Exception as err:      # classified below
                results[k].append(classify_exception(err, "run"))
                continue
            problem = compare_outputs({"y": got}, {"y": expected[index]})
            results[k].append(Outcome(WRONG, f"thread {k}, shape {list(feeds[index]['x'].shape)}: {problem}")
                              if problem else Outcome(OK))
    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=THREAD_TIMEOUT)
    stuck = [k for k, t in enumerate(threads) if t.is_alive()]
    if stuck:
        return Outcome(HANG, f"threads {stuck} of {len(threads)} still running after {THREAD_TIMEOUT:g} s")
    outcomes = [o for rs in results for o in rs]
    refused = [o for o in outcomes if o.kind not in (OK, WRONG) and o.allowed]
    if refused:       # every feed is valid: a clean refusal is wrong too
        return Outcome(WRONG, f"a valid run was refused: {refused[0].message}")
    runs = sum(len(p) for p in plans)
    return worst(outcomes + [Outcome(OK, f"{runs} runs on {len(feeds)} shapes in {len(threads)} threads right")])


def threads_case(seed: int):
    """The ``threads`` case of ``seed`` (model ``seed % len(THREAD_MODELS)``).

    Example:
        >>> threads_case(2).description.startswith("layer norm")
        True
    """
    from fuzz_cases import Case
    what = THREAD_MODELS[seed % len(THREAD_MODELS)](np.random.default_rng(seed))[0]
    return Case("threads", seed, f"{what}: threads on one session over many shapes",
                lambda: check_threads(seed))

