"""Math intrinsics emitted inline as LLVM IR, for scalars and vectors alike.

LLVM's own ``llvm.exp.v16f32`` and friends are scalarised into one libm call
per lane, which is far too slow inside a vectorised kernel.  For float32 this
module therefore emits exp (and exp_flush, which gives 0 where exp's result would be
denormal), log, tanh, sigmoid and erf as explicit
code (range reduction + polynomial, integer bit tricks for 2^n, ``fcmp`` +
``select`` for special cases), branch-free except exp's one branch: when
every lane's result is a normal float it skips the special cases.  The same IR works unchanged for a
scalar ``float`` and for any ``<L x float>``.  sqrt, fabs, floor, ceil and pow
use LLVM intrinsics (these lower to single vector instructions, except pow,
which becomes one ``powf`` call per lane).  float64 uses LLVM intrinsics or
libm calls throughout.

Accuracy of the float32 code (measured against float64 references over
dense grids, see tests/tensorir/codegen/test_mathlib.py): exp, log and erf within
1 ulp (denormal inputs to log and denormal results of exp included), tanh
within 1.7 ulp.  sigmoid, which runs in every activation epilogue of a SiLU
network and is written for speed (a degree-5 polynomial, the division as a
reciprocal estimate and a Newton step), is within a relative error of 3.1e-7
(3.9 ulp where sigmoid > 1e-3) wherever its result is a normal float, on
every target, and exactly 0 below log(FLT_MIN) = -87.34, where numpy's
1 / (1 + exp(-x)) is denormal or, below -88.7, 0.  Special values follow
numpy: sigmoid(+-inf) = 1, 0; NaN stays NaN, whatever its bits.

Cost: tanh and erf contain an inline exp of an argument known to be in its
normal range (no branch); tanh and sigmoid divide without a divide
instruction: float32 vectors of whole AVX-512 registers use vrcp14ps and scale
by 2^k with vscalefps when ``emit_intrinsic`` is given such a target
(``avx512.py``), other vectors LLVM's reciprocal estimate and Newton step
(``fdiv arcp ninf``) and one Newton step more; scalars divide.  exp and
sigmoid round x/ln2 with the 1.5 * 2^23 trick (one FMA and a subtraction,
where roundeven took two instructions and a conversion).  Results that are denormal
(exp for x in (-104, -87.3)) hit microcode
assists on Intel CPUs unless FTZ/DAZ is set; tanh, sigmoid and erf clamp their
arguments so they never produce denormal intermediates.

Fast-math flags: the flags passed in are put on every arithmetic instruction
and call emitted, with two exceptions.  ``reassoc`` (also implied by
``fast``) is always dropped, because the algorithms depend on evaluation
order (Cody-Waite reduction, exact mantissa splitting, 2^n applied in two
steps).  For ``rsqrt``, ``arcp`` and ``afn`` are dropped too, so it stays an
exact division instead of the rsqrt14 estimate.  The special-case
comparisons never carry flags, but with ``nnan``/``ninf`` the caller promises
no NaN/inf, and LLVM may then fold that handling away.  The default
``("contract",)`` is safe and lets LLVM fuse multiply-adds into FMAs.

Example:
    >>> import llvmlite.ir as ir
    >>> mod = ir.Module()
    >>> vec = ir.VectorType(ir.FloatType(), 16)
    >>> fn = ir.Function(mod, ir.FunctionType(vec, [vec]), "f")
    >>> b = ir.IRBuilder(fn.append_basic_block())
    >>> _ = b.ret(emit_intrinsic(b, "exp", [fn.args[0]]))
"""
from __future__ import annotations

import llvmlite.ir as ir

from . import avx512

__all__ = ["INTRINSICS", "emit_intrinsic", "float_type_of", "lanes_of"]

#: Names accepted by :func:`emit_intrinsic`, mapped to their argument count.
INTRINSICS: dict[str, int] = {
    "exp": 1, "exp_flush": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1,
    "erf": 1, "abs": 1, "floor": 1, "ceil": 1, "pow": 2,
}

_FAST = ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc")

_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_I32 = ir.IntType(32)


def float_type_of(value_type: ir.Type) -> ir.Type:
    """The floating-point element type of a scalar or vector float type.

    Raises ``TypeError`` for anything but float/double scalars and vectors.

    Example:
        >>> float_type_of(ir.VectorType(ir.FloatType(), 8)) == ir.FloatType()
        True
    """
    elem = value_type.element if isinstance(value_type, ir.VectorType) else value_type
    if not isinstance(elem, (ir.FloatType, ir.DoubleType)):
        raise TypeError(f"expected a float32/float64 scalar or vector type, got {value_type}")
    return elem


