"""The tasks of a model: one per distinct workload among its compiled partitions.

``extract_tasks`` takes any graph whose ``get_partitions()`` gives partitions with
``is_supported()`` and ``compute_dag()`` (a ``graph_api.Graph``; autotune does not import the
graph layer), so the same partition anywhere in the graph is one task whose weight counts its
occurrences.

Example:
    >>> from tilefuse.graph_api.onnx import from_onnx
    >>> tasks = extract_tasks(from_onnx("examples/transformer_encoder.onnx"))
    >>> [(t.name, t.weight) for t in tasks[:3]]         # 7 partitions share the first workload
    [('matmul+add', 7), ('reshape+transpose', 4), ('reshape+transpose', 2)]
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
        >>> from tilefuse.tensorir import placeholder, compute
        >>> def relu(n):
        ...     A = placeholder((n,), name="A"); return [compute((n,), lambda i: A[i] * 2.0, name="B")]
        >>> tasks = extract_tasks(_Graph([_Partition(relu(64)), _Partition(relu(64)), _Partition(relu(8))]))
        >>> [t.weight for t in tasks]
        [2, 1]
    """
    return [task.with_weight(len(indices)) if len(indices) > 1 else task
            for task, indices in tasks_by_workload(graph, policy).values()]


def tasks_by_workload(graph, policy: str = "fusion") -> dict:
    """{workload key: (the Task of its first partition, the indices of its partitions in
    ``graph.get_partitions(policy)``)} for the supported partitions, in order of first occurrence.

    Example:
        >>> from tilefuse.graph_api.onnx import from_onnx
        >>> found = tasks_by_workload(from_onnx("examples/transformer_encoder.onnx"))
        >>> task, indices = next(iter(found.values()))
        >>> task.name, indices              # the partitions of the graph with this workload
        ('matmul+add', [0, 2, 4, 15, 17, 19, 25])
    """
    found: dict = {}
    for index, partition in enumerate(graph.get_partitions(policy)):
        if partition.is_supported():
            task = Task(partition.compute_dag())
            found.setdefault(task.key, (task, []))[1].append(index)
    return found
