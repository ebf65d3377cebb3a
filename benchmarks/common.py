"""Shared helpers of the benchmark scripts: anchor environment, timing and the ONNX models."""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path

OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def unset_openblas_overrides() -> None:
    """Re-run this script without the machine's OpenBLAS overrides, so numpy's anchor times are
    OpenBLAS's own choice. Call before numpy is imported; affects only this process.

    Example:
        >>> unset_openblas_overrides()  # doctest: +SKIP
    """
    if any(v in os.environ for v in OPENBLAS_VARS):
        env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARS}
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def median_seconds(fn, repeat: int = 15, min_seconds: float = 0.2) -> float:
    """Median wall time of one call of ``fn`` over ``repeat`` rounds (after a warm-up); each
    round runs ``fn`` enough times to last ``min_seconds / repeat``.

    Example:
        >>> median_seconds(lambda: None, repeat=3) < 1e-3
        True
    """
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_seconds / repeat / once))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def timed_interleaved(engines: dict, rounds: int = 5, pause: float = 0.15) -> dict:
    """{name: seconds} for the zero-argument callables ``engines``: each engine's best block
    (a ``median_seconds``) over ``rounds`` rounds in which the engines take turns, with
    ``pause`` seconds of sleep before each block so that the worker threads a library leaves
    spinning after a call go back to sleep and do not slow the next engine. Measured from the
    threads' CPU time after a last call: OpenBLAS's (numpy's products) spin about 100 ms,
    onnxruntime's about 25 ms, ours under 1 ms; a pause of 50 ms left OpenBLAS's thread
    spinning through the next block's first half. A burst of load from other processes hits
    all engines alike and rarely decides the result.

    Example:
        >>> sorted(timed_interleaved({"a": lambda: None, "b": lambda: None}, rounds=1, pause=0))
        ['a', 'b']
    """
    best = {name: math.inf for name in engines}
    for _ in range(rounds):
        for name, fn in engines.items():
            time.sleep(pause)
            best[name] = min(best[name], median_seconds(fn, repeat=5, min_seconds=0.1))
    return best


def step_kinds(compiled) -> list:
    """What each step of a compiled graph is: its partition's kind, "(ref)" added when the
    reference interpreter runs it, or "view" when its output is a view of its input.

    Example:
        >>> # step_kinds(compile_graph(g)) -> ['complex', 'view', 'injective', ...]
    """
    return ["view" if step.view is not None else step.kind + ("" if step.kernel is not None else "(ref)")
            for step in compiled.steps]


def light_models() -> list:
    """The names of the ``light`` models the installed onnx package ships (alexnet, resnet50,
    densenet121, ... with made-up weights), or [] without onnx.

    Example:
        >>> "resnet50" in light_models() or light_models() == []
        True
    """
    try:
        import onnx
    except ImportError:
        return []
    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted(p.name[len("light_"):-len(".onnx")] for p in folder.glob("light_*.onnx"))


def model_path(name: str) -> Path:
    """A path to an .onnx file, a bundled example (``examples/NAME.onnx``), else a light model
    of the onnx package."""
    if name.endswith(".onnx"):
        return Path(name)
    path = EXAMPLES / f"{name}.onnx"
    if path.exists():
        return path
    import onnx
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
