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