def lanes_of(value_type: ir.Type) -> int | None:
    """The number of lanes of a vector type, or ``None`` for a scalar.

    Example:
        >>> lanes_of(ir.VectorType(ir.FloatType(), 8)), lanes_of(ir.FloatType())
        (8, None)
    """
    return value_type.count if isinstance(value_type, ir.VectorType) else None


def _shaped(value_type: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem`` with the same scalar/vector shape as ``value_type``."""
    lanes = lanes_of(value_type)
    return elem if lanes is None else ir.VectorType(elem, lanes)


def _suffix(value_type: ir.Type) -> str:
    """LLVM's overload suffix for a float type: ``f32``, ``v16f32``, ``f64`` ..."""
    base = "f32" if float_type_of(value_type) == _F32 else "f64"
    lanes = lanes_of(value_type)
    return base if lanes is None else f"v{lanes}{base}"


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Declare (or reuse) a function in ``module``."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


class _Emitter:
    """Small arithmetic helper bound to a builder, a value type, fast-math flags and what the
    target offers: AVX-512 instructions for the type (``avx512.fits``), fused multiply-adds."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type, fastmath: tuple[str, ...], avx512: bool = False,
                 fused: bool = False):
        self.b = builder
        self.ty = ty
        self.ity = _shaped(ty, _I32)
        self.fm = tuple(fastmath)
        self.avx512 = avx512
        self.fused = fused        # a * b + c rounds once: the target has FMA and the flags allow contraction

    # constants
    def c(self, value: float) -> ir.Constant:
        lanes = lanes_of(self.ty)
        elem = float_type_of(self.ty)
        return ir.Constant(self.ty, value) if lanes is None else ir.Constant(self.ty, [ir.Constant(elem, value)] * lanes)

    def ic(self, value: int) -> ir.Constant:
        lanes = lanes_of(self.ty)
        return ir.Constant(self.ity, value) if lanes is None else ir.Constant(self.ity, [value] * lanes)

    # float arithmetic (carries the fast-math flags)
    def add(self, a, b):
        return self.b.fadd(a, b, flags=self.fm)

    def sub(self, a, b):
        return self.b.fsub(a, b, flags=self.fm)

    def mul(self, a, b):
        return self.b.fmul(a, b, flags=self.fm)

    def div(self, a, b):
        return self.b.fdiv(a, b, flags=self.fm)

    def mad(self, a, b, c):
        """a * b + c; fused into an FMA when the flags allow contraction."""
        return self.add(self.mul(a, b), c)

    def horner(self, x, coeffs):
        """Horner's rule: coeffs[0] * x^n + ... + coeffs[n]."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.mad(acc, x, self.c(k))
        return acc

    def call(self, intrinsic: str, *args):
        """Call an overloaded LLVM intrinsic, e.g. ``call("llvm.sqrt", x)``."""
        fn = _declare(self.b.module, f"{intrinsic}.{_suffix(self.ty)}", self.ty, [self.ty] * len(args))
        return self.b.call(fn, list(args), fastmath=self.fm)

    # comparisons and selects (no flags: keep the special-case logic intact)
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    # bit manipulation
    def as_int(self, a):
        return self.b.bitcast(a, self.ity)

    def as_float(self, a):
        return self.b.bitcast(a, self.ty)

    def pow2i(self, n):
        """2.0**n for integer n in [-126, 127]: the bits (n + 127) << 23."""
        return self.as_float(self.b.shl(self.b.add(n, self.ic(127)), self.ic(23)))


# ---------------------------------------------------------------------------
# float32 algorithms


EXP_NORMAL = 87.0        # |x| up to this: exp(x) is a normal float32 (one scaling by 2^n suffices)
FLT_MIN = 1.1754943508222875e-38    # the smallest normal float32: exp_flush gives 0 below it
DBL_MIN = 2.2250738585072014e-308   # the smallest normal float64
LOG2E = 1.44269504088896341
LN2 = 0.693147180559945309
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4    # ln2 = LN2_HI + LN2_LO, LN2_HI in 9 bits
ROUND_MAGIC = 12582912.0 + 127      # 1.5 * 2^23 + 127: v + ROUND_MAGIC rounds v to an integer k
SIGMOID_LO = -87.33654022216797     # log(FLT_MIN) rounded up to a float: below, sigmoid(x) is 0, not denormal
SIGMOID_HI = 80.0                   # above, sigmoid(x) is 1.0f; exp(-x) stays a normal float
#: exp(r) on |r| <= ln2/2 as a degree-5 polynomial, minimax in relative error (7.5e-8), highest degree first
EXP_DEGREE5 = (0.008297654800117016, 0.04191538318991661, 0.16667574644088745, 0.49998894333839417,
               0.9999997019767761, 1.0000001192092896)


def _exp_flush_f32(e: _Emitter, x):
    """exp with results below the smallest normal float (x < log(FLT_MIN)) flushed to 0: the
    fast path is exp's, the flush costs only on the branch that handles out-of-range lanes
    (softmax's masked scores: denormal probabilities slow every kernel that reads them)."""
    def full(e, x):
        y = _exp_f32_full(e, x)
        return e.sel(e.lt(y, e.c(FLT_MIN)), e.c(0.0), y)
    return _exp_f32(e, x, full=full)


def _exp_f32(e: _Emitter, x, full=None):
    # Cephes expf: n = round(x / ln2), r = x - n*ln2 with ln2 split in two
    # (Cody-Waite), exp(r) by a degree-6 polynomial on |r| <= ln2/2, then
    # scaling by 2^n built from exponent bits.  When every lane has |x| <= 87
    # (the usual case) the result is a normal float and one scaling is exact;
    # otherwise (overflow, gradual underflow to denormals, inf, NaN) a branch
    # takes the full version, which gives the same result on normal lanes.
    ok = e.b.fcmp_ordered("<=", e.call("llvm.fabs", x), e.c(EXP_NORMAL))   # false for NaN
    lanes = lanes_of(e.ty)
    if lanes is not None:
        fn = _declare(e.b.module, f"llvm.vector.reduce.and.v{lanes}i1", ir.IntType(1), [ok.type])
        ok = e.b.call(fn, [ok])
    function = e.b.block.parent
    fast_bb, full_bb = function.append_basic_block("exp.normal"), function.append_basic_block("exp.full")
    end_bb = function.append_basic_block("exp.end")
    e.b.cbranch(ok, fast_bb, full_bb)
    results = []
    for bb, body in ((fast_bb, _exp_f32_normal), (full_bb, full or _exp_f32_full)):
        e.b.position_at_end(bb)
        value = body(e, x)
        results.append((value, e.b.block))
        e.b.branch(end_bb)
    e.b.position_at_end(end_bb)
    merged = e.b.phi(e.ty)
    for value, block in results:
        merged.add_incoming(value, block)
    return merged


def _round_scaled(e: _Emitter, x, scale: float):
    """(kf, k): k = round(x * scale) as a float and kf = k + ROUND_MAGIC, whose low bits hold
    k + 127, the exponent field of 2^k (``_scale_by_pow2``). Adding 1.5 * 2^23 rounds (its
    ulp is 1) and, fused into the multiply, costs one instruction where roundeven took two and
    a conversion to integer another; valid for |x * scale| < 2^22."""
    kf = e.mad(x, e.c(scale), e.c(ROUND_MAGIC))
    return kf, e.sub(kf, e.c(ROUND_MAGIC))


def _scale_by_pow2(e: _Emitter, p, k, kf):
    """p * 2^k for ``_round_scaled``'s k and kf, k in [-126, 127]: vscalefps on AVX-512, else
    2^k from kf's low bits, k + 127, shifted into the exponent field."""
    if e.avx512:
        return avx512.scalef(e.b, p, k)
    return e.mul(p, e.as_float(e.b.shl(e.as_int(kf), e.ic(23))))


def _exp_f32_reduced(e: _Emitter, x):
    """(exp(r) for the reduced argument r, k as a float, kf) with x = k*ln2 + r, |r| <= ln2/2."""
    kf, k = _round_scaled(e, x, LOG2E)
    r = e.sub(x, e.mul(k, e.c(LN2_HI)))
    r = e.sub(r, e.mul(k, e.c(LN2_LO)))
    z = e.mul(r, r)
    p = e.horner(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                     4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1])
    p = e.add(e.add(e.mul(p, z), r), e.c(1.0))
    return p, k, kf


