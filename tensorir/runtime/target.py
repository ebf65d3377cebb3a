"""The host CPU as an LLVM target: one initialised LLVM and one target machine per process."""
from __future__ import annotations

import functools

import llvmlite.binding as llvm


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
def host_cpu() -> tuple[str, str]:
    """The host CPU name and its feature string as LLVM spells them.

    Example:
        >>> name, features = host_cpu()
        >>> isinstance(name, str) and features.startswith("+") or features.startswith("-")
        True
    """
    initialize_llvm()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def new_target_machine() -> llvm.TargetMachine:
    """A new target machine for the host CPU and all its features, at optimisation level 3.

    Hand a new one to each MCJIT engine: the engine takes ownership of its target machine
    and frees it with itself, so the shared ``host_target_machine()`` must never go there.

    Example:
        >>> tm = new_target_machine()
        >>> tm.triple == llvm.get_process_triple()
        True
    """
    initialize_llvm()
    cpu, features = host_cpu()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=cpu, features=features, opt=3,
                                        reloc="default", codemodel="jitdefault")


@functools.lru_cache(maxsize=None)
def host_target_machine() -> llvm.TargetMachine:
    """The process-wide target machine for the host, for optimising and emitting code (never
    for an execution engine; see ``new_target_machine``).

    Example:
        >>> host_target_machine().triple == llvm.get_process_triple()
        True
    """
    return new_target_machine()


def optimize_module(module: llvm.ModuleRef) -> None:
    """Run LLVM's O3 pipeline (new pass manager) over ``module`` in place.

    Example:
        >>> m = llvm.parse_assembly("define i32 @f(i32 %x) { ret i32 %x }")
        >>> optimize_module(m)
    """
    tm = host_target_machine()
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(tm, options)
    builder.getModulePassManager().run(module, builder)
