"""Tuning tasks: one (schedule template, workload) pair per distinct compute DAG.

A ``Task`` wraps the output tensors of a compute DAG (one partition of a graph). Its ``key``
names the workload structurally: a sha256 of a canonical text of the DAG in which tensors and
variables are numbered by position instead of named, so the same partition built anywhere --
another graph, another process, another machine or Python version -- has the same key, and a
tuning record found under that key applies to it.

Tasks pickle (for measurement workers): the IR travels as is and the template is rebuilt on
the other side.

Example:
    >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
    >>> A = placeholder((64, 32), name="A"); B = placeholder((32, 48), name="B")
    >>> r = reduce_axis((0, 32), name="r")
    >>> C = compute((64, 48), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
    >>> task = Task(C)
    >>> task.template_name, task.flop, len(task.key)
    ('complex', 196608, 64)
"""
from __future__ import annotations

import hashlib
from functools import reduce as _fold
from operator import mul

import numpy as np

from tilefuse.schedule.templates import template_for
from tilefuse.tensorir.runtime.aligned import aligned_zeros
from tilefuse.tensorir.runtime.target import Target
from tilefuse.tensorir import dtype as dt
from tilefuse.tensorir.expr import (Add, Call, Const, Div, FloorDiv, FloorMod, IterVar, Max, Min, Mul, Reduce,
                           Select, Sub, TensorLoad, Var, reserve_uids_through)
from tilefuse.tensorir.node import Node, field_names
from tilefuse.tensorir.tensor import ComputeOp, PlaceholderOp, Tensor, post_order
from tilefuse.tensorir.walk import walk

KEY_FORMAT = "tilefuse-workload-v1"   # bump when canonical_text changes: keys change with it

_ARITHMETIC = (Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, Call)


def _as_outputs(outputs) -> list[Tensor]:
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    try:
        outputs = list(outputs)
    except TypeError:
        raise TypeError(f"task outputs must be a tensor or a list of tensors, got {type(outputs).__name__}") from None
    if not outputs:
        raise ValueError("a task needs at least one output tensor")
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"task outputs must be tensors, got {type(t).__name__}")
        if not isinstance(t.op, ComputeOp):
            raise ValueError(f"task output {t.name} is a placeholder; a task's outputs must be computed tensors")
    if len({id(t.op) for t in outputs}) != len(outputs):
        raise ValueError(f"task outputs must be distinct tensors, got {[t.name for t in outputs]}")
    return outputs


def canonical_text(outputs, template_name: str) -> str:
    """The text the workload key hashes: the template name, then every op of the DAG in post
    order (placeholders and computes numbered ``t0, t1, ...``) with shape, dtype, tag and the
    body printed node by node, variables numbered ``v0, v1, ...`` in order of appearance.
    Names of tensors and variables never appear.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> X = placeholder((8,), name="X"); Y = compute((8,), lambda i: X[i] * 2.0, name="Y")
        >>> print(canonical_text(Y, "injective"))
        tilefuse-workload-v1 template=injective
        t0 = placeholder (8,) float32
        t1 = compute (8,) float32 tag='' axes=[v0[0+8,data]] body=Mul:float32(t0[v0[0+8,data]], Const(float 2.0):float32)
        outputs t1
    """
    outputs = _as_outputs(outputs)
    ops = post_order(outputs)
    tensor_ids = {id(op): n for n, op in enumerate(ops)}
    var_ids: dict[int, int] = {}

    def var(v: Var) -> str:
        k = var_ids.setdefault(v.uid, len(var_ids))
        if isinstance(v, IterVar):
            return f"v{k}[{v.dom_min}+{v.dom_extent},{v.kind}]"
        return f"v{k}:{v.dtype}"

    def value(x) -> str:
        if isinstance(x, Var):
            return var(x)
        if isinstance(x, TensorLoad):
            return f"t{tensor_ids[id(x.tensor.op)]}[{', '.join(value(i) for i in x.indices)}]"
        if isinstance(x, Const):
            return f"Const({type(x.value).__name__} {x.value!r}):{x.dtype}"
        if isinstance(x, Node):
            fields = [value(getattr(x, f)) for f in field_names(type(x)) if f != "dtype"]
            return f"{type(x).__name__}:{getattr(x, 'dtype', '')}({', '.join(fields)})"
        if isinstance(x, (tuple, list)):
            return "[" + ", ".join(value(v) for v in x) + "]"
        if x is None or isinstance(x, (bool, int, float, str)):
            return repr(x)
        raise TypeError(f"cannot print {type(x).__name__} in a workload key")

    lines = [f"{KEY_FORMAT} template={template_name}"]
    for n, op in enumerate(ops):
        if isinstance(op, ComputeOp):
            axes = ", ".join(var(a) for a in op.axis)
            lines.append(f"t{n} = compute {op.shape} {op.dtype} tag={op.tag!r} axes=[{axes}] body={value(op.body)}")
        elif isinstance(op, PlaceholderOp):
            lines.append(f"t{n} = placeholder {op.shape} {op.dtype}")
        else:
            raise TypeError(f"operation {op.name} of type {type(op).__name__} cannot be part of a task")
    lines.append("outputs " + " ".join(f"t{tensor_ids[id(t.op)]}" for t in outputs))
    return "\n".join(lines)


