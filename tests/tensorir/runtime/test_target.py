"""Target: vector widths from the features, lanes per data type, stable keys, the host."""
import llvmlite.binding as llvm
import pytest

from tilefuse.tensorir.runtime.target import Target, cached_target_machine, target_key


@pytest.mark.parametrize("features, bits", [
    ("+avx512f,+avx2,+fma", 512), ("+avx2,+fma,-avx512f", 256), ("+avx", 256), ("+sse2,+sse4.1", 128),
    ("+neon,+fp-armv8", 128), ("", 128),
])
def test_vector_width_comes_from_the_enabled_features(features, bits):
    assert Target.of("some-cpu", features).vector_bits == bits


@pytest.mark.parametrize("dtype, lanes", [("float32", 8), ("int32", 8), ("float64", 4), ("int64", 4),
                                          ("int8", 16), ("uint8", 16), ("bool", 16)])
def test_lanes_fill_a_vector(dtype, lanes):
    assert Target.of("haswell", "+avx2,+fma").lanes(dtype) == lanes
    assert Target.of("skx", "+avx512f").lanes(dtype) == 2 * lanes


def test_keys_ignore_order_and_disabled_features_but_codegen_keeps_them():
    a = Target.of("znver4", "+fma,+avx2,-avx512fp16")
    b = Target.of("znver4", "+avx2,+fma")
    assert a.key == b.key == target_key("znver4", "+avx2,+fma")
    assert a.disabled == "-avx512fp16" and a != b
    with pytest.raises(ValueError, match="not normalised"):
        Target("znver4", "+fma,+avx2", target_key("znver4", "+avx2,+fma"))
    with pytest.raises(ValueError, match="does not match"):
        Target("znver4", "+avx2", "0" * 16)


def test_the_host_target_generates_for_this_process():
    host = Target.host()
    assert host is Target.host() and host.cpu == llvm.get_host_cpu_name()
    assert cached_target_machine(host).triple == llvm.get_process_triple()
    assert host.lanes("float32") * 32 == host.vector_bits


def test_templates_take_their_lanes_from_the_target():
    from tilefuse.schedule.templates import template_for
    from tilefuse.tensorir import compute, placeholder
    A = placeholder((1000,), name="A")
    B = compute((1000,), lambda i: A[i] * 2.0, name="B")
    narrow = template_for(B, Target.of("haswell", "+avx2,+fma"))
    wide = template_for(B, Target.of("skx", "+avx512f,+avx2"))
    assert narrow.default_config()["vector"] == 8 and wide.default_config()["vector"] == 16
    sse = template_for(B, Target.of("nehalem", "+sse4.2"))
    assert sse.default_config()["vector"] == 4     # a point of its space


# ---------------------------------------------------------------- naming targets
from tilefuse.tensorir.runtime.target import (CPU_FEATURES, TargetError, as_target,  # noqa: E402
                                              implied_closure, known_features)
from host_vectors import ABSENT_FEATURE  # noqa: E402

x86_only = pytest.mark.skipif(not Target.host().triple.startswith("x86_64"), reason="CPU names are x86-64 ones")


@x86_only
@pytest.mark.parametrize("spec, bits, f32_lanes", [
    ("llvm -mcpu=x86-64", 128, 4), ("llvm -mcpu=haswell", 256, 8), ("llvm -mcpu=znver3", 256, 8),
    ("llvm -mcpu=skylake-avx512", 512, 16), ("llvm -mcpu=znver4", 512, 16), ("llvm -mcpu=x86-64-v4", 512, 16),
    ("llvm -mcpu=skylake-avx512 -mattr=-avx512f", 256, 8), ("llvm -mcpu=haswell -mattr=+avx512bw", 512, 16),
])
def test_a_named_target_has_its_cpus_features_and_vector_width(spec, bits, f32_lanes):
    t = Target.parse(spec)
    assert (t.vector_bits, t.lanes("float32"), t.lanes("float64")) == (bits, f32_lanes, f32_lanes // 2)
    enabled = {f[1:] for f in t.features.split(",")}
    assert enabled == implied_closure(enabled) and enabled <= known_features()
    # every other feature LLVM knows is off, so the code uses exactly these
    assert {f[1:] for f in t.disabled.split(",")} == known_features() - enabled
    assert Target.parse(str(t)) == t and as_target(spec) == t


@x86_only
def test_mattr_adds_what_a_feature_implies_and_removes_what_needs_it():
    plus = Target.parse("llvm -mcpu=haswell -mattr=+avx512bw")
    assert {"+avx512bw", "+avx512f"} <= set(plus.features.split(","))
    minus = Target.parse("llvm -mcpu=skylake-avx512 -mattr=-avx2")
    assert not {"+avx2", "+avx512f", "+avx512bw"} & set(minus.features.split(",")) and minus.vector_bits == 256
    assert str(minus) == "llvm -mcpu=skylake-avx512 -mattr=-avx2"


@x86_only
def test_every_named_cpu_is_one_llvm_knows(capfd):
    for cpu in CPU_FEATURES:
        Target.parse(f"llvm -mcpu={cpu}").target_machine()
    assert "not a recognized" not in capfd.readouterr().err


def test_the_host_is_llvm_alone_or_native():
    assert Target.parse("llvm") is Target.host() is Target.parse("llvm -mcpu=native") is as_target(None)
    narrower = Target.parse("llvm -mcpu=native -mattr=-avx512f")
    assert narrower.cpu == Target.host().cpu and "+avx512f" not in narrower.features.split(",")


@pytest.mark.parametrize("spec, message", [
    ("llvm -mcpu=skylake-avx51", "unknown CPU 'skylake-avx51'; did you mean skylake-avx512"),
    ("llvm -mcpu=pentium9", "unknown CPU 'pentium9'; known: x86-64, "),
    ("skylake-avx512", "a target is written 'llvm .*; write 'llvm -mcpu=skylake-avx512'"),
    ("", "a target is written"), ("cuda", "a target is written"),
    ("llvm -mcpu=haswell -O3", "unexpected '-O3'"), ("llvm -mcpu=haswell -mcpu=znver4", "unexpected '-mcpu=znver4'"),
    ("llvm -mattr=+warp-drive", "unknown feature '\\+warp-drive'"), ("llvm -mattr=avx2", "unknown feature 'avx2'"),
])
def test_a_target_that_cannot_be_named_is_refused_saying_why(spec, message):
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)
    with pytest.raises(TypeError, match="a Target, a str"):
        as_target(512)


@pytest.mark.skipif(ABSENT_FEATURE is None, reason="the host has every feature LLVM knows")
def test_code_for_features_the_host_lacks_cannot_run_here_and_the_reason_names_them():
    host = Target.host()
    assert host.cannot_run_here() is None and host.missing_on(host) == ()
    beyond = Target.of(host.cpu, f"{host.features},+{ABSENT_FEATURE}")
    assert beyond.missing_on(host) == (ABSENT_FEATURE,)
    assert beyond.cannot_run_here() == (f"compiled for CPU {host.cpu} with features this host ({host.cpu}) "
                                        f"lacks: {ABSENT_FEATURE}")
    foreign = Target.of("cortex-a72", "+neon", "aarch64-unknown-linux-gnu")
    assert foreign.cannot_run_here() == f"compiled for aarch64-unknown-linux-gnu; this host is {host.triple}" \
        or host.triple.startswith("aarch64")
