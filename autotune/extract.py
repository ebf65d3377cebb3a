"""The tasks of a model: one per distinct workload among its compiled partitions.

``extract_tasks`` takes any graph whose ``get_partitions()`` gives partitions with
``is_supported()`` and ``compute_dag()`` (a ``graph_api.Graph``; autotune does not import the
graph layer), so the same partition anywhere in the graph is one task whose weight counts its
occurrences.

Example:
    >>> # tasks = extract_tasks(graph_api.load_json("examples/mlp.json"))
    >>> # [(t.name, t.weight) for t in tasks]
"""
from __future__ import annotations

from .task import Task


def extract_tasks(graph, policy: str = "fusion") -> list[Task]:
    """The distinct tasks of ``graph``'s supported partitions, in order of first occurrence,
    each weighted by how many partitions share its workload key.

    Example:
        >>> class _Partition:
        ...     def __init__(self, dag): self.dag = dag
        ...     def is_supported(self): return True
        ...     def compute_dag(self): return self.dag
        >>> class _Graph:
        ...     def __init__(self, parts): self.parts = parts
        ...     def get_partitions(self, policy): return self.parts
        >>> from tensorir import placeholder, compute
        >>> def relu(n):
        ...     A = placeholder((n,), name="A"); return [compute((n,), lambda i: A[i] * 2.0, name="B")]
        >>> tasks = extract_tasks(_Graph([_Partition(relu(64)), _Partition(relu(64)), _Partition(relu(8))]))
        >>> [t.weight for t in tasks]
        [2, 1]
    """
    found: dict[str, Task] = {}
    for partition in graph.get_partitions(policy):
        if not partition.is_supported():
            continue
        task = Task(partition.compute_dag())
        seen = found.get(task.key)
        found[task.key] = task if seen is None else seen.with_weight(seen.weight + 1)
    return list(found.values())