def _value_ops(e) -> int:
    """Arithmetic operations on the values of one evaluation of ``e`` (not on indices)."""
    if isinstance(e, TensorLoad):
        return 0                              # index arithmetic is address computation
    if isinstance(e, Select):                 # the condition is control; one branch runs
        return max(_value_ops(e.true_value), _value_ops(e.false_value))
    own = 1 if isinstance(e, _ARITHMETIC) else 0
    if isinstance(e, Call):
        return own + sum(_value_ops(a) for a in e.args if isinstance(a, Node))
    return own + sum(_value_ops(getattr(e, f)) for f in field_names(type(e))
                     if isinstance(getattr(e, f), Node))


def estimate_flop(outputs) -> int:
    """Arithmetic operations to compute the DAG under ``outputs`` once, as in a FLOP count.

    Per compute op: the arithmetic nodes of its body (add, sub, mul, div, floordiv, floormod,
    min, max and each math intrinsic count 1; casts, loads, constants and index arithmetic 0;
    an ``if_then_else`` counts its costlier branch), times the number of output elements. A
    reduction counts its source plus 1 (the combine) per point of the reduce domain, so a
    matmul n x m x k counts 2*n*m*k. Ops are counted as written, before any inlining; a DAG
    of pure data movement counts 0.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum, exp
        >>> A = placeholder((4, 8), name="A"); r = reduce_axis((0, 8), name="r")
        >>> B = compute((4,), lambda i: sum(exp(A[i, r]) * 2.0, axis=r), name="B")
        >>> estimate_flop(B)     # 4 rows x 8 points x (exp + mul + add)
        96
    """
    total = 0
    for op in post_order(_as_outputs(outputs)):
        if not isinstance(op, ComputeOp):
            continue
        elements = _fold(mul, op.shape, 1)
        body = op.body
        if isinstance(body, Reduce):
            points = _fold(mul, (a.dom_extent for a in body.axis), 1)
            total += elements * points * (_value_ops(body.source) + 1)
        else:
            total += elements * _value_ops(body)
    return int(total)


def _max_uid(outputs) -> int:
    """The largest variable or operation id in the DAG under ``outputs``."""
    top = 0
    for op in post_order(outputs):
        top = max(top, op.uid)
        if isinstance(op, ComputeOp):
            for v in op.axis + op.reduce_axis:
                top = max(top, v.uid)
            for n in walk(op.body):
                if isinstance(n, Var):
                    top = max(top, n.uid)
    return top


def _restore_task(outputs, name, weight, key, max_uid, target):
    # Variables, buffers and operations carry process-unique ids from a counter. IR unpickled
    # into another process keeps the ids it was made with, so move this process's counter past
    # them first: ids made here later (by scheduling and lowering) never collide with them.
    reserve_uids_through(max_uid)
    task = Task.__new__(Task)
    task._init(outputs, name, weight, key, target)
    return task


