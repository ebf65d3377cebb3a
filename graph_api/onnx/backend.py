"""tilefuse as an ONNX backend (``onnx.backend.base.Backend``): import with ``import_onnx``,
compile with ``compile_graph``, run.

The module itself is the backend, as onnx's backend test runner expects::

    import onnx.backend.test
    from tilefuse.graph_api.onnx import backend as onnx_backend
    globals().update(onnx.backend.test.BackendTest(onnx_backend, __name__).test_cases)

``prepare(model)`` imports and compiles the model once; ``rep.run(inputs)`` takes the inputs in
the order of the model's graph inputs (initializers excluded) and returns the outputs in the
order of its graph outputs. A graph input that fixes a shape (Reshape's shape, Pad's pads, ...)
makes the model specialize: it is imported and compiled at ``run`` for each distinct value of
such inputs (kept, so a repeated value runs at once).

Example:
    >>> import numpy as np
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    >>> prepare(model).run([np.array([[-1, 2, -3], [4, -5, 6]], np.float32)])[0].tolist()
    [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
"""
from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from ..compiler import compile_graph
from ..logical_tensor import GraphError
from .builder import OnnxInputValueNeeded
from .importer import import_onnx

__all__ = ["TilefuseBackend", "TilefuseRep", "prepare", "run_model", "run_node", "supports_device", "is_compatible"]


class TilefuseRep(BackendRep):
    """A prepared model: ``run(inputs)`` with the inputs in graph-input order (or a dict by
    name) returns the outputs (a named tuple, in graph-output order).

    Example:
        >>> from onnx import TensorProto, helper
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        >>> shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        >>> reshape = helper.make_node("Reshape", ["x", "shape"], ["y"])
        >>> rep = TilefuseRep(helper.make_model(helper.make_graph([reshape], "g", [x, shape], [y])))
        >>> rep.input_names, rep.specialized       # compiled at run, for each value of shape
        (['x', 'shape'], ['shape'])
        >>> rep.run([np.arange(6, dtype=np.float32).reshape(2, 3), np.array([3, 2])])[0].shape
        (3, 2)
        >>> rep.run([np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 6])])[0].shape
        (1, 6)
    """

    def __init__(self, model, **import_kwargs):
        import onnx
        self.model = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
        g = self.model.graph
        initializers = {t.name for t in g.initializer}
        self.input_names = [vi.name for vi in g.input if vi.name not in initializers]
        self.output_names = [vi.name for vi in g.output]
        self.import_kwargs = import_kwargs
        self.specialized: list[str] = []          # inputs whose values the model is compiled for
        self._built: dict = {}                    # their values -> (OnnxImport, CompiledGraph)
        try:
            self._build({})
        except OnnxInputValueNeeded as e:         # compiled at run time, once the value is known
            self.specialized.append(e.input_name)

    def _key(self, values: dict):
        return tuple((n, values[n].dtype.str, values[n].shape, values[n].tobytes()) for n in self.specialized)

    def _build(self, values: dict):
        while True:
            try:
                imp = import_onnx(self.model, constant_inputs={n: values[n] for n in self.specialized},
                                  **self.import_kwargs)
                break
            except OnnxInputValueNeeded as e:
                if e.input_name in self.specialized or e.input_name not in values:
                    raise
                self.specialized.append(e.input_name)
        entry = (imp, compile_graph(imp.graph))
        self._built[self._key(values)] = entry
        return entry

    def run(self, inputs, **kwargs):
        """The model's outputs for ``inputs`` (a list in graph-input order, or a dict by name).

        Example:
            >>> from onnx import TensorProto, helper
            >>> a, b = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "ab")
            >>> total = helper.make_tensor_value_info("sum", TensorProto.FLOAT, None)
            >>> add = helper.make_node("Add", ["a", "b"], ["sum"])
            >>> rep = TilefuseRep(helper.make_model(helper.make_graph([add], "g", [a, b], [total])))
            >>> rep.run({"b": np.ones(3, np.float32), "a": np.arange(3, dtype=np.float32)})
            Outputs(sum=array([1., 2., 3.], dtype=float32))
        """
        if isinstance(inputs, dict):
            values = {n: np.asarray(v) for n, v in inputs.items()}
        else:
            inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(inputs) != len(self.input_names):
                raise GraphError(f"the model takes {len(self.input_names)} inputs {self.input_names}, got "
                                 f"{len(inputs)}")
            values = {n: np.asarray(v) for n, v in zip(self.input_names, inputs)}
        missing = [n for n in self.input_names if n not in values]
        if missing:
            raise GraphError(f"no value for the model inputs {missing}")
        entry = self._built.get(self._key(values)) or self._build(values)
        imp, compiled = entry
        feeds = {tid: values[name] for name, tid in imp.inputs if tid is not None}
        results = compiled.run(feeds)
        outs = [imp.constant_outputs[name] if tid is None else results[tid] for name, tid in imp.outputs]
        return namedtupledict("Outputs", self.output_names)(*outs)


