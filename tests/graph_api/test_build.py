"""The compile's kernel caches: the disk cache under every compile, read by other processes."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, build, compile_graph
from tilefuse.tensorir.runtime import kernel_cache
from tilefuse.tensorir.runtime.disk_cache import DiskKernelCache, KernelCacheError
from tilefuse.tensorir.runtime.threadpool import ensure_runtime

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "resnet_block.onnx"

# A program compiling the example model and printing its output's digest and what it built;
# with "cached-only", building any kernel raises, so every kernel must come from a cache.
PROGRAM = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    from tilefuse.graph_api import InferenceSession, build
    built = []
    real = build.KernelJob.build
    def counting(job):
        if sys.argv[2] == "cached-only":
            raise AssertionError("built a kernel")
        built.append(job.signature)
        return real(job)
    build.KernelJob.build = counting
    build._build_in_workers = lambda jobs, workers, bar: [None] * len(jobs)
    sess = InferenceSession(sys.argv[1])
    x = sess.get_inputs()[0]
    (y,) = sess.run(None, {x.name: np.linspace(-1, 1, int(np.prod(x.shape)), dtype="float32").reshape(x.shape)})
    print(json.dumps({"sum": float(np.abs(y).sum()), "built": len(built), "tqdm": "tqdm" in sys.modules}))
""")


def _run(cache_dir, mode="build", env_extra=None):
    env = {**__import__("os").environ, "TILEFUSE_CACHE_DIR": str(cache_dir), **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-c", PROGRAM, str(MODEL), mode], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_second_process_reads_every_kernel_from_the_disk_cache(tmp_path):
    first = _result(_run(tmp_path))
    assert first["built"] > 0
    second = _result(_run(tmp_path, "cached-only"))
    assert second["sum"] == first["sum"]
    assert first["tqdm"] and not second["tqdm"]          # no bar, nor its import, when nothing is built
    # and the thread pool's code, the kernel sequence's (runtime/kernel_sequence.py) and the
    # host's description (target._host_facts)
    assert len(DiskKernelCache(tmp_path).entries()) == first["built"] + 3


def test_two_processes_filling_one_cache_at_once_both_succeed_and_leave_it_whole(tmp_path):
    a, b = _run(tmp_path), _run(tmp_path)
    results = [_result(a), _result(b)]
    assert results[0]["sum"] == results[1]["sum"]
    assert _result(_run(tmp_path, "cached-only"))["sum"] == results[0]["sum"]
    assert not [p for p in tmp_path.rglob("*.tmp")]          # no half-written file left


def test_with_the_cache_off_nothing_is_written_and_each_process_builds(tmp_path, monkeypatch):
    off = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert _result(_run("off", env_extra=off))["built"] > 0
    assert list(tmp_path.rglob("*")) == []
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "off")
    first = DiskKernelCache(tmp_path / "first")
    assert build.kernel_caches([]) == [] and build.kernel_caches([], first) == [first]


def _graph():
    x = LogicalTensor(0, DataType.f32, (5, 37)); y = LogicalTensor(1, DataType.f32, (5, 37))
    g = Graph(); g.add_op(Op(0, OpKind.Tanh, [x], [y])); g.finalize()
    return g


def _entries_of_a_compile(monkeypatch, folder):
    ensure_runtime()                        # the thread pool's code cached elsewhere: only the kernel here
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(folder))
    build.clear_memory_cache()
    x = np.linspace(-3, 3, 5 * 37, dtype=np.float32).reshape(5, 37)
    assert np.allclose(compile_graph(_graph()).run({0: x})[1], np.tanh(x), atol=1e-6)
    return DiskKernelCache(folder).entries()


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "another target's kernel under this key"])
def test_a_compile_rebuilds_and_replaces_an_unusable_entry_with_a_warning(tmp_path, monkeypatch, damage):
    (entry,) = _entries_of_a_compile(monkeypatch, tmp_path)
    cache = DiskKernelCache(tmp_path)
    path = cache.path_of(entry.key)
    good = path.read_bytes()
    if damage == "flip a byte":
        path.write_bytes(good[:200] + bytes([good[200] ^ 0x40]) + good[201:])
    elif damage == "truncate":
        path.write_bytes(good[:len(good) // 2])
    else:       # a kernel compiled for another CPU, put under this kernel's key
        other = tmp_path / "other"
        monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(other))
        build.clear_memory_cache()
        compile_graph(_graph(), target="llvm -mcpu=sapphirerapids")
        (foreign,) = DiskKernelCache(other).entries()
        cache.cache_kernel(entry.key, DiskKernelCache(other).cached_kernel(foreign.key))
    with pytest.warns(UserWarning, match="damaged|cannot be used here"):
        (again,) = _entries_of_a_compile(monkeypatch, tmp_path)
    assert again.key == entry.key and path.read_bytes() == good


def test_a_kernel_key_changes_with_the_compilers_code(monkeypatch):
    before = kernel_cache.cache_key(("tanh", 5))
    monkeypatch.setattr(kernel_cache, "code_fingerprint", lambda: "edited")
    assert kernel_cache.cache_key(("tanh", 5)) != before


def test_a_bad_cache_bound_is_refused_at_compile(monkeypatch):
    monkeypatch.setenv("TILEFUSE_CACHE_MAX_BYTES", "a lot")
    with pytest.raises(KernelCacheError, match="TILEFUSE_CACHE_MAX_BYTES"):
        compile_graph(_graph())


def test_a_kernel_cached_for_another_target_is_never_read_for_this_one(tmp_path, monkeypatch):
    ensure_runtime()
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    build.clear_memory_cache()
    compile_graph(_graph(), target="llvm -mcpu=sapphirerapids")
    (other,) = DiskKernelCache(tmp_path).entries()
    here = _entries_of_a_compile(monkeypatch, tmp_path)
    assert len(here) == 2 and other.key in {e.key for e in here}
    assert next(e for e in here if e.key == other.key).hits == 0
