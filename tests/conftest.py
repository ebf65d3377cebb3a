"""Test settings shared by the whole suite."""
from hypothesis import settings

# Every example compiles a kernel (tens of milliseconds): no per-example deadline, and a fixed
# derandomised search so CI runs are reproducible.
settings.register_profile("tilefuse", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("tilefuse")
