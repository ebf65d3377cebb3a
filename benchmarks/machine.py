"""Print what this machine can do: the FMA peak and the copy bandwidth the benchmarks report
kernels against (measured by ``tilefuse.graph_api.machine``).

Run: ``python benchmarks/machine.py``.
"""
from tilefuse.graph_api.machine import copy_bandwidth_gbs, fma_peak_gflops
from tilefuse.tensorir.runtime.target import Target
from tilefuse.tensorir.runtime.threadpool import get_num_threads

__all__ = ["copy_bandwidth_gbs", "fma_peak_gflops"]

if __name__ == "__main__":
    print(f"FMA peak: {fma_peak_gflops():.1f} GFLOPS on {get_num_threads()} thread(s) "
          f"({Target.host().cpu}); copy: {copy_bandwidth_gbs():.1f} GB/s")
