"""Schedule templates, one per operator class, whose knobs are the autotuner's search space.

``template_for(outputs)`` reads the compute DAG (its structure, or class-name tags) and picks:
injective, reduction, complex (complex-out-fusable) or opaque.

Example:
    >>> from tensorir import placeholder, compute, reduce_axis, sum
    >>> A = placeholder((64, 32), name="A"); B = placeholder((32, 48), name="B")
    >>> r = reduce_axis((0, 32), name="r")
    >>> C = compute((64, 48), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
    >>> t = template_for(C); t.name
    'complex'
"""
from __future__ import annotations

from tensorir.errors import Unsupported
from tensorir.tensor import Tensor

from .base import Template
from .complex import ComplexTemplate
from .dag import Dag, op_class
from .injective import InjectiveTemplate
from .opaque import OpaqueTemplate
from .reduction import ReductionTemplate

TEMPLATES = {"injective": InjectiveTemplate, "reduction": ReductionTemplate,
             "complex": ComplexTemplate, "opaque": OpaqueTemplate}


def template_for(outputs) -> Template:
    """The template for the DAG under ``outputs`` (a tensor or a list of them).

    Example:
        >>> from tensorir import placeholder, compute
        >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] + 1.0, name="B")
        >>> template_for(B).name
        'injective'
    """
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    dag = Dag.of(outputs)
    kind = dag.kind()
    try:
        return TEMPLATES[kind](dag)
    except Unsupported:           # the DAG has the class but not a shape the template handles
        return OpaqueTemplate(dag)


__all__ = ["template_for", "Template", "Dag", "op_class", "ComplexTemplate", "InjectiveTemplate",
           "OpaqueTemplate", "ReductionTemplate", "TEMPLATES"]
