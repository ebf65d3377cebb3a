"""``autotune cache info`` and ``autotune cache clear`` on the disk cache of compiled kernels."""
import json

from tilefuse.autotune.cli import main
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK
from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, build, compile_graph
from tilefuse.tensorir.runtime.disk_cache import DiskKernelCache
from tilefuse.tensorir.runtime.threadpool import ensure_runtime


def _fill(folder, monkeypatch):
    ensure_runtime()                        # the thread pool's code cached elsewhere: one kernel here
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(folder))
    x = LogicalTensor(0, DataType.f32, (3, 9)); y = LogicalTensor(1, DataType.f32, (3, 9))
    g = Graph(); g.add_op(Op(0, OpKind.Exp, [x], [y])); g.finalize()
    build.clear_memory_cache()
    compile_graph(g)
    build.clear_memory_cache()
    compile_graph(g)                       # a hit


def test_info_lists_the_entries_with_their_size_and_hits_and_clear_empties_the_cache(tmp_path, monkeypatch, capsys):
    _fill(tmp_path, monkeypatch)
    assert main(["cache", "info"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"kernel cache {tmp_path}: 1 entries" in out and ", 1 hits" in out and "last used" in out
    assert main(["cache", "info", "--json"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    assert data["folder"] == str(tmp_path) and [e["hits"] for e in data["entries"]] == [1]
    assert data["bytes"] == data["entries"][0]["bytes"] > 0
    assert main(["cache", "clear"]) == EXIT_OK
    assert "removed 1 entries" in capsys.readouterr().out and DiskKernelCache(tmp_path).entries() == []


def test_dir_names_another_cache(tmp_path, monkeypatch, capsys):
    _fill(tmp_path / "a", monkeypatch)
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "b"))
    assert main(["cache", "info", "--dir", str(tmp_path / "a")]) == EXIT_OK
    assert "1 entries" in capsys.readouterr().out


def test_bad_settings_exit_2_with_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("x")
    cases = [({"TILEFUSE_CACHE_DIR": "off"}, ["cache", "info"], "the kernel cache is off"),
             ({"TILEFUSE_CACHE_MAX_BYTES": "big"}, ["cache", "info"], "TILEFUSE_CACHE_MAX_BYTES must be"),
             ({}, ["cache", "clear", "--dir", str(tmp_path / "file")], "is not a folder"),
             ({}, ["cache"], "ACTION"), ({}, ["cache", "info", "--top", "0"], "--top")]
    for env, argv, message in cases:
        with monkeypatch.context() as m:
            for name, value in env.items():
                m.setenv(name, value)
            assert main(argv) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert message in err and err.startswith("autotune"), (argv, err)
        assert len(err.strip().splitlines()) <= 2          # the message, and argparse's usage line
