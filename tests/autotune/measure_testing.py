"""Test helpers for measurement: tasks, and a builder whose candidates misbehave on purpose.

``misbehaving_builder`` is a picklable top-level builder (for ``measure_batch(builder=...)``)
that builds the real kernel for most configs of the injective ``elementwise_task`` but, keyed
by the (vector, unroll) knobs, fails to compile or returns native code that segfaults, hangs,
reports an error status or computes something else -- the ways a real candidate goes wrong.
"""
from __future__ import annotations

import os
import signal
import time

from tilefuse.autotune.measure import build_candidate
from tilefuse.autotune.task import Task
from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder, reduce_axis
from tilefuse.tensorir import sum as tsum
from tilefuse.tensorir.runtime.kernel import ArgSpec, compile_llvm

# (vector, unroll) of the injective template -> what the candidate does
BEHAVIOUR = {(8, 1): "compile", (8, 2): "crash", (8, 8): "timeout", (32, 1): "wrong_answer",
             (32, 2): "runtime"}


def elementwise_task() -> Task:
    """B = A * 2 + 1 over 64 x 256 float32 (injective; default vector 16, unroll 4)."""
    A = placeholder((64, 256), name="A")
    return Task(compute((64, 256), lambda i, j: A[i, j] * 2.0 + 1.0, name="B"))


def matmul_task(n=48, k=32, m=64) -> Task:
    A = placeholder((n, k), name="A")
    B = placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return Task(compute((n, m), lambda i, j: tsum(A[i, r] * B[r, j], axis=r), name="C"))


def weights_task(constant: bool = True) -> Task:
    """A 5x24 by 24x40 matmul whose second input is a constant (a weight) unless ``constant``
    is False."""
    a = placeholder((5, 24), name="a")
    w = placeholder((24, 40), name="w", constant=constant)
    k = reduce_axis((0, 24), name="k")
    return Task(compute((5, 40), lambda i, j: tsum(a[i, k] * w[k, j], axis=k), name="c"))


def config_for(task: Task, behaviour: str):
    """A config of ``elementwise_task`` that ``misbehaving_builder`` turns into ``behaviour``."""
    vector, unroll = next(k for k, v in BEHAVIOUR.items() if v == behaviour)
    return {"vector": vector, "unroll": unroll, "parallel": False}


def _native(task: Task, name: str, body: str):
    outputs = {id(t) for t in task.outputs}
    args = [ArgSpec(t.name, t.dtype, t.shape, id(t) in outputs) for t in task.args]
    params = ", ".join(f"ptr %a{i}" for i in range(len(args)))
    return compile_llvm(name, args, f"define i32 @{name}({params}) {{\n{body}\n}}")


def misbehaving_builder(task: Task, config):
    behaviour = BEHAVIOUR.get((config["vector"], config["unroll"]))
    if behaviour == "compile":
        raise ValueError("this candidate does not compile")
    if behaviour == "crash":       # a store through a null pointer: SIGSEGV when called
        return _native(task, "crash", "  store volatile i32 1, ptr null\n  ret i32 0")
    if behaviour == "timeout":     # spins forever when called
        return _native(task, "hang", "entry:\n  br label %loop\nloop:\n  %x = load volatile i32, ptr %a0\n"
                                     "  br label %loop")
    if behaviour == "runtime":     # reports that it could not allocate its buffers
        return _native(task, "nomem", "  ret i32 1")
    if behaviour == "wrong_answer":  # a real kernel of the same signature computing A * 3
        A = placeholder(task.inputs[0].shape, name="A")
        B = compute(A.shape, lambda i, j: A[i, j] * 3.0, name="B")
        return build(create_schedule(B), [A, B])
    return build_candidate(task, config)


def crash_in_python(code: int = 0):
    """Kill the calling process with SIGSEGV (for executor tests)."""
    os.kill(os.getpid(), signal.SIGSEGV)
    return code


def sleep_for(seconds: float):
    time.sleep(seconds)
    return seconds


def raise_value_error(message: str):
    raise ValueError(message)


def process_id(_=None) -> int:
    return os.getpid()
