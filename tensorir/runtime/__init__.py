"""The runtime: the target, the native thread pool, compiled kernels (plain and prepacked)
and the one artifact format they are kept in."""
from .artifact import ArtifactError
from .kernel import Kernel
from .prepacked import PrepackedKernel
from .target import Target
from .threadpool import get_num_threads, set_num_threads

__all__ = ["ArtifactError", "Kernel", "PrepackedKernel", "Target", "get_num_threads", "set_num_threads"]
