"""Tasks: workload keys, FLOP estimates, pickling, descriptions and random inputs."""
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tilefuse.autotune.task import KEY_FORMAT, Task, _max_uid, canonical_text, estimate_flop, random_inputs
from tilefuse.tensorir import cast, compute, exp, if_then_else, placeholder, reduce_axis, var
from tilefuse.tensorir import max as tmax
from tilefuse.tensorir import sum as tsum

MATMUL_SOURCE = """
from tilefuse.tensorir import placeholder, compute, reduce_axis, sum as tsum
from tilefuse.tensorir.expr import Var
from tilefuse.autotune.task import Task
junk = [Var("junk") for _ in range({junk})]          # shift the id counter
X = placeholder((32, 16), name="{a}"); W = placeholder((16, 24), name="{b}")
k = reduce_axis((0, 16), name="{r}")
Y = compute((32, 24), lambda p, q: tsum(X[p, k] * W[k, q], axis=k), name="{c}")
Z = compute((32, 24), lambda p, q: Y[p, q] + 1.0, name="{d}")
task = Task(Z)
"""

# The key of MATMUL_SOURCE's workload. It must never change while KEY_FORMAT stays the same:
# records in tuning databases are found by it. A change of canonical_text bumps KEY_FORMAT.
MATMUL_KEY = "5c01b537c0ccb433136bd0003049f5a2952a614e5d841ca4ade38a421a0031b2"


def matmul_bias(junk=0, a="A", b="B", r="r", c="C", d="D"):
    scope = {}
    exec(MATMUL_SOURCE.format(junk=junk, a=a, b=b, r=r, c=c, d=d), scope)
    return scope["task"]


def test_same_workload_same_key_whatever_the_names_and_ids():
    one = matmul_bias()
    other = matmul_bias(junk=500, a="left", b="right", r="kk", c="mm", d="out")
    assert one.key == other.key
    assert one == other and hash(one) == hash(other)
    assert one.name == "C+D" and other.name == "mm+out"


def test_key_is_stable_across_processes_and_hash_seeds():
    code = MATMUL_SOURCE.format(junk=7, a="A", b="B", r="r", c="C", d="D") + "\nprint(task.key)"
    keys = set()
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))), check=True)
        keys.add(out.stdout.strip())
    assert keys == {matmul_bias().key}


def test_key_matches_the_recorded_one():
    assert KEY_FORMAT == "tilefuse-workload-v1"
    assert matmul_bias().key == MATMUL_KEY


def test_key_changes_with_shape_dtype_constants_and_structure():
    def task(n=8, dtype="float32", c=2.0, op="mul", tag=""):
        A = placeholder((n, 4), dtype, name="A")
        f = (lambda i, j: A[i, j] * c) if op == "mul" else (lambda i, j: A[i, j] + c)
        return Task(compute((n, 4), f, name="B", tag=tag))
    base = task().key
    variants = [task(n=9), task(dtype="float64"), task(c=3.0), task(op="add"), task(tag="opaque")]
    keys = {base} | {t.key for t in variants}
    assert len(keys) == 1 + len(variants)


def test_key_depends_on_output_order():
    A = placeholder((4,), name="A")
    B = compute((4,), lambda i: A[i] + 1.0, name="B")
    C = compute((4,), lambda i: A[i] * 2.0, name="C")
    assert Task([B, C]).key != Task([C, B]).key


def test_key_distinguishes_int_and_float_constants_and_indices():
    A = placeholder((6, 6), "int32", name="A")
    transpose = Task(compute((6, 6), lambda i, j: A[j, i], name="T"))
    copy = Task(compute((6, 6), lambda i, j: A[i, j], name="T"))
    assert transpose.key != copy.key


def test_canonical_text_has_no_names():
    X = placeholder((5,), name="secret_input")
    n = var("secret_scalar", "float32")
    Y = compute((5,), lambda idx: X[idx] * n, name="secret_output")
    text = canonical_text(Y, "injective")
    assert "secret" not in text and "idx" not in text
    assert text.splitlines()[0] == f"{KEY_FORMAT} template=injective"


