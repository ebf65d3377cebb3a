"""A saved session's file: saving over a file a loaded session maps leaves that session and
the new file correct (saves are atomic: a new inode takes the name, the old one lives on under
the map), a save that fails midway leaves the old file whole and no temporary file, and a
header edited with its checksum recomputed is refused naming the file. Whatever could die of
SIGBUS runs in a child process, so the suite cannot."""
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, InferenceSession, load_compiled  # noqa: E402
from tilefuse.graph_api import mapped_file, session as session_module  # noqa: E402
from tilefuse.tensorir.runtime import atomic_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def model(seed: int = 0, features: int = 64, classes: int = 300):
    """x[batch, features] -> MatMul, Add -> y: weights of a few pages, so that a file cut or
    rewritten under a map shows."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((features, classes)).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal(classes).astype("float32"), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])]
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CHILD = textwrap.dedent("""
    import sys, numpy as np
    from tilefuse.graph_api import InferenceSession, load_compiled
    case, model, path = sys.argv[1:4]
    x = {"x": np.linspace(-1, 1, 64, dtype="float32")[None]}
    session = InferenceSession(model)
    want = session.run(None, x)[0]            # batch 1 compiled
    session.save(path)
    loaded = load_compiled(path)
    assert np.array_equal(loaded.run(None, x)[0], want)
    if case == "save itself over its file":
        loaded.save(path)
    else:       # another session of the same model, with other shapes compiled, saved to the same path
        other = InferenceSession(model)
        other.run(None, {"x": np.ones((3, 64), "float32")})
        other.run(None, x)
        other.save(path)
    for who, got in (("the loaded session", loaded.run(None, x)[0]),
                     ("the file saved over it", load_compiled(path).run(None, x)[0])):
        if not np.array_equal(got, want):
            sys.exit(f"{who} computes {got.ravel()[:4]}..., not {want.ravel()[:4]}...")
    print("ok")
