"""Passes over the loop IR: plain functions from a statement to a new statement."""
from .loop_partition import partition_loops
from .simplify_stmt import simplify_stmt

__all__ = ["partition_loops", "simplify_stmt"]
