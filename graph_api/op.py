"""Ops: a kind from oneDNN's graph op set, input and output logical tensors, attributes."""
from __future__ import annotations

import enum

from .logical_tensor import GraphError, LogicalTensor


class OpKind(enum.Enum):
    """oneDNN graph op kinds (the value is oneDNN's spelling), plus a few kinds of our own that
    the ONNX front end (``graph_api.onnx``) needs and oneDNN's op set lacks:

    * ``Cast``: element type conversion to the data type ``to`` (its output's) from any other
      (numpy ``astype``; float to integer truncates); oneDNN's TypeCast converts only between
      f32, bf16 and f16.
    * ``Equal``, ``Greater``: element-wise ``a == b`` and ``a > b`` as bool, numpy broadcasting
      (oneDNN has GreaterEqual only; ONNX's Less and LessOrEqual swap the operands).
    * ``Erf``, ``Neg``: the error function and negation, element-wise.
    * ``IsNaN``: element-wise ``x != x`` of a float tensor, as bool.
    * ``LogicalAnd``, ``LogicalOr``, ``LogicalXor``, ``LogicalNot``: element-wise logic on bool
      tensors (numpy broadcasting), as attention masks are built.
    * ``Expand``: numpy broadcasting of ``src`` with the attribute ``shape`` (ONNX Expand).
    * ``Gather``: ``numpy.take(src, indices, axis)`` with negative indices counted from the end.
    * ``Identity``: a copy.
    * ``MaxPoolIndices``: where each maximum of a MaxPool (``src``, its ``dst``) lies in
      ``src`` flattened, as int64 (ONNX MaxPool's Indices output, with ``storage_order``).
    * ``Pad``: pad (or crop, with negative amounts) by ``pads_begin``/``pads_end`` in ``mode``
      constant (with ``value``), reflect, edge or wrap.
    * ``Resize``: ONNX's resampling of any axes to ``sizes``, nearest or linear, with its
      coordinate transformations and nearest rounding modes (oneDNN's Interpolate has two).
    * ``ScaledDotProductAttention``: ``softmax(query @ K^T * scale + mask) @ value`` over the
      last axis, its operands read and its output written through axis orders (a model's
      heads where they lie; ``graph_api.passes.fuse_attention`` makes it of the ops that
      spell it out, ``fold_transposes_into_attention`` folds the transposes around it).
    * ``Slice``: ``src[start:end:step]`` along ``axes`` (Python/ONNX clamping rules).

    Each has a schema, a shape rule, a reference implementation and a compute definition.
    """
    Abs = "Abs"
    AbsBackward = "AbsBackward"
    Add = "Add"
    AvgPool = "AvgPool"
    AvgPoolBackward = "AvgPoolBackward"
    BatchNormForwardTraining = "BatchNormForwardTraining"
    BatchNormInference = "BatchNormInference"
    BatchNormTrainingBackward = "BatchNormTrainingBackward"
    BiasAdd = "BiasAdd"
    BiasAddBackprop = "BiasAddBackprop"
    BiasAddBackward = "BiasAddBackward"
    Cast = "Cast"
    Clamp = "Clamp"
    ClampBackward = "ClampBackward"
    Concat = "Concat"
    Convolution = "Convolution"
    ConvolutionBackwardData = "ConvolutionBackwardData"
    ConvolutionBackwardWeights = "ConvolutionBackwardWeights"
    ConvTranspose = "ConvTranspose"
    ConvTransposeBackwardData = "ConvTransposeBackwardData"
    ConvTransposeBackwardWeights = "ConvTransposeBackwardWeights"
    Dequantize = "Dequantize"
    Divide = "Divide"
    Dropout = "Dropout"
    DynamicDequantize = "DynamicDequantize"
    DynamicQuantize = "DynamicQuantize"
    Elu = "Elu"
    EluBackward = "EluBackward"
    End = "End"
    Equal = "Equal"
    Erf = "Erf"
    Exp = "Exp"
    Expand = "Expand"
    Gather = "Gather"
    GELU = "GELU"
    GELUBackward = "GELUBackward"
    GenIndex = "GenIndex"
    Greater = "Greater"
    GreaterEqual = "GreaterEqual"
    GroupNorm = "GroupNorm"
    HardSigmoid = "HardSigmoid"
    HardSigmoidBackward = "HardSigmoidBackward"
    HardSwish = "HardSwish"
    HardSwishBackward = "HardSwishBackward"
    Identity = "Identity"
    Interpolate = "Interpolate"
    InterpolateBackward = "InterpolateBackward"
    IsNaN = "IsNaN"
    LayerNorm = "LayerNorm"
    LayerNormBackward = "LayerNormBackward"
    LeakyReLU = "LeakyReLU"
    Log = "Log"
    LogSoftmax = "LogSoftmax"
    LogSoftmaxBackward = "LogSoftmaxBackward"
    LogicalAnd = "LogicalAnd"
    LogicalNot = "LogicalNot"
    LogicalOr = "LogicalOr"
    LogicalXor = "LogicalXor"
    MatMul = "MatMul"
    Maximum = "Maximum"
    MaxPool = "MaxPool"
    MaxPoolBackward = "MaxPoolBackward"
    MaxPoolIndices = "MaxPoolIndices"
    Minimum = "Minimum"
    Mish = "Mish"
    MishBackward = "MishBackward"
    Multiply = "Multiply"
    Neg = "Neg"
    Pad = "Pad"
    Pow = "Pow"
    PReLU = "PReLU"
    PReLUBackward = "PReLUBackward"
    Quantize = "Quantize"
    Reciprocal = "Reciprocal"
    ReduceL1 = "ReduceL1"
    ReduceL2 = "ReduceL2"
    ReduceMax = "ReduceMax"
    ReduceMean = "ReduceMean"
    ReduceMin = "ReduceMin"
    ReduceProd = "ReduceProd"
    ReduceSum = "ReduceSum"
    ReLU = "ReLU"
    ReLUBackward = "ReLUBackward"
    Resize = "Resize"
    Reorder = "Reorder"
    RMSNorm = "RMSNorm"
    Round = "Round"
    ScaledDotProductAttention = "ScaledDotProductAttention"
    Select = "Select"
    Sigmoid = "Sigmoid"
    SigmoidBackward = "SigmoidBackward"
    Slice = "Slice"
    SoftMax = "SoftMax"
    SoftMaxBackward = "SoftMaxBackward"
    SoftPlus = "SoftPlus"
    SoftPlusBackward = "SoftPlusBackward"
    Sqrt = "Sqrt"
    SqrtBackward = "SqrtBackward"
    Square = "Square"
    SquaredDifference = "SquaredDifference"
    StaticReshape = "StaticReshape"
    StaticTranspose = "StaticTranspose"
    Subtract = "Subtract"
    Tanh = "Tanh"
    TanhBackward = "TanhBackward"
    TypeCast = "TypeCast"
    Wildcard = "Wildcard"

    @staticmethod
    def parse(name) -> "OpKind":
        """The kind named ``name``; GraphError for an unknown kind.

        Example:
            >>> OpKind.parse("MatMul")
            <OpKind.MatMul: 'MatMul'>
        """
        if isinstance(name, OpKind):
            return name
        try:
            return OpKind(name)
        except ValueError:
            raise GraphError(f"unknown op kind {name!r}") from None


