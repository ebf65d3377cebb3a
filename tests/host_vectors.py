"""What the host's vector unit looks like, for tests that read generated code: the float32
lanes of its widest vectors and the name of those registers in x86 assembly (``zmm`` with
AVX-512, ``ymm`` with AVX/AVX2, ``xmm`` otherwise)."""
from tilefuse.tensorir.runtime.target import Target

HOST = Target.host()
LANES = HOST.lanes("float32")
REGISTER = {512: "zmm", 256: "ymm"}.get(HOST.vector_bits, "xmm")
