"""Passes over the loop IR: plain functions from a statement to a new statement."""
from .loop_partition import partition_loops
from .outline_parallel import outline_parallel_loops
from .simplify_stmt import simplify_stmt
from .unroll import unroll_loops
from .vectorize import vectorize_loops

__all__ = ["outline_parallel_loops", "partition_loops", "simplify_stmt", "unroll_loops", "vectorize_loops"]