class Task:
    """A compute DAG to tune: its template, config space and workload key.

    ``outputs`` is a tensor or a list of tensors (the kernel's outputs, in order); ``name`` is
    for people (default: the names of the compute ops); ``weight`` is how often the workload
    occurs in the model being tuned (an int >= 1); ``target`` is the machine its kernels are
    built for and measured on (default: the host; records are kept under its key). Tasks are
    equal when their keys are.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] + 1.0, name="B")
        >>> X = placeholder((100,), name="X"); Y = compute((100,), lambda k: X[k] + 1.0, name="Y")
        >>> Task(B) == Task(Y, name="other", weight=3)
        True
        >>> Task(B).name, Task(B).template_name, Task(B).flop
        ('B', 'injective', 100)
    """

    def __init__(self, outputs, name: str | None = None, weight: int = 1, target: Target | None = None):
        outputs = _as_outputs(outputs)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"task name must be a string, got {type(name).__name__}")
        if isinstance(weight, bool) or not isinstance(weight, (int, np.integer)):
            raise TypeError(f"task weight must be an int, got {type(weight).__name__}")
        if weight < 1:
            raise ValueError(f"task weight must be >= 1, got {weight}")
        self._init(outputs, name, int(weight), None, target or Target.host())

    def _init(self, outputs, name, weight, key, target):
        self.outputs = list(outputs)
        self.target = target
        self.template = template_for(self.outputs, target)
        self.weight = weight
        if name is None:
            name = "+".join(op.name for op in self.template.dag.ops)
            name = name if len(name) <= 60 else name[:57] + "..."
        self.name = name
        self.key = key if key is not None else hashlib.sha256(
            canonical_text(self.outputs, self.template.name).encode()).hexdigest()
        self.flop = estimate_flop(self.outputs)

    @property
    def template_name(self) -> str:
        """The name of the template (operator class): injective, reduction, complex or opaque.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); Task(compute((4,), lambda i: A[i] - 1.0)).template_name
            'injective'
        """
        return self.template.name

    @property
    def space(self):
        """The template's config space.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); len(Task(compute((4,), lambda i: A[i] - 1.0)).space)
            40
        """
        return self.template.space

    @property
    def args(self) -> list[Tensor]:
        """The kernel's parameters: input placeholders in order of first use, then outputs.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] - 1.0, name="B")
            >>> [t.name for t in Task(B).args]
            ['A', 'B']
        """
        return self.template.args

    @property
    def inputs(self) -> list[Tensor]:
        """The input placeholders, in order of first use.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] - 1.0, name="B")
            >>> [t.name for t in Task(B).inputs]
            ['A']
        """
        return list(self.template.dag.placeholders)

    def with_weight(self, weight: int) -> "Task":
        """The same task with another weight.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 3.0, name="B")
            >>> Task(B).with_weight(5).weight
            5
        """
        return Task(self.outputs, self.name, weight, self.target)

    def describe(self) -> dict:
        """A JSON-able description for the tuning database and logs.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((4,), "float64", name="A"); B = compute((4,), lambda i: A[i] * 3.0, name="B")
            >>> d = Task(B).describe(); d["template"], d["inputs"], d["outputs"]
            ('injective', [{'name': 'A', 'shape': [4], 'dtype': 'float64'}], [{'name': 'B', 'shape': [4], 'dtype': 'float64'}])
        """
        def tensors(ts):
            return [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in ts]
        return {"key": self.key, "name": self.name, "template": self.template_name,
                "inputs": tensors(self.inputs), "outputs": tensors(self.outputs),
                "ops": [op.name for op in self.template.dag.ops], "flop": self.flop,
                "space_size": len(self.space), "weight": self.weight}

    def __eq__(self, other):
        return isinstance(other, Task) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __reduce__(self):
        return _restore_task, (self.outputs, self.name, self.weight, self.key, _max_uid(self.outputs), self.target)

    def __repr__(self):
        return (f"Task({self.name!r}, template={self.template_name}, key={self.key[:12]}, "
                f"weight={self.weight}, {len(self.space)} configs)")


def random_inputs(task: Task, seed: int = 0) -> list[np.ndarray]:
    """Arrays for calling a kernel of ``task``: one per ``task.args``. Inputs are random
    (floats uniform in [-1, 1), ints in [0, 4), bools either), outputs zero; all C-contiguous
    and 64-byte aligned. The same seed gives the same arrays.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((3,), name="A"); B = compute((3,), lambda i: A[i] + 1.0, name="B")
        >>> a, b = random_inputs(Task(B), seed=7)
        >>> bool(((-1 <= a) & (a < 1)).all()), b.tolist()
        (True, [0.0, 0.0, 0.0])
        >>> bool((random_inputs(Task(B), seed=7)[0] == a).all())
        True
    """
    if not isinstance(task, Task):
        raise TypeError(f"random_inputs needs a Task, got {type(task).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    rng = np.random.default_rng(int(seed))
    arrays = []
    for t in task.inputs:
        a = aligned_zeros(t.shape, t.dtype)
        if dt.is_float(t.dtype):
            a[...] = rng.uniform(-1.0, 1.0, t.shape)
        elif t.dtype == "bool":
            a[...] = rng.integers(0, 2, t.shape).astype(bool)
        else:
            a[...] = rng.integers(0, 4, t.shape)
        arrays.append(a)
    arrays.extend(aligned_zeros(t.shape, t.dtype) for t in task.outputs)
    return arrays
