"""tensorir.ops: the op library of compute definitions (algorithms, no schedules), one
function per oneDNN graph op kind or family.

Each function takes tensorir Tensors (placeholders or outputs of other ops) and oneDNN's
attributes as Python values (same names and defaults as oneDNN's graph API), and returns the
output Tensor(s). Shapes are static. Every compute carries a readable ``name`` and a ``tag``
naming its op kind ("conv", "matmul", "softmax", ...), never an operator-class name, so the
schedule templates classify stages by their bodies. Bad attributes raise ValueError naming the
op and the attribute; mismatched dtypes raise TypeError.

Modules: ``elementwise`` (activations, binary arithmetic, Select, BiasAdd, PReLU, TypeCast),
``nn`` (MatMul, norms, softmax, Reduce*), ``attention`` (scaled dot-product attention), ``window`` (Convolution, ConvTranspose, pooling),
``transform`` (reshape, transpose, concat, GenIndex, Dropout, Gather, Slice, Pad, Expand), ``resample`` (Interpolate, Resize),
``quantize`` (Quantize, Dequantize) and ``backward`` (gradient ops).

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> from tilefuse.tensorir import ops
    >>> x = placeholder((7, 13), name="x"); w = placeholder((13, 37), name="w")
    >>> b = placeholder((37,), name="b")
    >>> y = ops.softmax(ops.gelu(ops.matmul(x, w, bias=b)), axis=-1)
    >>> y.shape, y.op.tag
    ((7, 37), 'softmax')
"""
from .attention import scaled_dot_product_attention
from .backward import (abs_backward, batch_norm_backward, bias_add_backward, clamp_backward, elu_backward,
                       gelu_backward, hardsigmoid_backward, hardswish_backward, log_softmax_backward, mish_backward,
                       relu_backward, sigmoid_backward, softmax_backward, softplus_backward, sqrt_backward,
                       tanh_backward)
from .elementwise import (abs, add, bias_add, clamp, divide, elu, equal, erf, exp, gelu, greater, greater_equal,
                          hardsigmoid, hardswish, is_nan, leaky_relu, log, logical_and, logical_not, logical_or,
                          logical_xor, maximum, minimum, mish, multiply, neg, pow, prelu, reciprocal,
                          relu, round, select, sigmoid, softplus, sqrt, square, squared_difference, subtract,
                          tanh, typecast)
from .nn import (REDUCE_KINDS, batch_norm_inference, group_norm, layer_norm, log_softmax, matmul, reduce, rms_norm,
                 softmax)
from .quantize import dequantize, dynamic_dequantize, dynamic_quantize, quantize
from .resample import interpolate, resize
from .transform import concat, dropout, expand, gather, gen_index, identity, pad, reorder, reshape, slice, transpose
from .window import avg_pool, conv, conv_transpose, max_pool, max_pool_indices, pool

__all__ = [
    # elementwise
    "abs", "erf", "exp", "log", "neg", "sqrt", "square", "reciprocal", "relu", "leaky_relu", "elu", "gelu", "sigmoid",
    "tanh", "hardsigmoid", "hardswish", "mish", "softplus", "clamp", "round", "pow",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "squared_difference", "greater_equal",
    "greater", "equal", "logical_and", "logical_or", "logical_xor", "logical_not", "is_nan",
    "select", "bias_add", "prelu", "typecast",
    # nn, attention
    "matmul", "scaled_dot_product_attention", "batch_norm_inference", "layer_norm", "group_norm", "rms_norm", "softmax", "log_softmax", "reduce",
    "REDUCE_KINDS",
    # window
    "conv", "conv_transpose", "pool", "max_pool", "max_pool_indices", "avg_pool",
    # transform
    "reshape", "transpose", "concat", "reorder", "identity", "gen_index", "dropout", "gather", "slice", "pad",
    "expand",
    # resample, quantize
    "interpolate", "resize", "quantize", "dequantize", "dynamic_quantize", "dynamic_dequantize",
    # backward
    "relu_backward", "sigmoid_backward", "tanh_backward", "elu_backward", "gelu_backward", "hardsigmoid_backward",
    "hardswish_backward", "mish_backward", "softplus_backward", "sqrt_backward", "abs_backward", "clamp_backward",
    "softmax_backward", "log_softmax_backward", "bias_add_backward", "batch_norm_backward",
]
