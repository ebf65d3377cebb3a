"""The pieces of ``autotune tune`` (``cli_tune``): the per-task summary and its table, the
progress lines, and the exit code that follows from the reports. The command itself runs in
``test_cli.py``."""
import io
import math
from collections import Counter

from tilefuse.autotune.cli_io import EXIT_BUDGET_EXHAUSTED, EXIT_OK, EXIT_UNUSABLE
from tilefuse.autotune.cli_tune import ProgressPrinter, TaskSummary, _tune_exit, summarize, tune_table
from tilefuse.autotune.record import Record
from tilefuse.autotune.task import Task
from tilefuse.autotune.tune import TaskReport


def _task():
    from tilefuse.tensorir import compute, placeholder
    A = placeholder((64,), name="A")
    return Task(compute((64,), lambda i: A[i] * 2.0, name="B"))


def test_summary_counts_resumed_and_new_errors_with_first_messages():
    task = _task()
    prior = [Record.create(task.key, task.name, "injective", {"v": 1}, error_kind="timeout",
                           error_msg="ran longer than 10 s\ndetails"),
             Record.create(task.key, task.name, "injective", {"v": 2}, costs=[1e-3])]
    report = TaskReport(task, trials=3, resumed=2, errors=Counter(compile=2, timeout=1),
                        messages=[("compile", "LLVM: bad\ntrace"), ("timeout", "later"), ("compile", "again")],
                        default_cost=1e-3, best_cost=5e-4)
    s = summarize(report, prior)
    assert s.trials == 5 and s.errors == {"timeout": 2, "compile": 2}
    assert s.first_errors == {"timeout": "ran longer than 10 s", "compile": "LLVM: bad"}
    assert len(s.messages) == 4 and s.speedup == 2.0
    text = tune_table([s])
    assert "compile 2, timeout 2" in text and "timeout: ran longer than 10 s" in text and "details" not in text
    verbose = tune_table([s], verbose=True)
    assert "details" in verbose and "again" in verbose and "trace" in verbose


def test_untuned_tasks_show_dashes_and_exit_codes_follow_the_reports():
    task = _task()
    untuned = summarize(TaskReport(task, stopped="time budget"), [])
    assert "-" in tune_table([untuned]).splitlines()[2] and not untuned.tuned
    assert math.isnan(untuned.speedup) and untuned.to_json()["tuned_ms"] is None
    failing = TaskReport(task, trials=2, errors=Counter(crash=2), stopped="trials")
    assert _tune_exit([untuned], [TaskReport(task, stopped="time budget")])[0] == EXIT_BUDGET_EXHAUSTED
    assert _tune_exit([summarize(failing, [])], [failing])[0] == EXIT_UNUSABLE
    done = TaskSummary("t", "k", "injective", 1, 0, 1, 1, 0, 1e-3, 1e-3)
    assert _tune_exit([done, untuned], [failing, failing])[0] == EXIT_OK


def test_progress_is_one_line_per_batch_or_one_bar_on_a_terminal():
    task = _task()
    report = TaskReport(task, trials=4, default_cost=2e-3, best_cost=1e-3)
    plain = io.StringIO()
    printer = ProgressPrinter(plain, [task], tty=False)
    printer(report, 2, 4), printer(report, 4, 4), printer.finish()
    assert plain.getvalue().count("\n") == 2 and "[1/1] B: 4 trials, best 1.000 ms" in plain.getvalue()
    assert plain.getvalue().endswith("; run: 4/4 trials\n")
    bar = io.StringIO()
    printer = ProgressPrinter(bar, [task], tty=True)
    printer(report, 2, 4), printer(report, 4, 4), printer.finish()
    assert bar.getvalue().count("\r") == 2 and bar.getvalue().count("\n") == 1 and "[####" in bar.getvalue()


def test_progress_tells_the_task_s_trials_from_the_run_s_and_the_time_left():
    first, second = _task(), _task()
    report = TaskReport(second, trials=3, resumed=1, default_cost=2e-3, best_cost=1e-3)
    plain = io.StringIO()
    ProgressPrinter(plain, [first, second], tty=False)(report, 25, 64)
    assert plain.getvalue().startswith("[2/2] B: 4 trials,") and "run: 25/64 trials" in plain.getvalue()
    open_ended = io.StringIO()
    ProgressPrinter(open_ended, [second], tty=False, time_budget=125.5)(report, 25, None)
    assert open_ended.getvalue().endswith("; run: 25 trials, 2m05s left\n"), open_ended.getvalue()
    bar = io.StringIO()
    ProgressPrinter(bar, [second], tty=True, time_budget=1e6)(report, 25, None)
    assert "[....................] 25 trials, " in bar.getvalue() and "left" in bar.getvalue()