""")


@pytest.mark.parametrize("case", ["save itself over its file", "save another session over its file"])
def test_saving_over_the_file_a_loaded_session_maps_leaves_both_correct(tmp_path, case):
    onnx.save(model(), tmp_path / "dense.onnx")
    done = subprocess.run([sys.executable, "-c", CHILD, case, tmp_path / "dense.onnx", tmp_path / "dense.tfm"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])
    assert sorted(os.listdir(tmp_path)) == ["dense.onnx", "dense.tfm"]


def test_a_save_that_fails_midway_leaves_the_old_file_whole_and_no_temporary_file(tmp_path, monkeypatch):
    path, x = tmp_path / "dense.tfm", {"x": np.ones((1, 64), "float32")}
    first = InferenceSession(model(seed=1))
    want = first.run(None, x)[0]
    first.save(path)
    old = path.read_bytes()
    session = InferenceSession(model(seed=2))
    session.run(None, x)
    real = session_module.hashlib.sha256

    class FailingDigest:
        """sha256 whose third update (the file is partly written by then) fails as a full disk would."""
        def __init__(self):
            self.inner, self.updates = real(), 0

        def update(self, data):
            self.updates += 1
            if self.updates == 3:
                raise OSError(28, "No space left on device")
            self.inner.update(data)

        def digest(self):
            return self.inner.digest()

    monkeypatch.setattr(session_module, "hashlib", SimpleNamespace(sha256=FailingDigest))
    with pytest.raises(OSError, match="No space left"):
        session.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == old and os.listdir(tmp_path) == ["dense.tfm"]
    np.testing.assert_array_equal(load_compiled(path).run(None, x)[0], want)


def test_a_failed_fsync_or_rename_leaves_the_old_file_whole_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "data.bin"
    path.write_bytes(b"old")
    for name in ("fsync", "replace"):
        def fail(*args, **kwargs):
            raise OSError(5, f"Input/output error in {name}")
        with monkeypatch.context() as patch:
            patch.setattr(atomic_file.os, name, fail)
            with pytest.raises(OSError, match=name):
                with atomic_file.atomic_write(path) as f:
                    f.write(b"new, longer data")
        assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["data.bin"]


def test_an_atomic_write_gives_a_new_inode_with_the_old_mode_through_a_link(tmp_path):
    path, link = tmp_path / "data.bin", tmp_path / "link.bin"
    with atomic_file.atomic_write(path) as f:
        f.write(b"old")
    umask = os.umask(0o22)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask       # as open(path, "wb") would make it
    os.chmod(path, 0o640)
    link.symlink_to(path.name)
    before = os.stat(path)
    with open(path, "rb") as reader:
        with atomic_file.atomic_write(link) as f:
            f.write(b"new")
        assert reader.read() == b"old"          # the old inode is still there for whoever has it open
    after = os.stat(path)
    assert path.read_bytes() == b"new" and after.st_ino != before.st_ino and after.st_mode & 0o777 == 0o640
    assert link.is_symlink() and link.read_bytes() == b"new"


def _with_header(data: bytes, edit) -> bytes:
    """The saved file ``data`` with its header changed by ``edit``, padded so the sections
    after it stay aligned, and its checksum recomputed."""
    at = len(session_module.SAVE_MAGIC)
    version, size = struct.unpack_from("<IQ", data, at)
    header = json.loads(data[at + 12:at + 12 + size])
    edit(header)
    new = json.dumps(header).encode()
    new += b" " * (-(len(new) - size) % session_module.BUFFER_ALIGN)
    body = data[:at] + struct.pack("<IQ", version, len(new)) + new + data[at + 12 + size:-32]
    return body + hashlib.sha256(body).digest()


HEADER_EDITS = {
    "an output renamed": lambda h: h["outputs"][0].update(name="extra"),
    "an input renamed": lambda h: h["inputs"][0].update(name="extra"),
    "an extra input": lambda h: h["inputs"].append(dict(h["inputs"][0], name="x2")),
    "an unknown key in an input": lambda h: h["inputs"][0].update(extra=1),
    "an input without a name": lambda h: h["inputs"][0].pop("name"),
    "inputs not a list": lambda h: h.update(inputs={"extra": 1}),
    "an input not an object": lambda h: h.update(inputs=["extra"]),
    "outputs null": lambda h: h.update(outputs=None),
    "a shape not a list": lambda h: h["inputs"][0].update(shape="extra"),
    "a dim not an int or a name": lambda h: h["inputs"][0].update(shape=["batch", 64.5]),
    "a type not a string": lambda h: h["inputs"][0].update(type=3),
    "a triple not a string": lambda h: h["target"].update(triple=3),
    "another cpu": lambda h: h["target"].update(cpu="i386"),
    "no target": lambda h: h.pop("target"),
}


@pytest.mark.parametrize("edit", list(HEADER_EDITS))
def test_a_header_edited_with_its_checksum_recomputed_is_refused_naming_the_file(tmp_path, edit):
    path = tmp_path / "dense.tfm"
    InferenceSession(model()).save(path)
    bad = tmp_path / "edited.tfm"
    bad.write_bytes(_with_header(path.read_bytes(), HEADER_EDITS[edit]))
    with pytest.raises(GraphError, match=f"{bad}: corrupt header"):
        load_compiled(bad)


def test_weights_shared_by_compiled_shapes_are_written_once(tmp_path):
    """Three batch sizes of a model with 1.2 MB of weights: the file holds the model (to compile
    new shapes) and one copy of the packed weights, not one per shape (4.8 MB before)."""
    dense = model(seed=3, features=512, classes=600)
    weights = 4 * (512 * 600 + 600)
    session = InferenceSession(dense)
    feeds = {n: {"x": np.random.default_rng(n).standard_normal((n, 512)).astype("float32")} for n in (1, 4, 16)}
    want = {n: session.run(None, x)[0] for n, x in feeds.items()}
    path = tmp_path / "dense.tfm"
    session.save(path)
    assert path.stat().st_size < 2.6 * weights          # 2.16 now, 4.29 with a copy per shape
    loaded = load_compiled(path)
    assert loaded.compiled_shapes == [((1, 512),), ((4, 512),), ((16, 512),)]
    for n, x in feeds.items():
        np.testing.assert_array_equal(loaded.run(None, x)[0], want[n])


def _as_format_1(data: bytes) -> bytes:
    """A format-2 saved file written again as format 1 wrote it: each buffer where it is used."""
    magic, prefix = session_module.SAVE_MAGIC, session_module._PREFIX
    version, size = prefix.unpack_from(data, len(magic))
    assert version == 2
    start = len(magic) + prefix.size
    header, body = data[start:start + size], memoryview(data[:-32])
    payload, buffers = session_module._sections(body, start + size, 2)
    lengths = session_module._LENGTHS.pack(len(payload), len(buffers)) + \
        b"".join(session_module._LENGTH.pack(len(b)) for b in buffers)
    out = bytearray(magic + prefix.pack(1, size) + header + lengths + bytes(payload))
    for b in buffers:
        out += bytes(-len(out) % session_module.BUFFER_ALIGN) + bytes(b)
    return bytes(out + hashlib.sha256(out).digest())


def test_a_file_of_format_1_still_loads(tmp_path):
    session = InferenceSession(model(seed=4))
    x = {"x": np.ones((2, 64), "float32")}
    want = session.run(None, x)[0]
    session.save(tmp_path / "new.tfm")
    (tmp_path / "old.tfm").write_bytes(_as_format_1((tmp_path / "new.tfm").read_bytes()))
    np.testing.assert_array_equal(load_compiled(tmp_path / "old.tfm").run(None, x)[0], want)


IN_PLACE = textwrap.dedent("""
    import os, sys, time, numpy as np
    from tilefuse.graph_api import GraphError, InferenceSession, load_compiled
    case, model, path = sys.argv[1:4]
    x = {"x": np.linspace(-1, 1, 64, dtype="float32")[None]}
    session = InferenceSession(model)
    want = session.run(None, x)[0]
    session.save(path)
    if case.startswith("old"):          # older than a clock tick: mapped
        old = time.time() - 60
        os.utime(path, (old, old))
    loaded = load_compiled(path)
    assert np.array_equal(loaded.run(None, x)[0], want)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:        # in place: the same inode
        if case.endswith("truncate"):
            f.truncate(size // 3)
        else:
            f.seek(size // 2)
            f.write(b"\\xff" * 4096)
    try:
        got = loaded.run(None, x)[0]
    except GraphError as err:
        print("refused:", err)
        sys.exit(0)
    if not np.array_equal(got, want):
        sys.exit(f"wrong: {got.ravel()[:4]}, not {want.ravel()[:4]}")
    print("ok")
""")


@pytest.mark.parametrize("case", ["old file, truncate", "old file, overwrite", "new file, truncate",
                                  "new file, overwrite"])
def test_a_file_rewritten_in_place_under_a_loaded_session_gives_a_clean_error_or_right_results(tmp_path, case):
    """Mapped (an old file), the run after the rewrite is refused naming the file, never SIGBUS
    or NaNs; just saved (read, not mapped), the session runs on its own copy."""
    onnx.save(model(), tmp_path / "dense.onnx")
    done = subprocess.run([sys.executable, "-c", IN_PLACE, case, tmp_path / "dense.onnx", tmp_path / "dense.tfm"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    if case.startswith("old"):
        assert done.stdout.startswith(f"refused: {tmp_path / 'dense.tfm'} was rewritten in place"), done.stdout
    else:
        assert done.stdout.strip() == "ok"


def test_a_session_file_is_mapped_only_when_its_time_can_show_a_later_write(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(200)))
    fresh = mapped_file.SessionFile.open(str(path))
    old = os.path.getmtime(path) - 60
    os.utime(path, (old, old))
    held = mapped_file.SessionFile.open(str(path))
    assert not fresh.mapped and held.mapped and bytes(held.data) == bytes(fresh.data) == bytes(range(200))
    assert fresh.data.obj is not None and np.frombuffer(fresh.data, np.uint8).ctypes.data % mapped_file.ALIGN == 0
    held.check()
    os.utime(path, (old + 1, old + 1))      # touched: as a write in place would
    with pytest.raises(GraphError, match="rewritten in place"):
        held.check()
    fresh.check()                           # its own copy: nothing to watch