def test_flop_of_matmul_with_epilogue():
    # 2*n*m*k for the matmul, one add per output element for the bias
    assert matmul_bias().flop == 2 * 32 * 24 * 16 + 32 * 24


def test_flop_counts_value_arithmetic_only():
    A = placeholder((10, 20), name="A")
    # index arithmetic (i * 2 % 20) and casts are free; exp and the mul count
    B = compute((10, 10), lambda i, j: exp(A[i, (j * 2) % 20]) * 2.0, name="B")
    assert estimate_flop(B) == 100 * 2
    copy = compute((10, 20), lambda i, j: A[i, j], name="copy")
    assert estimate_flop(copy) == 0
    C = compute((10, 20), lambda i, j: cast("float64", A[i, j]), name="C")
    assert estimate_flop(C) == 0


def test_flop_of_select_counts_the_costlier_branch():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: if_then_else(i > 3, A[i] * 2.0 + 1.0, A[i]), name="B")
    assert estimate_flop(B) == 8 * 2


def test_flop_of_reductions_counts_the_combine():
    A = placeholder((4, 6, 5), name="A")
    r, s = reduce_axis((0, 6), name="r"), reduce_axis((0, 5), name="s")
    M = compute((4,), lambda i: tmax(A[i, r, s], axis=[r, s]), name="M")
    assert estimate_flop(M) == 4 * 30 * 1
    S = compute((4,), lambda i: tsum(A[i, r, s] * A[i, r, s], axis=[r, s]), name="S")
    assert estimate_flop(S) == 4 * 30 * 2


def test_task_properties():
    task = matmul_bias()
    assert task.template_name == "complex"
    assert [t.name for t in task.args] == ["A", "B", "D"]
    assert [t.name for t in task.inputs] == ["A", "B"]
    assert len(task.space) == len(task.template.space) > 1
    assert "complex" in repr(task) and task.key[:12] in repr(task)


def test_describe_is_json():
    task = matmul_bias()
    d = json.loads(json.dumps(task.describe()))
    assert d["key"] == task.key and d["template"] == "complex" and d["name"] == "C+D"
    assert d["inputs"] == [{"name": "A", "shape": [32, 16], "dtype": "float32"},
                           {"name": "B", "shape": [16, 24], "dtype": "float32"}]
    assert d["outputs"] == [{"name": "D", "shape": [32, 24], "dtype": "float32"}]
    assert d["flop"] == task.flop and d["space_size"] == len(task.space) and d["weight"] == 1


def test_weight_and_name():
    task = matmul_bias()
    heavy = task.with_weight(4)
    assert heavy.weight == 4 and heavy == task
    named = Task(task.outputs, name="dense", weight=2)
    assert named.name == "dense" and named.weight == 2
    A = placeholder((3,), name="x" * 40)
    long = Task(compute((3,), lambda i: A[i] + 1.0, name="y" * 70))
    assert len(long.name) == 60


@pytest.mark.parametrize("args, error", [
    (([],), ValueError), (("B",), TypeError), ((["B"],), TypeError), ((42,), TypeError),
])
def test_bad_outputs(args, error):
    with pytest.raises(error):
        Task(*args)


