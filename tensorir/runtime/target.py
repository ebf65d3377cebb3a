"""The machine code is generated for: ``Target`` (triple, CPU name, enabled features, vector
width), the host as a Target, and the LLVM target machines made from it.

A tuning record is only meaningful on the CPU it was measured on, so records are keyed by
``Target.key``: a short stable hash of the CPU name and the *enabled* features, sorted, so two
machines with the same CPU and features get the same key whatever order LLVM lists them in.
Schedule templates take their vector lanes from ``Target.lanes``.

Example:
    >>> t = Target.of("znver4", "+avx2,+avx512f,+fma")
    >>> t.vector_bits, t.lanes("float32"), t.lanes("float64")
    (512, 16, 8)
    >>> Target.of("haswell", "+avx2,+fma").lanes("float32")
    8
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from ..dtype import itemsize

KEY_LENGTH = 16  # hex digits of sha256 kept in Target.key
_VECTOR_BITS = (("avx512f", 512), ("avx", 256), ("sse", 128), ("neon", 128), ("sve", 128), ("altivec", 128))


def normalize_features(features: str) -> str:
    """The enabled features of an LLVM feature string, sorted and de-duplicated, as "+a,+b".

    Disabled ("-x") features are dropped: the set of enabled features says everything.

    Example:
        >>> normalize_features("+sse2,-avx512f,+avx2,+sse2")
        '+avx2,+sse2'
        >>> normalize_features("")
        ''
    """
    if not isinstance(features, str):
        raise TypeError(f"LLVM features must be a str like '+avx2,+fma', got {type(features).__name__}")
    enabled = set()
    for item in features.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            continue
        name = item[1:] if item.startswith("+") else item
        if not name:
            raise ValueError(f"bad LLVM feature {item!r} in {features!r}")
        enabled.add(name)
    return ",".join("+" + name for name in sorted(enabled))


def disabled_features(features: str) -> str:
    """The features an LLVM feature string turns off, sorted, as "-a,-b": a CPU name implies
    features that a virtual machine's host may lack, and code must not use them.

    Example:
        >>> disabled_features("+avx2,-avx512f,-amx-tile")
        '-amx-tile,-avx512f'
    """
    off = {item.strip()[1:] for item in features.split(",") if item.strip().startswith("-")}
    return ",".join("-" + name for name in sorted(off - {""}))


def target_key(cpu: str, features: str) -> str:
    """The short stable key of a CPU and its (normalised) feature string.

    Example:
        >>> target_key("skylake", "+avx2,+fma") == target_key("skylake", "+fma,-avx512f,+avx2")
        True
        >>> len(target_key("skylake", "+avx2"))
        16
    """
    text = f"{cpu}|{normalize_features(features)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


@functools.lru_cache(maxsize=None)
def initialize_llvm() -> None:
    """Initialise LLVM's native target, asm printer and asm parser once.

    Example:
        >>> initialize_llvm()  # safe to call any number of times
    """
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.lru_cache(maxsize=None)
def _process_triple() -> str:
    initialize_llvm()
    return llvm.get_process_triple()


@dataclass(frozen=True, slots=True)
class Target:
    """A CPU name and its enabled LLVM features (normalised), with their stable ``key``, the
    target triple (the process's by default) and the features explicitly turned off, which
    code generation honours. Build one with ``Target.of`` or ``Target.host()``; the
    constructor checks that the fields agree.

    Example:
        >>> t = Target.of("znver3", "-avx512f,+fma,+avx2")
        >>> t.features, t.key == target_key("znver3", "+avx2,+fma"), t.vector_bits
        ('+avx2,+fma', True, 256)
    """
    cpu: str
    features: str
    key: str
    triple: str = field(default_factory=_process_triple)
    disabled: str = ""

    def __post_init__(self):
        if not isinstance(self.cpu, str) or not self.cpu:
            raise ValueError(f"target cpu must be a non-empty str, got {self.cpu!r}")
        if normalize_features(self.features) != self.features:
            raise ValueError(f"target features {self.features!r} are not normalised; use Target.of")
        if self.key != target_key(self.cpu, self.features):
            raise ValueError(f"target key {self.key!r} does not match cpu {self.cpu!r} and its features")
        if disabled_features(self.disabled) != self.disabled:
            raise ValueError(f"target's disabled features {self.disabled!r} are not normalised; use Target.of")

    @classmethod
    def of(cls, cpu: str, features: str, triple: str | None = None) -> "Target":
        """The target of a CPU name and any LLVM feature string (and triple: default the
        process's).

        Example:
            >>> Target.of("generic", "").features
            ''
        """
        normalized = normalize_features(features)
        return cls(cpu, normalized, target_key(cpu, normalized), triple or _process_triple(),
                   disabled_features(features))

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def host() -> "Target":
        """The host CPU with all its features (asks LLVM once per process).

        Example:
            >>> t = Target.host()
            >>> t.key == Target.of(t.cpu, t.features).key and t.triple == llvm.get_process_triple()
            True
        """
        initialize_llvm()
        return Target.of(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())

    @property
    def vector_bits(self) -> int:
        """The width of the widest vector registers the features enable (128 when none is
        known).

        Example:
            >>> Target.of("x", "+sse2").vector_bits, Target.of("y", "+neon").vector_bits
            (128, 128)
        """
        enabled = {f[1:] for f in self.features.split(",") if f}
        for prefix, bits in _VECTOR_BITS:
            if any(f.startswith(prefix) for f in enabled):
                return bits
        return 128

    @property
    def vector_registers(self) -> int:
        """How many vector registers code can keep values in: 32 with AVX-512 (and on AArch64),
        16 otherwise on x86-64. Register tiles (the complex template's accumulators) are sized
        by it.

        Example:
            >>> Target.of("x", "+avx2,+fma").vector_registers, Target.of("y", "+avx512f").vector_registers
            (16, 32)
        """
        return 32 if self.vector_bits >= 512 or self.triple.startswith(("aarch64", "arm64")) else 16

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector: a full register of 16-, 32- and 64-bit
        elements; 8-bit elements (int8, uint8, bool) as many as 16-bit ones, since their
        values meet wider arithmetic and masks in the same loops.

        Example:
            >>> Target.of("x", "+avx2").lanes("float32"), Target.of("x", "+avx2").lanes("int8")
            (8, 16)
        """
        return max(1, self.vector_bits // (8 * max(2, itemsize(dtype))))

    def target_machine(self) -> llvm.TargetMachine:
        """A new LLVM target machine for this target, at optimisation level 3.

        Hand a new one to each MCJIT engine: the engine takes ownership of its target machine
        and frees it with itself, so a shared one (``host_target_machine()``) must never go
        there.

        Example:
            >>> Target.host().target_machine().triple == llvm.get_process_triple()
            True
        """
        initialize_llvm()
        features = ",".join(f for f in (self.features, self.disabled) if f)
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=features, opt=3, reloc="default", codemodel="jitdefault")


def new_target_machine() -> llvm.TargetMachine:
    """A new target machine for the host (``Target.host().target_machine()``).

    Example:
        >>> new_target_machine().triple == llvm.get_process_triple()
        True
    """
    return Target.host().target_machine()


def jit_ir(text: str, name: str) -> llvm.ExecutionEngine:
    """Hand-written LLVM IR ``text`` parsed, checked, optimised (O3) and compiled for the host
    in an MCJIT engine of its own, as module ``name``; the caller keeps the engine alive as long
    as it calls the code.

    Example:
        >>> engine = jit_ir("define i32 @seven() { ret i32 7 }", "example")
        >>> engine.get_function_address("seven") != 0
        True
    """
    tm = new_target_machine()       # MCJIT takes ownership of its target machine
    module = llvm.parse_assembly(text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    module.name = name
    module.verify()
    optimize_module(module)
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    return engine


@functools.lru_cache(maxsize=None)
def cached_target_machine(target: Target) -> llvm.TargetMachine:
    """The process-wide target machine of ``target``, for optimising and emitting code (never
    for an execution engine; see ``Target.target_machine``).

    Example:
        >>> cached_target_machine(Target.host()) is host_target_machine()
        True
    """
    return target.target_machine()


def host_target_machine() -> llvm.TargetMachine:
    """The process-wide target machine of the host.

    Example:
        >>> host_target_machine().triple == llvm.get_process_triple()
        True
    """
    return cached_target_machine(Target.host())


def optimize_module(module: llvm.ModuleRef, target: Target | None = None) -> None:
    """Run LLVM's O3 pipeline (new pass manager) for ``target`` (default the host) over
    ``module`` in place.

    Example:
        >>> m = llvm.parse_assembly("define i32 @f(i32 %x) { ret i32 %x }")
        >>> optimize_module(m)
    """
    tm = cached_target_machine(target or Target.host())
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(tm, options)
    builder.getModulePassManager().run(module, builder)
