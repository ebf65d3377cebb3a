"""Executors: a local pool of worker processes and a Dask cluster; crashes and hangs in a call
fail only that call, and the dead or hung worker is replaced."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tilefuse.autotune.executor import (DaskExecutor, JobResult, LocalExecutor, _dask_address, default_executor,
                               describe_exception, executor_from)
from tilefuse.autotune.measure import MeasureOptions, measure_batch
from measure_testing import (config_for, crash_in_python, elementwise_task, misbehaving_builder, process_id,
                             raise_value_error, sleep_for)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                        # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def pool():
    with LocalExecutor(workers=2) as ex:
        yield ex


def test_results_come_back_in_order(pool):
    results = pool.run([(pow, (2, n)) for n in range(7)], timeout=30)
    assert [r.value for r in results] == [2 ** n for n in range(7)]
    assert all(r.ok and r.error is None and r.seconds >= 0 for r in results)


def test_an_exception_fails_only_its_call(pool):
    results = pool.run([(pow, (3, 2)), (raise_value_error, ("boom",)), (pow, (3, 3))], timeout=30)
    assert [r.error for r in results] == [None, "exception", None]
    assert results[1].message.splitlines()[0] == "ValueError: boom"
    assert "Traceback" in results[1].message
    assert results[2].value == 27


def test_a_crash_fails_only_its_call_and_the_worker_is_replaced(pool):
    before = pool.run([(process_id, ())], timeout=30, parallel=False)[0].value
    results = pool.run([(crash_in_python, ()), (pow, (5, 2))], timeout=30, parallel=False)
    assert results[0].error == "crash"
    assert "SIGSEGV" in results[0].message and "crash_in_python" in results[0].message
    assert results[1].value == 25
    after = pool.run([(process_id, ())], timeout=30, parallel=False)[0].value
    assert after != before and not alive(before)


def test_a_hang_times_out_and_the_worker_is_replaced(pool):
    before = pool.run([(process_id, ())], timeout=30, parallel=False)[0].value
    results = pool.run([(sleep_for, (600,)), (pow, (7, 2))], timeout=1.5, parallel=False)
    assert results[0].error == "timeout" and "1.5 s" in results[0].message
    assert results[0].seconds >= 1.5
    assert results[1].value == 49
    after = pool.run([(process_id, ())], timeout=30, parallel=False)[0].value
    assert after != before and not alive(before)


def test_sequential_runs_use_one_worker_and_parallel_runs_use_all(pool):
    pool.run([(pow, (1, 1))] * 4, timeout=30)            # every worker started and idle
    sequential = pool.run([(process_id, ())] * 4, timeout=30, parallel=False)
    assert len({r.value for r in sequential}) == 1
    assert sequential[0].value == pool.worker_pids()[0]
    parallel = pool.run([(sleep_for, (0.3,)), (sleep_for, (0.3,))] + [(process_id, ())] * 2, timeout=30)
    assert len(set(pool.worker_pids())) == 2
    assert {r.value for r in parallel[2:]} <= set(pool.worker_pids())


def test_unpicklable_calls_and_results_are_exceptions(pool):
    results = pool.run([(lambda: 1, ()), (threading.Lock, ()), (pow, (2, 2))], timeout=30)
    assert results[0].error == "exception" and "could not be sent" in results[0].message
    assert results[1].error == "exception" and "could not be sent back" in results[1].message
    assert results[2].value == 4


def test_bad_arguments():
    ex = LocalExecutor(workers=1)
    with pytest.raises(ValueError, match="timeout"):
        ex.run([(pow, (1, 1))], timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        ex.run([(pow, (1, 1))], timeout=True)
    with pytest.raises(TypeError, match="pair"):
        ex.run([pow], timeout=1)
    with pytest.raises(TypeError, match="pair"):
        ex.run([(pow, [1, 1])], timeout=1)
    assert ex.run([], timeout=1) == []
    assert ex.worker_pids() == [None]          # nothing was started
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            LocalExecutor(workers=bad)
    with pytest.raises(ValueError, match="error"):
        JobResult(error="segfault")


def test_close_stops_the_workers_and_a_closed_executor_starts_again():
    ex = LocalExecutor(workers=2)
    ex.run([(pow, (2, 2))] * 2, timeout=30)
    pids = [p for p in ex.worker_pids() if p is not None]
    assert pids
    ex.close()
    assert ex.worker_pids() == [None, None]
    assert not any(alive(p) for p in pids)
    assert ex.run([(pow, (2, 3))], timeout=30)[0].value == 8
    ex.close()


def test_a_hung_worker_does_not_outlive_a_killed_parent():
    script = textwrap.dedent(f"""
        import sys, threading
        sys.path[:0] = [{ROOT!r}, {os.path.dirname(os.path.abspath(__file__))!r}]
        from tilefuse.autotune.executor import LocalExecutor
        from measure_testing import sleep_for
        ex = LocalExecutor(workers=1)
        ex.run([(pow, (1, 1))], timeout=60)
        print(ex.worker_pids()[0], flush=True)
        ex.run([(sleep_for, (600,))], timeout=600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    assert alive(worker)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def test_describe_exception_cuts_long_messages():
    text = describe_exception(ValueError("x" * 10000), limit=100)
    assert text.startswith("ValueError: xxx") and text.endswith("(cut)") and len(text) < 120


def test_executor_from():
    assert executor_from(None) is default_executor() and executor_from("local") is default_executor()
    for bad in ("", "loca", "dask:/h:1", "tcp://h:1", 3):
        with pytest.raises(ValueError, match="unknown executor"):
            executor_from(bad)
    with pytest.raises(ValueError, match="HOST:PORT"):
        executor_from("dask://")


def test_dask_address_parsing():
    assert _dask_address("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert _dask_address("dask://tls://sched:8786") == "tls://sched:8786"
    assert _dask_address("tcp://[::1]:8786") == "tcp://[::1]:8786"
    for bad in ("dask://host", "dask://:8786", "dask://host:port", "dask://host:0", "dask://host:70000",
                "dask://ftp://h:1"):
        with pytest.raises(ValueError):
            _dask_address(bad)
    with pytest.raises(TypeError):
        _dask_address(8786)


# ---------------------------------------------------------------------------- Dask

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def dask_executor(cluster):
    host_port = cluster.scheduler_address.split("://", 1)[1]
    with executor_from("dask://" + host_port) as ex:
        assert isinstance(ex, DaskExecutor)
        yield ex


def test_dask_runs_calls_in_order_and_records_errors(dask_executor):
    results = dask_executor.run([(pow, (2, 5)), (raise_value_error, ("remote boom",)), (pow, (3, 3))],
                                timeout=60)
    assert [r.value for r in results] == [32, None, 27]
    assert results[1].error == "exception" and results[1].message.startswith("ValueError: remote boom")


def test_dask_crash_and_hang_cost_a_child_not_the_dask_worker(dask_executor):
    workers = set(dask_executor.client.scheduler_info(n_workers=-1)["workers"])
    results = dask_executor.run([(crash_in_python, ()), (sleep_for, (600,)), (pow, (4, 2))],
                                timeout=2, parallel=False)
    assert [r.error for r in results] == ["crash", "timeout", None]
    assert "SIGSEGV" in results[0].message and results[2].value == 16
    assert set(dask_executor.client.scheduler_info(n_workers=-1)["workers"]) == workers


def test_measure_batch_on_dask(dask_executor):
    task = elementwise_task()
    configs = [config_for(task, kind) for kind in ("compile", "crash", "wrong_answer")]
    configs += [{"vector": 16, "unroll": 2, "parallel": False}, {"vector": 64, "unroll": 1, "parallel": True}]
    results = measure_batch(task, configs, MeasureOptions(repeat=2, timeout=20), dask_executor,
                            builder=misbehaving_builder)
    assert [r.error_kind for r in results] == ["compile", "crash", "wrong_answer", None, None]
    assert [r.config for r in results] == configs
    assert all(len(r.costs) == 2 and r.cost > 0 for r in results[3:])


def test_dask_unreachable_scheduler_is_a_connection_error():
    with pytest.raises(ConnectionError, match="cannot reach"):
        DaskExecutor("dask://127.0.0.1:9", connect_timeout=1)
