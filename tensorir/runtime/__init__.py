"""The runtime: the host target, the native thread pool and compiled kernels."""
from .kernel import Kernel, load_kernel
from .threadpool import get_num_threads, set_num_threads

__all__ = ["Kernel", "load_kernel", "get_num_threads", "set_num_threads"]