def _exp_f32_normal(e: _Emitter, x):
    """exp for |x| <= EXP_NORMAL: one scaling by 2^k, k in [-126, 126]."""
    return _scale_by_pow2(e, *_exp_f32_reduced(e, x))


def _exp_f32_full(e: _Emitter, x):
    """exp for any x: 2^n applied as two factors 2^(n>>1) * 2^(n - n>>1) so that overflow
    to inf and gradual underflow to denormals round correctly; NaN stays NaN."""
    hi, lo = 89.0, -104.0                         # exp(89) = inf, exp(-104) = 0 in float32
    xc = e.sel(e.lt(x, e.c(hi)), x, e.c(hi))      # NaN -> hi (fixed up at the end)
    xc = e.sel(e.gt(xc, e.c(lo)), xc, e.c(lo))
    p, k, _ = _exp_f32_reduced(e, xc)             # k in [-150, 128]
    n = e.b.fptosi(k, e.ity)
    n1 = e.b.ashr(n, e.ic(1))
    n2 = e.b.sub(n, n1)
    y = e.mul(e.mul(p, e.pow2i(n1)), e.pow2i(n2))
    return e.sel(e.isnan(x), e.add(x, x), y)


def _log_f32(e: _Emitter, x):
    # Cephes logf: x = m * 2^k with m in [sqrt(1/2), sqrt(2)) taken from the
    # bits, log(1 + f) = f - f^2/2 + f^3 * P(f) with a degree-8 polynomial,
    # plus k*ln2 with ln2 split in two.  Denormal inputs are first scaled by
    # 2^23 so they are as accurate as normal ones.
    tiny = e.lt(x, e.c(1.1754943508222875e-38))   # below FLT_MIN (also 0, negatives)
    xs = e.sel(tiny, e.mul(x, e.c(8388608.0)), x)
    bits = e.as_int(xs)
    k = e.b.sub(e.b.lshr(bits, e.ic(23)), e.ic(126))            # x = m * 2^k, m in [0.5, 1)
    k = e.b.sub(k, e.b.select(tiny, e.ic(23), e.ic(0)))
    m = e.as_float(e.b.or_(e.b.and_(bits, e.ic(0x007FFFFF)), e.ic(0x3F000000)))
    small = e.lt(m, e.c(0.707106781186547524))
    k = e.b.sub(k, e.b.zext(small, e.ity))                      # m < sqrt(1/2): use 2m, k-1
    f = e.add(e.sub(m, e.c(1.0)), e.sel(small, m, e.c(0.0)))  # exact: m-1 or 2m-1
    fk = e.b.sitofp(k, e.ty)
    z = e.mul(f, f)
    p = e.horner(f, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                     -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                     2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
    y = e.mul(e.mul(p, f), z)
    y = e.add(y, e.mul(fk, e.c(LN2_LO)))
    y = e.sub(y, e.mul(z, e.c(0.5)))
    y = e.add(f, y)
    y = e.add(y, e.mul(fk, e.c(LN2_HI)))
    inf = float("inf")
    y = e.sel(e.eq(x, e.c(inf)), e.c(inf), y)
    y = e.sel(e.lt(x, e.c(0.0)), e.c(float("nan")), y)
    y = e.sel(e.eq(x, e.c(0.0)), e.c(-inf), y)
    return e.sel(e.isnan(x), e.add(x, x), y)


def _tanh_f32(e: _Emitter, x):
    # Cephes tanhf: |x| < 0.625 uses the odd polynomial x + x^3 * P(x^2)
    # (accurate near 0); otherwise tanh|x| = (1 - t) / (1 + t) with
    # t = exp(-2|x|) in (0, 0.29], which saturates to 1 without overflow
    # (|x| clamped to 9, where tanh is 1.0f; exp's argument stays in its normal
    # range, so it needs no check); the sign is copied back from x.
    ax = e.call("llvm.fabs", x)
    z = e.mul(x, x)
    p = e.horner(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                     1.33314422036e-1, -3.33332819422e-1])
    small = e.mad(e.mul(p, z), x, x)
    axc = e.sel(e.gt(ax, e.c(9.0)), e.c(9.0), ax)  # tanh(9) = 1.0f; avoids denormal t
    t = _exp_f32_normal(e, e.mul(axc, e.c(-2.0)))
    large = e.call("llvm.copysign", _divide(e, e.sub(e.c(1.0), t), e.add(e.c(1.0), t)), x)
    y = e.sel(e.lt(ax, e.c(0.625)), small, large)
    return e.sel(e.isnan(x), e.add(x, x), y)


