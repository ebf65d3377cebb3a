"""The steps of a compiled graph: one per compiler partition, each a kernel call, the
reference interpreter running the partition's ops, or a view of an input (no kernel, no copy).
A step pickles as what it runs: its kernel as an artifact (``tensorir.runtime.artifact``)."""
from __future__ import annotations

from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.aligned import aligned_empty
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel

from . import reference
from .logical_tensor import PropertyType


class Step:
    """One partition of a compiled graph (``index``: its place in the ``PartitionedGraph``):
    its kernel with the values it reads and writes, or the ops the reference interpreter runs,
    or a view; a partition computing constants fed at run keeps its results between runs.
    ``args``: per kernel argument, (written?, the key of its value: a tensor id, or ("packed",
    step, k) for a packed constant).

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> x = LogicalTensor(0, DataType.f32, (3,)); y = LogicalTensor(1, DataType.f32, (3,))
        >>> (p,) = partition_ir(GraphIR([Op(0, OpKind.Abs, [x], [y])])).partitions
        >>> Step.interpreted(0, p).run({0: np.array([-1.0, 2.0, -3.0], "float32")})[1].tolist()
        [1.0, 2.0, 3.0]
    """

    def __init__(self, index: int, partition, outputs=(), kernel=None, args=None, config=None, view=None):
        self.index, self.kind, self.ops = index, partition.kind, list(partition.ops)
        self.view = view           # (input id, output id, numpy index, shape): the output is a view of the input
        self.input_ids = [t.id for t in partition.input_ports]
        self.outputs = list(outputs)   # of a compiled step: (tensor id, shape, numpy dtype)
        self.output_ids = [t.id for t in partition.output_ports]
        self.constant = all(t.property_type is PropertyType.constant for t in partition.output_ports)
        self.kernel, self.args, self.config = kernel, args, config
        self._kept = None          # (the input arrays, the results) of a constant partition

    @classmethod
    def compiled(cls, index: int, partition, built, config) -> "Step":
        """The step of a partition built into ``built`` (``build.Built``) with ``config``
        (None: the template's default)."""
        ports = {"in": partition.input_ports, "out": partition.output_ports}
        args = [(role == "out", ports[role][k].id) for role, k in built.arg_positions]
        outputs = [(t.id, tuple(shape), t.dtype.numpy) for t, shape in zip(partition.output_ports, built.output_shapes)]
        return cls(index, partition, outputs, built.kernel, args, config)

    @classmethod
    def interpreted(cls, index: int, partition) -> "Step":
        """A step the reference interpreter runs."""
        return cls(index, partition)

    @classmethod
    def viewing(cls, index: int, partition, view) -> "Step":
        """A step whose output is a view of its input (``view``: input id, output id, the numpy
        index of the output in the input, and the output's shape)."""
        return cls(index, partition, view=view)

    def reads(self) -> list:
        """The keys of the values a run of the step reads."""
        if self.kernel is None:
            return list(self.input_ids)
        return [key for written, key in self.args if not written]

    def packed_specs(self) -> list:
        """(shape, dtype) of each array ``prepack`` may make (none but a ``PrepackedKernel``'s)."""
        if not isinstance(self.kernel, PrepackedKernel):
            return []
        return [(tuple(kernel.args[-1].shape), kernel.args[-1].dtype) for kernel, _ in self.kernel.packs]

    def prepack(self, values: dict, empty=aligned_empty) -> dict:
        """Pack the constant weights of a ``PrepackedKernel`` now, when ``values`` holds them
        all, into arrays made by ``empty(shape, dtype)``: the step then calls the main kernel on
        the packed copies (and no longer reads the originals); returns the packed arrays by key
        (empty when there is nothing to pack)."""
        kernel = self.kernel
        if not isinstance(kernel, PrepackedKernel):
            return {}
        positions = kernel.constant_positions
        if any(self.args[i][0] or self.args[i][1] not in values for i in positions):
            return {}
        packed = kernel.pack([values[self.args[i][1]] if i in positions else None for i in range(len(self.args))],
                             empty)
        keys = [("packed", self.index, k) for k in range(len(packed))]
        self.args = [self.args[k] if role == "arg" else (False, keys[k]) for role, k in kernel.main_args]
        self.kernel = kernel.main
        return dict(zip(keys, packed))

    def run(self, values: dict, slices: dict | None = None, arena: dict | None = None) -> dict:
        """The partition's outputs by id; an output with an array in ``slices`` (a slice of a
        concat's output) is written there, else into its planned buffer in ``arena``, else into
        a new array."""
        if self.constant:
            inputs = [values[tid] for tid in self.input_ids]
            if self._kept is not None and all(a is b for a, b in zip(self._kept[0], inputs)):
                return self._kept[1]
        if self.view is not None:
            src, out, index, shape = self.view
            results = {out: values[src][index].reshape(shape)}
        elif self.kernel is None:
            results = {}
            for op in self.ops:
                outs = reference.evaluate(op, [results[t.id] if t.id in results else values[t.id]
                                               for t in op.inputs])
                results.update({t.id: v for t, v in zip(op.outputs, outs)})
        else:
            slices, arena = slices or {}, arena or {}
            results = {tid: slices[tid] if tid in slices else arena[tid] if tid in arena else
                       aligned_empty(shape, dtype) for tid, shape, dtype in self.outputs}
            self.kernel(*[results[key] if written else values[key] for written, key in self.args])
        if self.constant:
            self._kept = (inputs, results)
        return results

    def __getstate__(self) -> dict:
        state = dict(self.__dict__, _kept=None)
        if self.kernel is not None:
            state["kernel"] = artifact.dumps(self.kernel)
        return state

    def __setstate__(self, state: dict) -> None:
        if state["kernel"] is not None:
            state["kernel"] = artifact.loads(state["kernel"], f"the kernel of step {state['index']} ({state['kind']})")[0]
        self.__dict__.update(state)
