"""The machine code is generated for: ``Target`` (triple, CPU name, enabled features, vector
width), the host as a Target, targets named as a user names them, and the LLVM target machines
made from them.

A target other than the host is named the way TVM and LLVM's tools name one:
``Target.parse("llvm -mcpu=skylake-avx512")``, optionally with ``-mattr=+f,-g`` to add or remove
LLVM features (``"llvm"`` alone, or ``-mcpu=native``, is the host). Each CPU name of
``CPU_FEATURES`` (x86-64 only) carries the instruction-set features LLVM gives that CPU; every
other feature LLVM knows is turned off, so code for a named target uses exactly its features.
``as_target`` is what every ``target=`` parameter goes through: None (the host), a Target, or
such a string. Code for a target may be built and saved anywhere, but runs only where
``Target.cannot_run_here`` is None: every one of its features is one this host has.

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
    >>> Target.parse("llvm -mcpu=skylake-avx512").lanes("float32")
    16
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import json
import platform
from dataclasses import dataclass, field

import llvmlite

from ..dtype import itemsize
from ..errors import TilefuseError
from .disk_cache import default_kernel_cache
from .llvm_binding import llvm, outside_this_process

KEY_LENGTH = 16  # hex digits of sha256 kept in Target.key
_VECTOR_BITS = (("avx512f", 512), ("avx", 256), ("sse", 128), ("neon", 128), ("sve", 128), ("altivec", 128))


class TargetError(TilefuseError, ValueError):
    """A target that cannot be named (an unknown CPU or feature, a malformed string), or code
    for a target run on a host that lacks its features; the message says which.

    Example:
        >>> issubclass(TargetError, ValueError)
        True
    """


# The instruction-set features LLVM gives each x86-64 CPU (llvm/lib/TargetParser/
# X86TargetParser.cpp), each CPU written as an earlier one plus what it adds. Features with no
# use in generated code (system instructions: xsave*, sgx, pku, ...) are left out, and so off.
_X86_64 = "64bit cx8 cmov fxsr mmx sse sse2"
_V2 = _X86_64 + " sse3 ssse3 sse4.1 sse4.2 popcnt crc32 cx16 sahf"
_V3 = _V2 + " avx avx2 bmi bmi2 f16c fma lzcnt movbe"
_AVX512 = " avx512f avx512cd avx512dq avx512bw avx512vl"
_SANDY = _V2 + " pclmul avx"
_HASWELL = _SANDY + " f16c avx2 bmi bmi2 fma lzcnt movbe"
_BROADWELL = _HASWELL + " adx prfchw"
_SKYLAKE = _BROADWELL + " aes"
_CANNON = _SKYLAKE + _AVX512 + " avx512ifma avx512vbmi sha"
_ICELAKE = _CANNON + " avx512bitalg avx512vbmi2 avx512vnni avx512vpopcntdq gfni vaes vpclmulqdq"
_SAPPHIRE = _ICELAKE + " avx512bf16 avx512fp16 avxvnni amx-bf16 amx-int8 amx-tile"
_ZEN = _HASWELL + " adx aes prfchw sha sse4a"
_ZEN3 = _ZEN + " vaes vpclmulqdq"
CPU_FEATURES: dict[str, frozenset] = {name: frozenset(features.split()) for name, features in {
    "x86-64": _X86_64, "x86-64-v2": _V2, "x86-64-v3": _V3, "x86-64-v4": _V3 + _AVX512,
    "nehalem": _V2, "westmere": _V2 + " pclmul", "sandybridge": _SANDY, "ivybridge": _SANDY + " f16c",
    "haswell": _HASWELL, "broadwell": _BROADWELL, "skylake": _SKYLAKE, "skylake-avx512": _SKYLAKE + _AVX512,
    "cascadelake": _SKYLAKE + _AVX512 + " avx512vnni", "cooperlake": _SKYLAKE + _AVX512 + " avx512vnni avx512bf16",
    "cannonlake": _CANNON, "icelake-client": _ICELAKE, "icelake-server": _ICELAKE, "rocketlake": _ICELAKE,
    "tigerlake": _ICELAKE + " avx512vp2intersect", "sapphirerapids": _SAPPHIRE,
    "graniterapids": _SAPPHIRE + " amx-fp16",
    "alderlake": _BROADWELL + " aes sha gfni vaes vpclmulqdq avxvnni",
    "znver1": _ZEN, "znver2": _ZEN, "znver3": _ZEN3,
    "znver4": _ZEN3 + _AVX512 + " avx512ifma avx512vbmi avx512vbmi2 avx512vnni avx512bitalg avx512vpopcntdq"
              " avx512bf16 gfni",
}.items()}
"""CPU name -> the LLVM features (instruction sets) code for it may use; ``Target.parse``'s
``-mcpu=`` names. Each set is closed under ``IMPLIED``."""

IMPLIED = {
    "sse2": "sse", "sse3": "sse2", "ssse3": "sse3", "sse4.1": "ssse3", "sse4.2": "sse4.1", "avx": "sse4.2",
    "avx2": "avx", "fma": "avx", "f16c": "avx", "avx512f": "avx2 fma f16c", "avx512cd": "avx512f",
    "avx512dq": "avx512f", "avx512bw": "avx512f", "avx512vl": "avx512f", "avx512ifma": "avx512f",
    "avx512vbmi": "avx512bw", "avx512vbmi2": "avx512bw", "avx512bitalg": "avx512bw", "avx512vnni": "avx512f",
    "avx512vpopcntdq": "avx512f", "avx512bf16": "avx512bw", "avx512fp16": "avx512bw avx512dq avx512vl",
    "avx512vp2intersect": "avx512f", "avxvnni": "avx2", "aes": "sse2", "pclmul": "sse2", "sha": "sse2",
    "gfni": "sse2", "vaes": "aes avx", "vpclmulqdq": "pclmul avx", "sse4a": "sse3", "fma4": "avx sse4a",
    "xop": "fma4", "amx-bf16": "amx-tile", "amx-int8": "amx-tile", "amx-fp16": "amx-tile",
}
"""Feature -> the features it needs (LLVM's implications among the x86 features above):
``-mattr=+avx512bw`` turns on avx512f too, ``-mattr=-avx2`` turns off avx512f too."""


def implied_closure(features) -> frozenset:
    """``features`` with every feature they imply (``IMPLIED``), transitively.

    Example:
        >>> sorted(implied_closure({"avx2"}) - {"sse", "sse2", "sse3", "ssse3", "sse4.1"})
        ['avx', 'avx2', 'sse4.2']
    """
    done, todo = set(), list(features)
    while todo:
        name = todo.pop()
        if name not in done:
            done.add(name)
            todo.extend(IMPLIED.get(name, "").split())
    return frozenset(done)


@functools.lru_cache(maxsize=None)
def known_features() -> frozenset:
    """Every feature LLVM knows for this process's target (the names its host detection
    reports, present or not): what ``-mattr=`` may name, and what a named target turns off.

    Example:
        >>> "sse2" in known_features() or not _process_triple().startswith("x86_64")
        True
    """
    initialize_llvm()
    return frozenset(llvm.get_host_cpu_features())


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
    return _host_facts()[2]


HOST_RECORD = "host facts 1"        # the version of the disk cache's record of the host


@functools.lru_cache(maxsize=None)
def _host_facts() -> tuple:
    """(LLVM's name of the host CPU, its feature string, the process triple). LLVM's host
    detection defines them, but loading LLVM costs a running process 40 MB: the first process
    on a machine asks it and records the answer in the disk cache under a key of what the
    operating system says of the CPU (``/proc/cpuinfo``: vendor, family, model, stepping,
    microcode, flags) and llvmlite's version (asking it in a forked child:
    ``outside_this_process``); later processes read the record."""
    key = _cpu_fingerprint()
    cache = default_kernel_cache() if key is not None else None
    if cache is not None:
        try:
            facts = json.loads(cache.cached_kernel(key) or b"null")
        except ValueError:
            facts = None
        if isinstance(facts, list) and len(facts) == 3 and all(isinstance(f, str) and f for f in facts[::2]):
            return tuple(facts)
    facts = outside_this_process(_detected_host) if cache is not None else _detected_host()
    if cache is not None:
        cache.cache_kernel(key, json.dumps(facts).encode())
    return facts


def _detected_host() -> tuple:
    """LLVM's (host CPU name, feature string, process triple)."""
    initialize_llvm()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(), llvm.get_process_triple()