def _divide(e: _Emitter, num, den):
    """num / den for vectors without a division: a reciprocal estimate r of den (vrcp14ps on
    AVX-512; else LLVM's, rcpps or the like and a Newton step, which it emits for a division
    that allows a reciprocal) and one Newton step on the quotient, q = n*r + r*(n - d*n*r):
    within about 1 ulp, exact where the quotient is a power of two. The caller guarantees
    that num, den and the quotient are finite. Scalars divide."""
    if lanes_of(e.ty) is None:
        return e.div(num, den)
    if e.avx512:
        r = avx512.rcp14(e.b, den)
    else:
        r = e.b.fdiv(e.c(1.0), den, flags=tuple(dict.fromkeys(e.fm + ("arcp", "ninf"))))
    q = e.mul(num, r)
    return e.mad(r, e.sub(num, e.mul(den, q)), q)


def _sigmoid_f32(e: _Emitter, x):
    # 1 / (1 + exp(-x)), branch-free: x clamped to [SIGMOID_LO, SIGMOID_HI] (a NaN passes both
    # selects, their comparisons being false for it), where exp(-x) = 2^k * exp(-r) is a normal
    # float: k rounded by the magic number, exp(-r) by a degree-5 minimax polynomial in -r,
    # with ln2 in one constant (the FMA keeps k*ln2 exact), then scaled by 2^k; the division
    # without a divide (_divide). Below SIGMOID_LO the result is 0.
    xc = e.sel(e.gt(x, e.c(SIGMOID_HI)), e.c(SIGMOID_HI), x)
    xc = e.sel(e.lt(xc, e.c(SIGMOID_LO)), e.c(SIGMOID_LO), xc)
    kf, k = _round_scaled(e, xc, -LOG2E)          # -x = k*ln2 + r
    if e.fused:     # k*ln2 exact in the FMA: ln2's float error times |k| <= 126 is below 2.4e-7
        minus_r = e.mad(k, e.c(LN2), xc)
    else:           # Cody-Waite: k times ln2's 9 leading bits is exact
        minus_r = e.mad(k, e.c(LN2_LO), e.mad(k, e.c(LN2_HI), xc))
    p = e.horner(minus_r, [c * (-1) ** degree for degree, c in zip(range(5, -1, -1), EXP_DEGREE5)])
    y = _divide(e, e.c(1.0), e.add(e.c(1.0), _scale_by_pow2(e, p, k, kf)))
    return e.sel(e.lt(x, e.c(SIGMOID_LO)), e.c(0.0), y)


