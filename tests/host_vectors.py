"""What the host's vector unit looks like, for tests that read generated code: the float32
lanes of its widest vectors and the name of those registers in x86 assembly (``zmm`` with
AVX-512, ``ymm`` with AVX/AVX2, ``xmm`` otherwise); and a feature LLVM knows that this host
lacks, preferring ones generated code never uses (AMD's and Intel's system instructions), so
that code compiled with it still runs here where a test needs it to."""
from tilefuse.tensorir.runtime.target import Target, known_features

HOST = Target.host()
LANES = HOST.lanes("float32")
REGISTER = {512: "zmm", 256: "ymm"}.get(HOST.vector_bits, "xmm")
_NEVER_GENERATED = ("clzero", "rdpru", "mwaitx", "lwp", "tbm", "amx-fp16", "amx-complex", "sse4a", "xop")
ABSENT_FEATURE = next((f for f in _NEVER_GENERATED + tuple(sorted(known_features()))
                       if f in known_features() and "+" + f not in HOST.features.split(",")), None)
