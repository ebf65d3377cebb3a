"""The steps after the build, in order (``AFTER_BUILD``), each a function from the ``Program``
a compiled graph will run to the program updated:

1. ``concat in place``: a Concat whose inputs are all written by compiled partitions, along an
   axis with only unit dims before it (channels of a batch-1 tensor), costs nothing: its
   output is allocated first and each producer's kernel writes straight into its slice, a
   contiguous block; a concat that is itself an input of such a concat (DenseNet's growing
   feature maps) is that slice;
2. ``settle constants``: the steps that compute only from bound constants run now and their
   results become constants; each prepacked kernel packs its bound weights now; of the
   constants, only those a step left or a graph output reads are kept (each original is
   dropped as soon as it is packed or used, so weights are held about once);
3. ``memory plan``: the intermediate tensors of the steps left get blocks of a memory plan
   (``memory_plan.plan_memory``), an in-place concat's slices and a view's output within
   their whole's block, an output its kernel may compute over an input in that input's block.

Unlike the graph passes these update the program as they go (packing frees each original
weight before the next is packed), so a program is run through them once.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
    >>> from tilefuse.graph_api.ir import GraphIR
    >>> from tilefuse.graph_api.ir_partition import partition_ir
    >>> from tilefuse.graph_api.steps import Step
    >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
    >>> (p,) = partition_ir(GraphIR([Op(0, OpKind.Abs, [x], [y])])).partitions
    >>> program = run_after_build(Program([Step.interpreted(0, p)], {}, [1]))
    >>> len(program.run_steps), program.memory.nbytes
    (1, 0)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tilefuse.tensorir.runtime.abi import PARAM_ALIGN
from tilefuse.tensorir.runtime.aligned import on_cache_line
from tilefuse.tensorir.runtime.spare_memory import SpareMemory

from .memory_plan import MemoryPlan, plan_memory
from .op import OpKind


@dataclass
class Program:
    """What a compiled graph runs: ``steps``, one per compiler partition in order; ``bound``,
    the constant values by tensor id (consumed by ``settle constants``, which leaves only those
    the steps read); ``output_ids``, the graph's outputs. The steps after the build fill in
    ``in_place`` ((step, ``InPlaceConcat``) pairs), ``run_steps`` (the steps a run takes) and
    ``memory`` (the plan of their intermediate tensors). ``constant_ids``: every constant's id
    (bound values may not be fed). ``runs_here``: whether its kernels can run on this host
    (compiled for another target they cannot: nothing runs, or packs, before the first run
    where they can)."""
    steps: list
    bound: dict
    output_ids: list
    runs_here: bool = True
    in_place: list = field(default_factory=list)
    run_steps: list | None = None
    memory: MemoryPlan | None = None
    constant_ids: frozenset = frozenset()

    def __post_init__(self):
        self.constant_ids = frozenset(self.bound) | self.constant_ids


def concat_in_place(program: Program) -> Program:
    """Find the concats the producers of whose inputs write them (step 1)."""
    program.in_place = _in_place_concats(program.steps, set(program.output_ids))
    return program


def settle_constants(program: Program) -> Program:
    """Run the steps of constants, pack weights, keep only the constants read (step 2; for a
    program that cannot run here, every step is left to run and every constant kept)."""
    elided = {id(step) for step, _ in program.in_place}
    steps = [s for s in program.steps if id(s) not in elided]
    if program.runs_here:
        program.run_steps, program.bound = _settled(steps, program.bound, program.output_ids)
    else:
        program.run_steps, program.bound = steps, {key: on_cache_line(v) for key, v in program.bound.items()}
    return program


def plan_memory_of(program: Program) -> Program:
    """Plan the intermediate tensors of the steps a run takes (step 3)."""
    program.memory = _memory_plan(program.run_steps, program.in_place, set(program.output_ids))
    return program


AFTER_BUILD = (("concat in place", concat_in_place), ("settle constants", settle_constants),
               ("memory plan", plan_memory_of))
"""The steps after the build, in order: (name, function(program) -> program)."""


def run_after_build(program: Program) -> Program:
    """``program`` through every step of ``AFTER_BUILD`` (see the module's example)."""
    for _, step in AFTER_BUILD:
        program = step(program)
    return program


def _memory_plan(steps: list, in_place: list, outputs: set) -> MemoryPlan:
    """The memory plan of the steps a run takes: what compiled steps write (not constants kept
    between runs), each in-place concat as one tensor its slices are views of, an output its
    kernel may compute over an input in that input's block when it is the input's last reader."""
    views = {tid: plan.output for _, plan in in_place for tid, _ in plan.slices}
    views.update({step.view[1]: step.view[0] for step in steps if step.view is not None})
    wholes = {plan.output: (plan.shape, plan.dtype) for _, plan in in_place}
    order = [(step.input_ids, step.outputs if step.kernel is not None and not step.constant else [])
             for step in steps]
    over = {}               # the inputs a step's kernel may compute an output over
    for k, step in enumerate(steps):
        pairs = step.kernel.in_place if step.kernel is not None and not step.constant else ()
        for w, i in pairs:
            key = step.args[i][1]       # ... when every argument that tensor is passed as may be shared
            if all((w, j) in pairs for j, (written, other) in enumerate(step.args) if other == key and not written):
                over.setdefault((k, step.args[w][1]), []).append(key)
    return plan_memory(order, views, outputs, wholes, over)



def _settled(steps: list, bound: dict, outputs) -> tuple[list, dict]:
    """(the steps left to run, the constants they read): the steps that compute only from
    bound constants run now and their results become constants; each prepacked kernel packs
    its bound weights now; of the constants, only those a step left or a graph output reads
    are kept. ``bound`` is emptied as it goes: a constant no later step reads leaves it as
    soon as it is packed or used, so where nothing else holds it, it is freed before the next
    weight is packed, or its memory holds a later packed weight of its size (``SpareMemory``:
    no pages to fault in)."""
    last_reader = {}
    for k, step in enumerate(steps):
        for key in step.input_ids:
            last_reader[key] = k
    keep = set(outputs)
    values, left = bound, []
    spare = SpareMemory(spec for step in steps for spec in step.packed_specs())
    for k, step in enumerate(steps):
        if step.constant and all(tid in values for tid in step.input_ids):
            values.update(step.run(values))
        else:
            values.update(step.prepack(values, spare.empty))
            left.append(step)
            keep.update(step.reads())
        for key in step.input_ids:
            if last_reader[key] == k and key not in keep:
                spare.give(values.pop(key, None))     # its memory serves a later pack of its size
    return left, {key: on_cache_line(value) for key, value in values.items() if key in keep}



class InPlaceConcat:
    """A concat computed by its producers: its output's id, shape and dtype, and for each input
    the index of its slice."""

    def __init__(self, output, shape, dtype, slices):
        self.output, self.shape, self.dtype, self.slices = output, shape, dtype, slices


def _in_place_concats(steps: list, graph_outputs: set) -> list:
    """(step, plan) for each step that is a lone Concat whose slices its producers can write:
    every input is a distinct tensor written by a compiled, non-constant partition and is no
    graph output, and each slice is a contiguous, aligned block (unit dims before the axis)."""
    producer = {}
    for step in steps:
        for tid in step.output_ids:
            producer[tid] = step
    found, claimed = [], set()
    for step in steps:
        ops = step.ops
        if len(ops) != 1 or ops[0].kind is not OpKind.Concat or step.constant:
            continue
        op, out = ops[0], ops[0].outputs[0]
        if not out.is_known() or any(not t.is_known() for t in op.inputs):
            continue
        axis = op.attrs["axis"] % len(out.shape)
        ids = [t.id for t in op.inputs]
        dtype = out.dtype.numpy
        inner = int(np.prod(out.shape[axis + 1:], dtype=np.int64)) * dtype.itemsize
        if any(n != 1 for n in out.shape[:axis]) or len(set(ids)) != len(ids) or claimed & set(ids):
            continue
        if any(tid in graph_outputs or tid not in producer or producer[tid].kernel is None
               or producer[tid].constant for tid in ids):
            continue
        slices, start = [], 0
        for t in op.inputs:
            if (start * inner) % PARAM_ALIGN:
                break
            slices.append((t.id, (slice(None),) * axis + (slice(start, start + t.shape[axis]),)))
            start += t.shape[axis]
        else:
            claimed.update(ids)
            found.append((step, InPlaceConcat(out.id, out.shape, dtype, slices)))
    return found