def _erf_f32(e: _Emitter, x):
    # N. Juffa's faithfully-rounded erff (FMA-based minimax polynomials):
    # |x| <= 0.927734375: erf(x) = x + x * P(x^2) (odd, accurate near 0);
    # otherwise erf|x| = 1 - exp(Q(|x|)) with sign copied back.  |x| is
    # clamped to 4 where erf is 1.0f; the two halves are merged with select.
    t = e.call("llvm.fabs", x)
    s = e.mul(x, x)
    p = e.horner(s, [-5.96761703e-4, 4.99119423e-3, -2.67681349e-2,
                     1.12819925e-1, -3.76125336e-1, 1.28379166e-1])
    small = e.mad(p, x, x)
    tc = e.sel(e.gt(t, e.c(4.0)), e.c(4.0), t)
    sc = e.mul(tc, tc)
    r = e.mad(e.c(-1.72853470e-5), tc, e.c(3.83197126e-4))
    u = e.mad(e.c(-3.88396438e-3), tc, e.c(2.42546219e-2))
    r = e.mad(r, sc, u)
    for k in (-1.06777877e-1, -6.34846687e-1, -1.28717512e-1):
        r = e.mad(r, tc, e.c(k))
    r = e.sub(e.mul(r, tc), tc)
    large = e.call("llvm.copysign", e.sub(e.c(1.0), _exp_f32_normal(e, r)), x)   # r >= -16.9
    y = e.sel(e.gt(t, e.c(0.927734375)), large, small)
    return e.sel(e.isnan(x), e.add(x, x), y)


_F32_INLINE = {"exp": _exp_f32, "exp_flush": _exp_flush_f32, "log": _log_f32, "tanh": _tanh_f32,
               "sigmoid": _sigmoid_f32, "erf": _erf_f32}

