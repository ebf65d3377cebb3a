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
