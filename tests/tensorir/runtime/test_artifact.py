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

    def other_cpu(header):
        header["target"] = {"cpu": "other", "features": "+sse2", "key": "0" * 16}
    with pytest.raises(ArtifactError, match="compiled for CPU other with other features"):
        loads(_rewrite(blob, other_cpu))
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
