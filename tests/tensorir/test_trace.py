"""Tracing the loop passes: a line per pass on stderr (pipeline, pass, milliseconds, statements
before and after), the IR after each pass at level 2, TILEFUSE_TRACE as the default."""
import re

import pytest

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.expr import Buffer, const, var
from tilefuse.tensorir.pipeline import CODEGEN_PASSES, LOWERING_PASSES, run_passes
from tilefuse.tensorir.stmt import BufferStore, For, IfThenElse, PrimFunc
from tilefuse.tensorir.trace import trace_level

LINE = re.compile(r"^\[tilefuse\] (?P<pipeline>.+?) +(?P<name>\w+) +(?P<ms>\d+\.\d\d) ms  "
                  r"(?P<unit>\w+) (?P<before>\d+) -> (?P<after>\d+)$")


def trace_lines(err: str) -> list[dict]:
    return [m.groupdict() for m in map(LINE.match, err.splitlines()) if m]


def guarded():
    A = Buffer("A", (10,), "float32"); i = var("i")
    return PrimFunc("fill", (A,), For(i, const(0), const(10), "serial",
                                      IfThenElse(i < 7, BufferStore(A, const(1.0), (i,)))))


def test_a_line_per_pass_with_its_milliseconds_and_sizes(capsys):
    run_passes(guarded(), trace=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = trace_lines(captured.err)
    assert len(captured.err.splitlines()) == len(lines) == 3
    assert [(ln["pipeline"], ln["name"]) for ln in lines] == [("lower fill", p.__name__) for p in LOWERING_PASSES]
    assert all(float(ln["ms"]) >= 0 and ln["unit"] == "stmts" for ln in lines)
    assert [(ln["before"], ln["after"]) for ln in lines] == [("3", "3"), ("3", "2"), ("2", "2")]   # the guard goes


def test_level_2_prints_the_ir_after_each_pass(capsys):
    run_passes(guarded(), trace="ir")
    err = capsys.readouterr().err
    assert len(trace_lines(err)) == 3
    assert err.count("func fill(A: float32[10]) {") == 3
    assert "for (i, 0, 7) {" in err


def test_off_prints_nothing(capsys, monkeypatch):
    monkeypatch.delenv("TILEFUSE_TRACE", raising=False)
    run_passes(guarded())
    run_passes(guarded(), trace=False)
    assert capsys.readouterr().err == ""


def test_the_environment_variable_is_the_default(capsys, monkeypatch):
    monkeypatch.setenv("TILEFUSE_TRACE", "1")
    A = placeholder((16,), name="A")
    B = compute((16,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    _, inner = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(inner)
    build(s, [A, B])                                  # lower's passes, then code generation's
    lines = trace_lines(capsys.readouterr().err)
    assert [(ln["pipeline"], ln["name"]) for ln in lines] == \
        [("lower main", p.__name__) for p in LOWERING_PASSES] + [("codegen main", p.__name__) for p in CODEGEN_PASSES]
    monkeypatch.setenv("TILEFUSE_TRACE", "ir")
    lower(s, [A, B])
    assert capsys.readouterr().err.count("func main(") == 3
    monkeypatch.setenv("TILEFUSE_TRACE", "0")
    lower(s, [A, B])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value, level", [(None, 0), (False, 0), (True, 1), (0, 0), (1, 1), (2, 2), ("", 0), ("0", 0),
                                          ("1", 1), ("times", 1), ("2", 2), ("ir", 2), ("IR", 2), ("off", 0)])
def test_trace_levels(value, level, monkeypatch):
    monkeypatch.delenv("TILEFUSE_TRACE", raising=False)
    assert trace_level(value) == level


def test_a_bad_trace_level_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="trace level 'loud'"):
        trace_level("loud")
    monkeypatch.setenv("TILEFUSE_TRACE", "3")
    with pytest.raises(ValueError, match="trace level '3'"):
        run_passes(guarded())