class TilefuseBackend(Backend):
    """The ONNX backend: CPU only.

    Example:
        >>> TilefuseBackend.supports_device("CPU"), TilefuseBackend.supports_device("CUDA")
        (True, False)
    """

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> TilefuseRep:
        """Import (which runs onnx's checker: what it finds is a GraphError) and compile the
        model. Keyword arguments other than onnx's test tolerances go to ``import_onnx``
        (``input_shapes``).

        Example:
            >>> from onnx import TensorProto
            >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])    # a symbolic dim
            >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
            >>> model = helper.make_model(helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "g", [x], [y]))
            >>> rep = TilefuseBackend.prepare(model, input_shapes={"x": (2, 4)})
            >>> rep.run([np.zeros((2, 4), np.float32)]).y.tolist()
            [[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]
        """
        if not cls.supports_device(device):
            raise GraphError(f"device {device!r} is not supported; tilefuse runs on the CPU")
        kwargs = {k: v for k, v in kwargs.items() if k in ("input_shapes",)}
        return TilefuseRep(model, **kwargs)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        """Prepare and run once.

        Example:
            >>> from onnx import TensorProto
            >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
            >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
            >>> model = helper.make_model(helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [x], [y]))
            >>> TilefuseBackend.run_model(model, [np.array([-1.0, 2.0, -3.0], np.float32)])
            Outputs(y=array([1., 2., 3.], dtype=float32))
        """
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one ONNX node on ``inputs`` (arrays for its present inputs, in order).
        ``outputs_info`` gives each output's (numpy dtype, shape) when known; ``opset_version``
        the opset (default: onnx's newest).

        Example:
            >>> import numpy as np
            >>> node = helper.make_node("Neg", ["x"], ["y"])
            >>> TilefuseBackend.run_node(node, [np.array([1.0, -2.0], np.float32)])[0].tolist()
            [-1.0, 2.0]
        """
        super().run_node(node, inputs, device, outputs_info, **kwargs)
        names = [n for n in node.input if n]
        in_vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                                np.shape(v)) for n, v in zip(names, inputs)]
        outs = [n for n in node.output if n]
        infos = list(outputs_info or [])
        out_vis = []
        for k, n in enumerate(outs):
            if k < len(infos):
                dtype, shape = infos[k]
                out_vis.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                             shape))
            else:
                out_vis.append(helper.make_empty_tensor_value_info(n))
        opsets = [helper.make_opsetid(node.domain or "", kwargs["opset_version"])] if "opset_version" in kwargs \
            else None
        graph = helper.make_graph([node], "run_node", in_vis, out_vis)
        model = helper.make_model(graph, opset_imports=opsets) if opsets else helper.make_model(graph)
        if len(infos) < len(outs):          # output types from onnx's shape inference
            import onnx
            model = onnx.shape_inference.infer_shapes(model)
        return cls.run_model(model, list(inputs), device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """True for the CPU only.

        Example:
            >>> TilefuseBackend.supports_device("CPU")
            True
        """
        try:
            return Device(device).type == DeviceType.CPU
        except AttributeError:
            return False


prepare = TilefuseBackend.prepare
run_model = TilefuseBackend.run_model
run_node = TilefuseBackend.run_node
supports_device = TilefuseBackend.supports_device
is_compatible = TilefuseBackend.is_compatible
