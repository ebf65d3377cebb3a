"""Readable text for expressions, statements and functions (pseudo-code in the style of TIR)."""
from __future__ import annotations

from . import expr as E
from . import stmt as S
from .visitor import Visitor

_INFIX = {  # class: (symbol, precedence)
    E.Or: ("||", 1), E.And: ("&&", 2),
    E.EQ: ("==", 3), E.NE: ("!=", 3), E.LT: ("<", 4), E.LE: ("<=", 4), E.GT: (">", 4), E.GE: (">=", 4),
    E.Add: ("+", 5), E.Sub: ("-", 5),
    E.Mul: ("*", 6), E.Div: ("/", 6), E.FloorDiv: ("//", 6), E.FloorMod: ("%", 6),
}


def _const_str(c: E.Const) -> str:
    if c.dtype == "bool":
        return "True" if c.value else "False"
    if c.dtype == "float32":
        return f"{c.value:g}f"
    if c.dtype == "float64":
        return f"{c.value!r}"
    if c.dtype == "int64":
        return str(c.value)
    return f"{c.dtype}({c.value})"


def _expr(e: E.Expr) -> tuple[str, int]:
    """Text and precedence of ``e`` (higher binds tighter)."""
    if isinstance(e, E.Const):
        return _const_str(e), (9 if not (isinstance(e.value, (int, float)) and e.value < 0) else 7)
    if isinstance(e, E.Var):
        return e.name, 9
    cls = type(e)
    if cls in _INFIX:
        sym, prec = _INFIX[cls]
        a, pa = _expr(e.a)
        b, pb = _expr(e.b)
        left = a if pa >= prec else f"({a})"
        right = b if pb > prec else f"({b})"
        return f"{left} {sym} {right}", prec
    if isinstance(e, (E.Min, E.Max)):
        return f"{cls.__name__.lower()}({expr_str(e.a)}, {expr_str(e.b)})", 9
    if isinstance(e, E.Not):
        a, pa = _expr(e.a)
        return ("!" + (a if pa >= 8 else f"({a})")), 8
    if isinstance(e, E.Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.true_value)}, {expr_str(e.false_value)})", 9
    if isinstance(e, E.Cast):
        return f"{e.dtype}({expr_str(e.value)})", 9
    if isinstance(e, E.Ramp):
        return f"ramp({expr_str(e.base)}, {e.stride}, {e.lanes})", 9
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})", 9
    if isinstance(e, E.TensorLoad):
        return f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]", 9
    if isinstance(e, E.BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]", 9
    if isinstance(e, E.Reduce):
        axes = ", ".join(f"{a.name} in [{a.dom_min}, {a.dom_min + a.dom_extent})" for a in e.axis)
        return f"{e.combiner}({expr_str(e.source)}, axis=[{axes}])", 9
    return f"<{cls.__name__}>", 9


def expr_str(e: E.Expr) -> str:
    """Infix text of an expression.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i")
        >>> expr_str((i + 1) * 2)
        '(i + 1) * 2'
    """
    return _expr(e)[0]


class _Lines(Visitor):
    """One line per store, let and allocation, braces around loop and branch bodies."""

    def __init__(self, out: list[str]):
        super().__init__()
        self.out = out

    def generic_visit(self, s, indent):
        self.out.append(f"{'  ' * indent}<{type(s).__name__}>")

    def visit_SeqStmt(self, s, indent):
        for c in s.stmts:
            self.visit(c, indent)

    def visit_For(self, s, indent):
        pad = "  " * indent
        kind = "for" if s.kind == "serial" else s.kind
        self.out.append(f"{pad}{kind} ({s.var.name}, {expr_str(s.min)}, {expr_str(s.extent)}) {{")
        with self.inside(s):
            self.visit(s.body, indent + 1)
        self.out.append(f"{pad}}}")

    def visit_ParallelFor(self, s, indent):
        pad = "  " * indent
        closure = f"{', '.join(v.name for v in s.params)}; {', '.join(b.name for b in s.buffers)}"
        self.out.append(f"{pad}parallel_for ({s.var.name}, {expr_str(s.min)}, {expr_str(s.extent)}) closure ({closure}) {{")
        with self.inside(s):
            self.visit(s.body, indent + 1)
        self.out.append(f"{pad}}}")

    def visit_BufferStore(self, s, indent):
        idx = ", ".join(expr_str(i) for i in s.indices)
        self.out.append(f"{'  ' * indent}{s.buffer.name}[{idx}] = {expr_str(s.value)}")

    def visit_Prefetch(self, s, indent):
        idx = ", ".join(expr_str(i) for i in s.indices)
        into = "" if s.level == 1 else f" (L{s.level})"
        self.out.append(f"{'  ' * indent}prefetch{'_write' if s.write else ''}{into} {s.buffer.name}[{idx}]")

    def visit_Allocate(self, s, indent):
        b = s.buffer
        self.out.append(f"{'  ' * indent}allocate {b.name}[{', '.join(map(str, b.shape))}]: {b.dtype}, {b.scope}")
        self.visit(s.body, indent)

    def visit_IfThenElse(self, s, indent):
        pad = "  " * indent
        self.out.append(f"{pad}if ({expr_str(s.cond)}) {{")
        self.visit(s.then_body, indent + 1)
        if s.else_body is not None:
            self.out.append(f"{pad}}} else {{")
            self.visit(s.else_body, indent + 1)
        self.out.append(f"{pad}}}")

    def visit_LetStmt(self, s, indent):
        self.out.append(f"{'  ' * indent}let {s.var.name} = {expr_str(s.value)}")
        self.visit(s.body, indent)


def stmt_str(s: S.Stmt, indent: int = 0) -> str:
    """Pseudo-code of a statement, one line per store, braces around loop bodies.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, var, const
        >>> from tilefuse.tensorir.stmt import For, BufferStore
        >>> A = Buffer("A", (4,), "float32"); i = var("i")
        >>> print(stmt_str(For(i, const(0), const(4), "serial", BufferStore(A, const(0.0), (i,)))))
        for (i, 0, 4) {
          A[i] = 0f
        }
    """
    out: list[str] = []
    _Lines(out).visit(s, indent)
    return "\n".join(out)


def func_str(f: S.PrimFunc) -> str:
    """Pseudo-code of a whole function with its typed parameters.

    Example:
        >>> from tilefuse.tensorir.expr import Buffer
        >>> from tilefuse.tensorir.stmt import PrimFunc, seq
        >>> print(func_str(PrimFunc("f", (Buffer("A", (2, 3), "float32"),), seq())))
        func f(A: float32[2, 3]) {
        }
    """
    params = []
    for p in f.params:
        if isinstance(p, E.Var):
            params.append(f"{p.name}: {p.dtype}")
        else:
            params.append(f"{p.name}: {p.dtype}[{', '.join(map(str, p.shape))}]")
    body = stmt_str(f.body, 1)
    return f"func {f.name}({', '.join(params)}) {{\n" + (body + "\n" if body else "") + "}"
