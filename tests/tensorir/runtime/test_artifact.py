"""The kernel artifact format: plain and prepacked kernels with metadata round trip; anything
else (junk, another version, another target, truncated or altered bytes) is refused clearly."""
import hashlib
import json
import struct

import numpy as np
import pytest

from tilefuse.schedule import create_schedule, build, template_for
from tilefuse.schedule.hoist import build_prepacked
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.runtime.artifact import MAGIC, VERSION, ArtifactError, dumps, load, loads, save
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel


@pytest.fixture(scope="module")
def plain():
    A = placeholder((37,), name="A")
    B = compute((37,), lambda i: A[i] * 3.0, name="B")
    return build(create_schedule(B), [A, B])


@pytest.fixture(scope="module")
def prepacked():
    A = placeholder((7, 13), name="A"); W = placeholder((13, 37), name="W", constant=True)
    r = reduce_axis((0, 13), name="r")
    C = compute((7, 37), lambda i, j: rsum(A[i, r] * W[r, j], axis=r), name="C")
    t = template_for(C)
    f = build_prepacked(t.apply(t.default_config()), t.args, constants=[W])
    assert isinstance(f, PrepackedKernel)
    return f


def _rewrite(blob, edit_header):
    """The artifact with its header changed by ``edit_header`` and a valid checksum."""
    at = len(MAGIC)
    version, size = struct.unpack_from("<IQ", blob, at)
    header = json.loads(blob[at + 12:at + 12 + size])
    edit_header(header)
    new = json.dumps(header).encode()
    body = MAGIC + struct.pack("<IQ", version, len(new)) + new + blob[at + 12 + size:-32]
    return body + hashlib.sha256(body).digest()


def test_plain_kernel_and_metadata_round_trip(plain, tmp_path):
    kernel, meta = loads(dumps(plain, {"shapes": [[37]]}))
    a = np.arange(37, dtype="float32"); b = np.zeros(37, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, 3 * a)
    assert meta == {"shapes": [[37]]} and kernel.args == plain.args
    save(plain, tmp_path / "k.tfk")
    again, meta = load(tmp_path / "k.tfk")
    assert meta == {} and again.source("llvm") == plain.source("llvm")


def test_prepacked_kernel_round_trips_with_its_wiring(prepacked):
    again, _ = loads(dumps(prepacked))
    assert isinstance(again, PrepackedKernel)
    assert again.main_args == prepacked.main_args and [p for _, p in again.packs] == [p for _, p in prepacked.packs]
    a = np.random.default_rng(0).standard_normal((7, 13)).astype("float32")
    w = np.random.default_rng(1).standard_normal((13, 37)).astype("float32")
    c = np.zeros((7, 37), "float32")
    again(a, w, c)
    np.testing.assert_allclose(c, a @ w, rtol=1e-5, atol=1e-5)