def _cpu_fingerprint() -> str | None:
    """A key of the first CPU's description in ``/proc/cpuinfo`` (None where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read().split("\n\n")[0]
    except OSError:
        return None
    kept = sorted(line.strip() for line in first.splitlines()
                  if line.split(":")[0].strip() in ("vendor_id", "cpu family", "model", "model name", "stepping",
                                                    "microcode", "flags", "Features", "CPU implementer", "CPU part"))
    if not kept:
        return None
    text = repr((HOST_RECORD, platform.machine(), llvmlite.__version__, kept))
    return hashlib.sha256(text.encode()).hexdigest()


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

    @classmethod
    def parse(cls, spec: str) -> "Target":
        """The target a string names, as TVM and LLVM's tools write it: ``"llvm"`` followed by
        ``-mcpu=NAME`` (a name of ``CPU_FEATURES``, or ``native`` for the host; the host when
        left out) and ``-mattr=+f,-g`` (LLVM features added to, or removed from, the CPU's;
        adding one adds what it implies, removing one removes what needs it). Every other
        feature LLVM knows is off. TargetError for an unknown CPU or feature or a malformed
        string.

        Example:
            >>> t = Target.parse("llvm -mcpu=skylake-avx512")
            >>> t.cpu, t.vector_bits, "+avx512f" in t.features.split(",")
            ('skylake-avx512', 512, True)
            >>> Target.parse("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_bits
            256
            >>> Target.parse("llvm -mcpu=pentium9")
            Traceback (most recent call last):
            ...
            tilefuse.tensorir.runtime.target.TargetError: target 'llvm -mcpu=pentium9': unknown CPU 'pentium9'; known: ...
        """
        if not isinstance(spec, str):
            raise TypeError(f"a target is named by a str like 'llvm -mcpu=skylake-avx512', got {type(spec).__name__}")
        words = spec.split()
        if not words or words[0] != "llvm":
            hint = f"; write 'llvm -mcpu={spec.strip()}'" if spec.strip() in CPU_FEATURES else ""
            raise TargetError(f"target {spec!r}: a target is written 'llvm [-mcpu=NAME] [-mattr=+f,-g]'{hint}")
        options = {}
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key not in ("-mcpu", "-mattr") or not eq or not value or key in options:
                raise TargetError(f"target {spec!r}: unexpected {word!r}; a target is written "
                                  f"'llvm [-mcpu=NAME] [-mattr=+f,-g]'")
            options[key] = value
        cpu = options.get("-mcpu", "native")
        if cpu == "native" and "-mattr" not in options:
            return cls.host()
        if cpu == "native":
            host = cls.host()
            cpu, enabled = host.cpu, {f[1:] for f in host.features.split(",") if f}
        elif cpu in CPU_FEATURES and _process_triple().startswith("x86_64"):
            enabled = set(CPU_FEATURES[cpu])
        elif cpu in CPU_FEATURES:
            raise TargetError(f"target {spec!r}: CPU {cpu!r} is an x86-64 CPU; this LLVM generates for "
                              f"{_process_triple()}")
        else:
            near = difflib.get_close_matches(cpu, CPU_FEATURES, n=3)
            raise TargetError(f"target {spec!r}: unknown CPU {cpu!r}; "
                              + (f"did you mean {', '.join(near)}?" if near else f"known: {', '.join(CPU_FEATURES)}"))
        for item in filter(None, options.get("-mattr", "").split(",")):
            sign, name = item[:1], item[1:]
            if sign not in "+-" or name not in known_features():
                raise TargetError(f"target {spec!r}: unknown feature {item!r} (write +name or -name, a name LLVM "
                                  f"knows, e.g. +avx512vnni)")
            if sign == "+":
                enabled |= implied_closure({name})
            else:
                enabled = {f for f in enabled if name not in implied_closure({f})}
        features = ",".join("+" + f for f in enabled)
        return cls.of(cpu, features + "," + ",".join("-" + f for f in known_features() - enabled))

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def host() -> "Target":
        """The host CPU with all its features (LLVM's host detection, recorded once per machine:
        ``_host_facts``).

        Example:
            >>> t = Target.host()
            >>> t.key == Target.of(t.cpu, t.features).key and t.triple == llvm.get_process_triple()
            True
        """
        cpu, features, triple = _host_facts()
        return Target.of(cpu, features, triple)

    def __str__(self) -> str:
        """The spelling ``Target.parse`` reads back: the CPU and, for a CPU of ``CPU_FEATURES``,
        how the features differ from its own (for another CPU, all of them).

        Example:
            >>> str(Target.parse("llvm -mcpu=haswell -mattr=+avx512f"))
            'llvm -mcpu=haswell -mattr=+avx512f'
        """
        enabled = {f[1:] for f in self.features.split(",") if f}
        base = CPU_FEATURES.get(self.cpu, frozenset())
        added, removed = sorted(enabled - base), sorted(base - enabled)
        plus = ["+" + f for f in added if not any(f in implied_closure({g}) - {g} for g in added)]
        minus = ["-" + f for f in removed if not any(h in implied_closure({f}) - {f} for h in removed)]
        mattr = ",".join(plus + minus)
        return f"llvm -mcpu={self.cpu}" + (f" -mattr={mattr}" if mattr else "")

    def missing_on(self, machine: "Target") -> tuple:
        """The features code for this target may use that ``machine`` lacks, sorted.

        Example:
            >>> Target.parse("llvm -mcpu=skylake-avx512").missing_on(Target.parse("llvm -mcpu=broadwell"))
            ('aes', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512f', 'avx512vl')
        """
        have = set(machine.features.split(","))
        return tuple(sorted(f[1:] for f in self.features.split(",") if f and f not in have))

    def cannot_run_here(self) -> str | None:
        """Why code for this target must not run on this host (another architecture, or
        features the host lacks, named), or None when it may: checked before code is mapped,
        so that it never meets an illegal instruction. Worked out once per target and host.

        Example:
            >>> Target.host().cannot_run_here() is None
            True
        """
        return _cannot_run_on(self, Target.host())

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
        features = ",".join(f for f in (self.disabled, self.features) if f)   # enabling wins, as it implies
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=features, opt=3, reloc="default", codemodel="jitdefault")


@functools.lru_cache(maxsize=64)
def _cannot_run_on(target: Target, host: Target) -> str | None:
    if target.triple.split("-")[0] != host.triple.split("-")[0]:
        return f"compiled for {target.triple}; this host is {host.triple}"
    missing = target.missing_on(host)
    if missing:
        return (f"compiled for CPU {target.cpu} with features this host ({host.cpu}) lacks: "
                f"{', '.join(missing)}")
    return None


def as_target(target) -> Target:
    """What a ``target=`` parameter means: None is the host, a Target itself, a str the target
    ``Target.parse`` reads.

    Example:
        >>> as_target(None) is Target.host(), as_target("llvm -mcpu=haswell").lanes("float32")
        (True, 8)
    """
    if target is None:
        return Target.host()
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return Target.parse(target)
    raise TypeError(f"target must be a Target, a str like 'llvm -mcpu=skylake-avx512' or None, "
                    f"got {type(target).__name__}")


def new_target_machine() -> llvm.TargetMachine:
    """A new target machine for the host (``Target.host().target_machine()``).

    Example:
        >>> new_target_machine().triple == llvm.get_process_triple()
        True
    """
    return Target.host().target_machine()


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
