"""Code generation: loop IR -> LLVM IR -> Kernel."""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..in_place import in_place_inputs
from ..pipeline import CODEGEN_PASSES, run_passes
from ..runtime.kernel import ArgSpec, Kernel, compile_llvm
from ..runtime.target import Target, as_target, cached_target_machine
from .llvm import CodeGen, CodegenError, written_buffer_uids


def build_prim_func(func: S.PrimFunc, fast_math: bool = False, target: Target | str | None = None) -> Kernel:
    """Compile a loop-IR function for ``target`` (``as_target``: default the host CPU).

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var, const
        >>> from tilefuse.tensorir.stmt import For, BufferStore, PrimFunc
        >>> A = Buffer("A", (4,), "float32"); i = var("i")
        >>> k = build_prim_func(PrimFunc("fill", (A,), For(i, const(0), const(4), "serial",
        ...                                               BufferStore(A, const(1.0), (i,)))))
    """
    target = as_target(target)
    tm = cached_target_machine(target)
    shares = in_place_inputs(func)
    func = run_passes(func, CODEGEN_PASSES)
    module = CodeGen(func, fast_math=fast_math, triple=tm.triple, data_layout=str(tm.target_data),
                     shares=shares, target=target).module
    written = written_buffer_uids(func)
    args = [ArgSpec(p.name, p.dtype, tuple(p.shape), p.uid in written, shares.get(k, ())) if isinstance(p, E.Buffer)
            else ArgSpec(p.name, p.dtype, None) for k, p in enumerate(func.params)]
    return compile_llvm(func.name, args, str(module), target)


__all__ = ["build_prim_func", "CodeGen", "CodegenError"]