def test_junk_truncated_and_altered_bytes_are_refused(plain, tmp_path):
    blob = dumps(plain)
    with pytest.raises(ArtifactError, match="k.tfk: not a tilefuse kernel"):
        (tmp_path / "k.tfk").write_bytes(b"hello"); load(tmp_path / "k.tfk")
    for cut in (len(blob) - 1, len(blob) // 2, len(MAGIC) + 3):
        with pytest.raises(ArtifactError, match="truncated"):
            loads(blob[:cut])
    for at in (len(MAGIC) + 20, len(blob) // 2, len(blob) - 40):
        flipped = bytearray(blob); flipped[at] ^= 0x40
        with pytest.raises(ArtifactError, match="checksum mismatch"):
            loads(bytes(flipped))


def test_another_version_and_another_target_are_refused(plain):
    blob = dumps(plain)
    old = blob[:len(MAGIC)] + struct.pack("<I", VERSION - 1) + blob[len(MAGIC) + 4:]
    with pytest.raises(ArtifactError, match=f"format version {VERSION - 1}; this tilefuse reads version {VERSION}"):
        loads(old, source="cached kernel")

    def key_not_matching(header):
        header["target"]["key"] = "0" * 16
    with pytest.raises(ArtifactError, match="corrupt target .*does not match"):
        loads(_rewrite(blob, key_not_matching))
    with pytest.raises(ArtifactError, match="corrupt kernel header"):
        loads(_rewrite(blob, lambda header: header.pop("kernels")))


def test_only_kernels_are_written(plain):
    with pytest.raises(TypeError, match="Kernel or a PrepackedKernel"):
        dumps(object())


@pytest.mark.parametrize("entry", [{"kind": "panels", "shape": [13], "axis": 0},      # no dtype, no block
                                   {"kind": "sorcery", "shape": [13]},                  # no such pack
                                   {"shape": [13], "dtype": "float32", "axis": 0, "block": 4},   # no kind
                                   {"kind": "winograd_filters", "shape": [3, 3, 2, 2], "dtype": "float32",
                                    "weights_format": "XIO", "m": 5, "block": 4}])      # no such tile size
def test_a_prepacked_kernel_with_damaged_numpy_pack_wiring_is_refused(prepacked, entry):
    def damage(header):
        header["prepacked"]["numpy_packs"] = [entry]
    with pytest.raises(ArtifactError, match="corrupt prepacked wiring"):
        loads(_rewrite(dumps(prepacked), damage))


# ---------------------------------------------------------------- code for other targets
from tilefuse.tensorir.runtime import artifact  # noqa: E402
from tilefuse.tensorir.runtime.target import Target, TargetError  # noqa: E402
from host_vectors import ABSENT_FEATURE  # noqa: E402


def _scaled(target):
    A = placeholder((64,), name="A"); B = compute((64,), lambda i: A[i] * 3.0, name="B")
    s = create_schedule(B)
    _, lanes = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(lanes)
    return build(s, [A, B], target=target)


@pytest.mark.skipif(not Target.host().triple.startswith("x86_64"), reason="an x86-64 target")
def test_avx512_code_is_built_and_saved_on_any_x86_host_and_runs_only_where_avx512_is(tmp_path):
    kernel = _scaled("llvm -mcpu=skylake-avx512")
    assert "zmm" in kernel.source("asm") and kernel.target == Target.parse("llvm -mcpu=skylake-avx512")
    save(kernel, tmp_path / "avx512.tfk")
    missing = kernel.target.cannot_run_here()
    if missing:                                     # an AVX2 host: saved, refused, never run
        assert "avx512f" in missing
        with pytest.raises(ArtifactError, match="avx512.tfk: compiled for CPU skylake-avx512 with features this "
                                                "host .* lacks: .*avx512f"):
            load(tmp_path / "avx512.tfk")
        return
    again, _ = load(tmp_path / "avx512.tfk")
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    again(a, b)
    assert again.target == kernel.target and np.array_equal(b, a * 3)


@pytest.mark.skipif(ABSENT_FEATURE is None, reason="the host has every feature LLVM knows")
def test_code_for_a_feature_the_host_lacks_is_never_mapped_or_run(monkeypatch):
    target = Target.parse(f"llvm -mcpu=native -mattr=+{ABSENT_FEATURE}")
    kernel = _scaled(target)
    assert kernel.unchecked_entry is None
    with pytest.raises(TargetError, match=f"kernel main cannot run here: compiled for CPU .* lacks: {ABSENT_FEATURE}"):
        kernel(np.zeros(64, "float32"), np.zeros(64, "float32"))
    blob = dumps(kernel, {"for": "elsewhere"})

    def mapped(*args):
        raise AssertionError("code for another target was mapped")
    monkeypatch.setattr(artifact, "Kernel", mapped)
    with pytest.raises(ArtifactError, match=f"^kernel artifact: compiled for CPU {target.cpu} with features this host "
                                            f"\\({Target.host().cpu}\\) lacks: {ABSENT_FEATURE}; it cannot run here"):
        loads(blob)


def test_the_artifact_carries_the_target_of_its_kernels(plain, prepacked):
    for kernel in (plain, prepacked):
        again, _ = loads(dumps(kernel))
        assert again.kernels[0].target == Target.host() if isinstance(again, PrepackedKernel) else \
            again.target == Target.host()
    narrow = _scaled("llvm -mcpu=x86-64") if Target.host().triple.startswith("x86_64") else None
    if narrow is not None:
        again, _ = loads(dumps(narrow))
        assert again.target == Target.parse("llvm -mcpu=x86-64") and "zmm" not in again.source("asm")


def test_saving_over_an_artifact_is_atomic(plain, prepacked, tmp_path, monkeypatch):
    path = tmp_path / "k.tfk"
    save(plain, path)
    old = path.read_bytes()
    with open(path, "rb") as reader:            # a reader of the old file keeps it whole
        save(prepacked, path)
        assert reader.read() == old
    assert isinstance(load(path)[0], PrepackedKernel)
    save(plain, path)
    from tilefuse.tensorir.runtime import atomic_file

    def full_disk(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(atomic_file.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save(prepacked, path)
    assert path.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["k.tfk"]