class Op:
    """One op of a graph. ``attrs`` maps oneDNN attribute names to Python values (ints, floats,
    strings, bools, lists of ints or floats). ``covers``: the names of the ops of the user's
    graph it stands for (an imported ONNX node's name; a pass that folds ops into one lists them
    all), by default its own ``name``.

    Example:
        >>> from tilefuse.graph_api.logical_tensor import DataType
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> op = Op(0, OpKind.ReLU, [x], [y], name="relu")
        >>> op.kind, [t.id for t in op.inputs], op.covers
        (<OpKind.ReLU: 'ReLU'>, [0], ('relu',))
    """

    def __init__(self, id: int, kind, inputs=(), outputs=(), attrs: dict | None = None, name: str | None = None,
                 covers=None):
        if isinstance(id, bool) or not isinstance(id, int) or id < 0:
            raise GraphError(f"op id must be a non-negative int, got {id!r}")
        self.id = id
        self.kind = OpKind.parse(kind)
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        for t in self.inputs + self.outputs:
            if not isinstance(t, LogicalTensor):
                raise GraphError(f"op {id} ({self.kind.value}): inputs and outputs must be LogicalTensors, "
                                 f"got {type(t).__name__}")
        self.attrs = dict(attrs or {})
        self.name = name if name is not None else f"{self.kind.value}_{id}"
        self._covers = tuple(dict.fromkeys(covers)) if covers else None

    @property
    def covers(self) -> tuple:
        """The names of the user's ops this op stands for (see the class docstring)."""
        return getattr(self, "_covers", None) or (self.name,)      # ops pickled before it had one: its name

    def add_input(self, t: LogicalTensor) -> None:
        self.inputs.append(t)

    def add_output(self, t: LogicalTensor) -> None:
        self.outputs.append(t)

    def set_attr(self, name: str, value) -> None:
        self.attrs[name] = value

    def get_attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def __repr__(self):
        return (f"Op({self.id}, {self.kind.value}, in={[t.id for t in self.inputs]}, "
                f"out={[t.id for t in self.outputs]})")
