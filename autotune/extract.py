"""The tasks of a model: one per distinct workload among its compiled partitions.

``extract_tasks`` reads the partitions the compiler builds (``graph_api.pipeline.partition``:
the graph after its passes, layout planning included), so the same partition anywhere in the
graph is one task whose weight counts its occurrences, and a task's workload is the one
``compile_graph`` asks a ``ConfigSource`` for.

Example:
    >>> from tilefuse.graph_api import load_json
    >>> [(t.template_name, t.weight) for t in extract_tasks(load_json("examples/mlp.json"))]
    [('complex', 1), ('complex', 1), ('complex', 1), ('reduction', 1)]
"""
from __future__ import annotations

from tilefuse.graph_api.pipeline import partition

from .task import Task


def extract_tasks(graph, policy: str = "fusion") -> list[Task]:
    """The distinct tasks of ``graph``'s supported partitions, in order of first occurrence,
    each weighted by how many partitions share its workload key.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> t = [LogicalTensor(i, DataType.f32, (64,) if i < 4 else (8,)) for i in range(6)]
        >>> g = Graph()
        >>> for k, (x, y) in enumerate([(0, 1), (2, 3), (4, 5)]):    # two ReLUs of 64, one of 8
        ...     _ = g.add_op(Op(k, OpKind.ReLU, [t[x]], [t[y]]))
        >>> g.finalize(); [t.weight for t in extract_tasks(g)]
        [2, 1]
    """
    return [task.with_weight(len(indices)) if len(indices) > 1 else task
            for task, indices in tasks_by_workload(graph, policy).values()]


def tasks_by_workload(graph, policy: str = "fusion") -> dict:
    """{workload key: (the Task of its first partition, the indices of its partitions among
    the compiler's, ``graph_api.pipeline.partition(graph, policy).partitions``, which
    ``CompiledGraph.step_times`` reports by)} for the supported partitions, in order of first
    occurrence.

    Example:
        >>> from tilefuse.graph_api import load_json
        >>> [indices for _, indices in tasks_by_workload(load_json("examples/mlp.json")).values()]
        [[0], [1], [2], [3]]
    """
    found: dict = {}
    for index, part in enumerate(partition(graph, policy).partitions):
        if part.is_supported():
            task = Task(part.compute_dag())
            found.setdefault(task.key, (task, []))[1].append(index)
    return found