def test_duplicate_outputs_are_rejected():
    A = placeholder((3,), name="A")
    B = compute((3,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="distinct"):
        Task([B, B])


def test_placeholder_output_is_rejected():
    A = placeholder((3,), name="A")
    with pytest.raises(ValueError, match="placeholder"):
        Task(A)


@pytest.mark.parametrize("weight, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_weight(weight, error):
    A = placeholder((3,), name="A")
    with pytest.raises(error, match="weight"):
        Task(compute((3,), lambda i: A[i] + 1.0), weight=weight)


def test_bad_name():
    A = placeholder((3,), name="A")
    with pytest.raises(TypeError, match="name"):
        Task(compute((3,), lambda i: A[i] + 1.0), name=3)


def test_pickle_round_trip():
    task = matmul_bias().with_weight(3)
    again = pickle.loads(pickle.dumps(task))
    assert again == task and again.weight == 3 and again.name == task.name
    assert again.template_name == "complex" and len(again.space) == len(task.space)
    assert again.template.default_config() == task.template.default_config()


def test_unpickled_task_in_a_fresh_process_builds_correctly():
    # Make ids here much larger than a fresh process would reach by itself, so that a
    # collision between the unpickled IR's ids and ids made there would show.
    task = matmul_bias(junk=20000)
    assert _max_uid(task.outputs) > 20000
    code = (
        "import pickle, sys\n"
        "import numpy as np\n"
        "from tilefuse.tensorir.expr import next_uid\n"
        "from tilefuse.autotune.task import _max_uid, random_inputs\n"
        "task = pickle.loads(sys.stdin.buffer.read())\n"
        "assert next_uid() > _max_uid(task.outputs)\n"
        "for cfg in task.space.sample(3, seed=2):\n"
        "    a, b, d = random_inputs(task, 1)\n"
        "    task.template.build(cfg)(a, b, d)\n"
        "    assert np.allclose(d, a @ b + 1.0, rtol=1e-4, atol=1e-4), cfg\n"
        "print('ok')\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(task), capture_output=True, cwd=root)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == "ok"


def test_random_inputs_are_deterministic_and_shaped():
    task = matmul_bias()
    a, b, d = random_inputs(task, seed=3)
    again = random_inputs(task, seed=3)
    other = random_inputs(task, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip((a, b, d), again))
    assert not np.array_equal(a, other[0])
    assert a.shape == (32, 16) and b.shape == (16, 24) and d.shape == (32, 24)
    assert a.dtype == np.float32 and a.min() >= -1 and a.max() < 1 and a.std() > 0.3
    assert not d.any()
    for x in (a, b, d):
        assert x.flags.c_contiguous and x.flags.writeable and x.ctypes.data % 64 == 0


def test_random_inputs_for_int_bool_and_float64():
    I = placeholder((50,), "int32", name="I")
    F = placeholder((50,), "float64", name="F")
    M = placeholder((50,), "bool", name="M")
    out = compute((50,), lambda i: if_then_else(M[i], cast("float64", I[i]) + F[i], F[i]), name="O")
    arrays = random_inputs(Task(out), seed=0)
    by_dtype = {x.dtype.name: x for x in arrays[:-1]}
    assert set(by_dtype) == {"int32", "float64", "bool"}
    assert by_dtype["int32"].min() >= 0 and by_dtype["int32"].max() < 4 and len(set(by_dtype["int32"])) > 1
    assert by_dtype["bool"].any() and not by_dtype["bool"].all()
    assert arrays[-1].dtype == np.float64 and not arrays[-1].any()


def test_random_inputs_bad_arguments():
    with pytest.raises(TypeError, match="Task"):
        random_inputs("task")
    with pytest.raises(TypeError, match="seed"):
        random_inputs(matmul_bias(), seed=1.5)


def test_a_task_builds_for_its_target_and_keeps_it_through_pickling():
    import pickle

    from tilefuse.tensorir.runtime.target import Target
    A = placeholder((1000,), name="A")
    B = compute((1000,), lambda i: A[i] * 2.0, name="B")
    narrow = Target.of("haswell", "+avx2,+fma")
    task = Task(B, target=narrow)
    assert task.target == narrow and task.template.target == narrow
    assert task.template.default_config()["vector"] == 8
    again = pickle.loads(pickle.dumps(task))
    assert again.target == narrow and again.key == task.key == Task(B).key   # records add the target key apart
    assert Task(B).target == Target.host()
