"""AVX-512 instructions that LLVM IR has no target-independent form for, on float32 vectors
of whole 512-bit registers (16, 32, 48 ... lanes): each 16-lane slice goes through the
instruction's LLVM intrinsic and the results are joined back into one vector.

* ``rcp14`` (``vrcp14ps``): 1/x to a relative error below 2^-14, one instruction where a
  division takes several and blocks the divider; exact for powers of two.
* ``scalef`` (``vscalefps``): a * 2^floor(b), one instruction where building 2^b from its
  exponent bits takes a shift and a multiply.

``fits(target, value_type)`` says whether a value can use them: the target has AVX-512F
(x86-64) and the value is a float32 vector of whole registers.

Example:
    >>> import llvmlite.ir as ir
    >>> v32 = ir.VectorType(ir.FloatType(), 32)
    >>> fn = ir.Function(ir.Module(), ir.FunctionType(v32, [v32]), "f")
    >>> b = ir.IRBuilder(fn.append_basic_block())
    >>> _ = b.ret(rcp14(b, fn.args[0]))
    >>> str(fn).count("call <16 x float> @\\"llvm.x86.avx512.rcp14.ps.512\\"")
    2
"""
from __future__ import annotations

import llvmlite.ir as ir

__all__ = ["LANES", "fits", "rcp14", "scalef"]

LANES = 16                              # float32 lanes of one register

_F32 = ir.FloatType()
_V16 = ir.VectorType(_F32, LANES)
_MASK = ir.IntType(LANES)
_I32 = ir.IntType(32)
_CURRENT_ROUNDING = 4                   # _MM_FROUND_CUR_DIRECTION: the rounding of MXCSR


def fits(target, value_type: ir.Type) -> bool:
    """Whether code for ``target`` (a ``Target``, or None: then not) may compute values of
    ``value_type`` with these instructions: an x86-64 target with AVX-512F, and a float32
    vector of whole registers.

    Example:
        >>> from tilefuse.tensorir.runtime.target import Target
        >>> avx512 = Target.of("x", "+avx512f")
        >>> fits(avx512, ir.VectorType(ir.FloatType(), 32)), fits(avx512, ir.VectorType(ir.FloatType(), 8))
        (True, False)
        >>> fits(Target.of("y", "+avx2,+fma"), ir.VectorType(ir.FloatType(), 32)), fits(None, _V16)
        (False, False)
    """
    if target is None or not target.triple.startswith("x86_64") or "+avx512f" not in target.features.split(","):
        return False
    return isinstance(value_type, ir.VectorType) and value_type.element == _F32 and value_type.count % LANES == 0


def rcp14(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``vrcp14ps`` of each register of ``x``: 1/x within a relative error of 2^-14.

    Example:
        >>> fn = ir.Function(ir.Module(), ir.FunctionType(_V16, [_V16]), "f")
        >>> b = ir.IRBuilder(fn.append_basic_block())
        >>> rcp14(b, fn.args[0]).type == _V16
        True
    """
    fn = _declare(builder.module, "llvm.x86.avx512.rcp14.ps.512", [_V16, _V16, _MASK])
    return _per_register(builder, [x], lambda a: builder.call(fn, [a, a, ir.Constant(_MASK, -1)]))


def scalef(builder: ir.IRBuilder, a: ir.Value, b: ir.Value) -> ir.Value:
    """``vscalefps`` of each register of ``a`` and ``b``: a * 2^floor(b), overflowing to inf
    and underflowing to 0 as the product would.

    Example:
        >>> fn = ir.Function(ir.Module(), ir.FunctionType(_V16, [_V16, _V16]), "f")
        >>> b = ir.IRBuilder(fn.append_basic_block())
        >>> scalef(b, *fn.args).type == _V16
        True
    """
    fn = _declare(builder.module, "llvm.x86.avx512.mask.scalef.ps.512", [_V16, _V16, _V16, _MASK, _I32])
    return _per_register(builder, [a, b], lambda x, y: builder.call(
        fn, [x, y, x, ir.Constant(_MASK, -1), ir.Constant(_I32, _CURRENT_ROUNDING)]))


def _declare(module: ir.Module, name: str, args: list) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(_V16, args), name=name)


def _per_register(builder: ir.IRBuilder, values: list, op) -> ir.Value:
    """``op`` applied to the 16-lane slices of ``values`` (vectors of one type), the results
    joined in order."""
    lanes = values[0].type.count
    if lanes == LANES:
        return op(*values)
    parts = []
    for start in range(0, lanes, LANES):
        mask = ir.Constant(ir.VectorType(_I32, LANES), list(range(start, start + LANES)))
        parts.append(op(*(builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), mask) for v in values)))
    return _join(builder, parts, lanes)


def _join(builder: ir.IRBuilder, parts: list, lanes: int) -> ir.Value:
    """The vectors ``parts`` (of one type) side by side as one vector of ``lanes``: joined in
    pairs, an undefined vector paired with an odd one out, the excess lanes dropped at the end."""
    while len(parts) > 1:
        if len(parts) % 2:
            parts.append(ir.Constant(parts[0].type, ir.Undefined))
        parts = [builder.shuffle_vector(a, b, _lanes_mask(2 * a.type.count)) for a, b in zip(parts[::2], parts[1::2])]
    joined = parts[0]
    if joined.type.count == lanes:
        return joined
    return builder.shuffle_vector(joined, ir.Constant(joined.type, ir.Undefined), _lanes_mask(lanes))


def _lanes_mask(count: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(_I32, count), list(range(count)))
