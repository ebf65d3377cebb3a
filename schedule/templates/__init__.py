"""Schedule templates, one per operator class, whose knobs are the autotuner's search space.

``template_for(outputs)`` reads the compute DAG (its structure, or class-name tags) and picks:
injective, reduction, complex (complex-out-fusable), window (pooling, depthwise convolution)
or opaque.

Example:
    >>> from tilefuse.tensorir import placeholder, compute, reduce_axis, sum
    >>> A = placeholder((64, 32), name="A"); B = placeholder((32, 48), name="B")
    >>> r = reduce_axis((0, 32), name="r")
    >>> C = compute((64, 48), lambda i, j: sum(A[i, r] * B[r, j], axis=r), name="C")
    >>> t = template_for(C); t.name
    'complex'
"""
from __future__ import annotations

from .attention import AttentionTemplate
from .base import TEMPLATES, Template, template_for
from .complex import ComplexTemplate
from .dag import Dag, op_class
from .injective import InjectiveTemplate
from .opaque import OpaqueTemplate
from .reduction import ReductionTemplate
from .window import WindowTemplate

__all__ = ["template_for", "Template", "Dag", "op_class", "AttentionTemplate", "ComplexTemplate", "InjectiveTemplate",
           "OpaqueTemplate", "ReductionTemplate", "WindowTemplate", "TEMPLATES"]