# ---------------------------------------------------------------------------- the summary, measured by fakes

def _fake_measurements(monkeypatch, alone: float, in_model: float):
    """Every kernel measurement and every step time made up: the default config 10 us, any other
    config ``alone`` times that when timed alone and ``in_model`` times that in the model."""
    import importlib
    from tilefuse.autotune import measure, model_check
    tune_module = importlib.import_module("tilefuse.autotune.tune")       # the module, not autotune.tune the function

    def measure_batch(task, configs, options=None, executor=None, **_):
        default = dict(task.template.default_config().values)
        return [measure.MeasureResult(dict(c.values), costs=(10e-6 * (1 if dict(c.values) == default else alone),) * 3)
                for c in configs]

    def time_steps(engines, feeds, rounds, round_seconds):
        steps = engines["default"].step_times(feeds, 1)
        return {"default": {k: 10e-6 for k in steps}, "tuned": {k: 10e-6 * in_model for k in steps}}, 0.0
    monkeypatch.setattr(tune_module, "measure_batch", measure_batch)
    monkeypatch.setattr(model_check, "time_steps", time_steps)


def _tune(tmp_path):
    from test_cli import run, table_of, write_graph
    graph = write_graph(tmp_path / "g.json")
    code, out, err = run(["tune", graph, "--tuner", "random", "--trials", "6", "--scheduler", "sequential",
                          "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == 0, err
    rows = table_of(out).splitlines()[2:]
    line = next((l for l in out.splitlines() if l.startswith("in the model")), "")
    return rows, line, out


def test_the_summary_of_picks_faster_alone_and_in_the_model(tmp_path, monkeypatch):
    _fake_measurements(monkeypatch, alone=0.5, in_model=0.5)
    rows, line, out = _tune(tmp_path)
    assert len(rows) == 2 and all("2.00x" in row and "tuned 2.00x ±0%" in row for row in rows), rows
    assert line == ("in the model (steps summed): default 0.020 ms, every pick 0.010 ms (2.00x, ±0%); "
                    "0 of 2 tuned pick(s) dropped"), line
    assert "nan" not in out and "noisy" not in out


def test_the_summary_of_picks_faster_alone_but_slower_in_the_model(tmp_path, monkeypatch):
    _fake_measurements(monkeypatch, alone=0.5, in_model=1.25)
    rows, line, out = _tune(tmp_path)
    # the search and the kernel check found 2x; the model found 0.8x, and the picks went
    assert all("2.00x" in row and "default 0.80x ±0% in the model" in row for row in rows), rows
    assert line.startswith("in the model (steps summed): default 0.020 ms, every pick 0.025 ms (0.80x, ±0%); "
                           "2 of 2 tuned pick(s) dropped (slower there): "), line
    assert "nan" not in out


def test_the_summary_of_picks_slower_alone(tmp_path, monkeypatch):
    _fake_measurements(monkeypatch, alone=2.0, in_model=2.0)
    rows, line, out = _tune(tmp_path)
    # no config beats the default: the best is the default itself, the check keeps it, nothing
    # reaches the model
    assert all("1.00x" in row and "default 0.50x ±0%" in row and "in the model" not in row for row in rows), rows
    assert line == "" and "nan" not in out


def test_the_table_flags_noisy_checks_and_prints_no_nan():
    noisy = TaskSummary("softmax", "k1", "reduction", 2, 0, 9, 9, 0, 4e-6, 3e-6, applied="tuned",
                        checked_speedup=1.3, noise=9.59)
    unknown = TaskSummary("transpose", "k2", "injective", 4, 0, 1, 1, 0, 1e-6, 1e-6, applied="default",
                          checked_speedup=math.nan, noise=math.nan, dropped_in_model=True)
    text = tune_table([noisy, unknown])
    assert "nan" not in text and "default - - in the model" in text
    assert "noisy: the checks of 1 task(s) varied by more than 25% between rounds (up to ±959%)" in text
    time_shares = [row.split()[5] for row in text.splitlines()[2:4]]
    assert time_shares == ["67%", "33%"]          # weight x default ms: 8 us of the model's 12