# LLVM intrinsics used directly (both precisions where listed).
_LLVM_COMMON = {"sqrt": "llvm.sqrt", "abs": "llvm.fabs", "floor": "llvm.floor",
                "ceil": "llvm.ceil", "pow": "llvm.pow"}
_LLVM_F64_ONLY = {"exp": "llvm.exp", "log": "llvm.log"}


def _effective_flags(name: str, fastmath: tuple[str, ...]) -> tuple[str, ...]:
    """The caller's flags with ``fast`` expanded and order-breaking ones dropped."""
    flags = [f for flag in fastmath for f in (_FAST if flag == "fast" else (flag,))]
    banned = {"reassoc"} | ({"arcp", "afn"} if name == "rsqrt" else set())
    return tuple(dict.fromkeys(f for f in flags if f not in banned))


def _libm_f64(e: _Emitter, fname: str, x):
    """Call the libm double function ``fname`` per lane (no LLVM intrinsic exists)."""
    fn = _declare(e.b.module, fname, _F64, [_F64])
    lanes = lanes_of(e.ty)
    if lanes is None:
        return e.b.call(fn, [x], fastmath=e.fm)
    out = ir.Constant(e.ty, ir.Undefined)
    for i in range(lanes):
        lane = e.b.call(fn, [e.b.extract_element(x, _I32(i))], fastmath=e.fm)
        out = e.b.insert_element(out, lane, _I32(i))
    return out


def emit_intrinsic(builder: ir.IRBuilder, name: str, args: list[ir.Value],
                   fastmath: tuple[str, ...] = ("contract",), target=None) -> ir.Value:
    """Emit ``name(*args)`` at the builder's position and return the result.

    ``name`` is one of :data:`INTRINSICS` (exp, log, sqrt, rsqrt, tanh,
    sigmoid, erf, abs, floor, ceil, pow).  ``args`` are float32 or float64
    scalars or vectors, all of the same type (broadcast before calling);
    the result has that type.  ``fastmath`` flags go on every float
    instruction and call emitted, except ``reassoc`` (and ``arcp``/``afn``
    for rsqrt); see the module docstring.  ``target`` (a ``Target``, or None
    for code that runs on any x86-64 or other CPU) lets float32 vectors of whole
    AVX-512 registers use vrcp14ps and vscalefps (``avx512.fits``).
    The code is straight-line, except float32 exp and exp_flush: they branch to their
    full version when a lane is outside the normal range, so the builder ends in a new
    basic block.

    Example:
        >>> mod = ir.Module()
        >>> ty = ir.VectorType(ir.FloatType(), 8)
        >>> fn = ir.Function(mod, ir.FunctionType(ty, [ty, ty]), "k")
        >>> b = ir.IRBuilder(fn.append_basic_block())
        >>> y = emit_intrinsic(b, "tanh", [fn.args[0]])
        >>> y = emit_intrinsic(b, "pow", [y, fn.args[1]])
        >>> _ = b.ret(y)
    """
    if name not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {name!r}; expected one of {sorted(INTRINSICS)}")
    if len(args) != INTRINSICS[name]:
        raise ValueError(f"{name} takes {INTRINSICS[name]} argument(s), got {len(args)}")
    ty = args[0].type
    elem = float_type_of(ty)
    if any(a.type != ty for a in args):
        raise TypeError(f"{name}: all arguments must have type {ty}, got {[str(a.type) for a in args]}")
    flags = _effective_flags(name, fastmath)
    fused = "contract" in flags and target is not None and "+fma" in target.features.split(",")
    e = _Emitter(builder, ty, flags, avx512.fits(target, ty), fused)
    x = args[0]

    if name in _LLVM_COMMON:
        return e.call(_LLVM_COMMON[name], *args)
    if name == "rsqrt":                       # exact 1/sqrt, not the rsqrt14 estimate
        return e.div(e.c(1.0), e.call("llvm.sqrt", x))
    if elem == _F32:
        return _F32_INLINE[name](e, x)
    # float64
    if name in _LLVM_F64_ONLY:
        return e.call(_LLVM_F64_ONLY[name], x)
    if name == "sigmoid":
        return e.div(e.c(1.0), e.add(e.c(1.0), e.call("llvm.exp", e.b.fneg(x, flags=e.fm))))
    if name == "exp_flush":
        y = e.call("llvm.exp", x)
        return e.sel(e.lt(y, e.c(DBL_MIN)), e.c(0.0), y)
    return _libm_f64(e, name, x)              # tanh, erf
