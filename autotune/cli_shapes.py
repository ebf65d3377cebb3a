"""``--shape`` and ``--batch``: the input shapes a command compiles an ONNX model for.

Most exported models have a symbolic batch (or sequence) dim; tilefuse compiles static shapes,
so a command that compiles a model takes them on the command line: ``--shape NAME=1x3x224x224``
(repeatable; a model with one data input also takes ``--shape 1x3x224x224``) gives an input's
whole shape, and ``--batch N`` binds the symbolic first dim of every input that ``--shape``
does not name. A shape that names no input, has the wrong rank or contradicts a static dim of
the model, a ``--batch`` with no symbolic first dim to bind, and a symbolic dim left unbound
are each a BadInput (one line, exit 2).

Example:
    >>> parse_shape("x=1x3x224x224"), parse_shape("2x16")
    (('x', (1, 3, 224, 224)), (None, (2, 16)))
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    >>> ShapeRequest(batch=4).bind(model, "m.onnx")
    {'x': (4, 16)}
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from .cli_io import BadInput

_DIMS = re.compile(r"\d+(x\d+)*")


def parse_shape(text: str) -> tuple:
    """(input name or None, dims) of a ``--shape`` value: ``NAME=1x3x224x224`` or
    ``1x3x224x224``; anything else is a BadInput.

    Example:
        >>> parse_shape("input_ids=1x128")
        ('input_ids', (1, 128))
        >>> parse_shape("x=1x?x3")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: --shape 'x=1x?x3': the dims must be whole numbers of at least 1 joined by x, as in x=1x3x224x224
    """
    name, _, dims = text.rpartition("=")
    compact = dims.strip().lower()
    if (_, name) == ("=", "") or not _DIMS.fullmatch(compact) or any(int(d) < 1 for d in compact.split("x")):
        example = f"{name or 'NAME'}=1x3x224x224"
        raise BadInput(f"--shape {text!r}: the dims must be whole numbers of at least 1 joined by x, as in {example}")
    return (name.strip() or None), tuple(int(d) for d in compact.split("x"))


def _declared(value_info) -> list | None:
    """The declared dims of a graph input: an int, or a str for a symbolic one ('?' unnamed);
    None when the model gives no shape (an unknown rank)."""
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor.shape.dim]


def _text(dims) -> str:
    return "x".join(str(d) for d in dims) if dims else "(a scalar)"


@dataclass(frozen=True)
class ShapeRequest:
    """What ``--shape`` and ``--batch`` asked for: ``shapes`` the ``--shape`` values as given,
    ``batch`` the ``--batch`` number (or None).

    Example:
        >>> ShapeRequest(("x=2x3",)).named()
        {'x': (2, 3)}
    """
    shapes: tuple = ()
    batch: int | None = None

    @classmethod
    def of(cls, args) -> "ShapeRequest":
        """The request of parsed arguments (their ``shape`` and ``batch``, when they have them).

        Example:
            >>> from types import SimpleNamespace
            >>> ShapeRequest.of(SimpleNamespace(shape=["1x8"], batch=None))
            ShapeRequest(shapes=('1x8',), batch=None)
        """
        return cls(tuple(getattr(args, "shape", None) or ()), getattr(args, "batch", None))

    def __bool__(self) -> bool:
        return bool(self.shapes) or self.batch is not None

    def named(self, inputs=None) -> dict:
        """{input name: dims} of the ``--shape`` values; an unnamed one is the single input's
        of ``inputs`` (the model's data input names), a BadInput when it has several.

        Example:
            >>> ShapeRequest(("1x8",)).named(["x"])
            {'x': (1, 8)}
        """
        found = {}
        for text in self.shapes:
            name, dims = parse_shape(text)
            if name is None:
                if inputs is not None and len(inputs) != 1:
                    raise BadInput(f"--shape {text}: the model has {len(inputs)} inputs ({', '.join(inputs)}); "
                                   f"name the input, as in --shape {inputs[0] if inputs else 'NAME'}={text}")
                name = inputs[0] if inputs else "?"
            if name in found:
                raise BadInput(f"--shape {text}: input {name!r} has a --shape already")
            found[name] = dims
        return found

    def bind(self, model, where) -> dict:
        """{input name: static shape} of every data input of the ONNX ``model`` (a ModelProto;
        ``where`` names it in messages): the declared shape, with ``--shape`` and ``--batch``
        applied; any contradiction, or a symbolic dim left, is a BadInput.

        Example:
            >>> from onnx import TensorProto, helper
            >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])
            >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
            >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
            >>> ShapeRequest(("x=2x16",)).bind(model, "m.onnx")
            Traceback (most recent call last):
            ...
            tilefuse.autotune.cli_io.BadInput: m.onnx: --shape x=2x16: dim 0 of input 'x' is 1 in the model
        """
        weights = {t.name for t in model.graph.initializer}
        declared = {vi.name: _declared(vi) for vi in model.graph.input if vi.name not in weights}
        names = list(declared)
        given = self.named(names)
        bound = {}
        for name, dims in given.items():
            if name not in declared:
                raise BadInput(f"{where}: --shape {name}={_text(dims)}: the model has no input {name!r} "
                               f"(its inputs: {', '.join(names) or 'none'})")
            model_dims = declared[name]
            if model_dims is not None and len(model_dims) != len(dims):
                raise BadInput(f"{where}: --shape {name}={_text(dims)}: input {name!r} has {len(model_dims)} dims "
                               f"({_text(model_dims)}), not {len(dims)}")
            for k, (want, got) in enumerate(zip(model_dims or (), dims)):
                if isinstance(want, int) and want != got:
                    raise BadInput(f"{where}: --shape {name}={_text(dims)}: dim {k} of input {name!r} is {want} "
                                   f"in the model")
            bound[name] = dims
        if self.batch is not None:
            batched = [name for name, dims in declared.items() if dims and isinstance(dims[0], str)]
            if not batched:
                raise BadInput(f"{where}: --batch {self.batch}: no input has a symbolic first dim to bind (inputs: "
                               + ", ".join(f"{n} {_text(d) if d is not None else '(no shape)'}"
                                           for n, d in declared.items()) + ")")
            for name in batched:
                if name in bound and bound[name][0] != self.batch:
                    raise BadInput(f"{where}: --batch {self.batch} and --shape {name}={_text(bound[name])} "
                                   f"disagree on the first dim of input {name!r}")
                bound.setdefault(name, (self.batch, *declared[name][1:]))
        for name, dims in declared.items():
            dims = bound.get(name, dims)
            if dims is None:
                raise BadInput(f"{where}: input {name!r} has no declared shape: give it with --shape {name}=DIMS")
            symbolic = [(k, d) for k, d in enumerate(dims) if isinstance(d, str)]
            if symbolic:
                k, d = symbolic[0]
                example = "x".join("N" if isinstance(v, str) else str(v) for v in dims)
                hint = " (or --batch N)" if k == 0 and self.batch is None else ""
                raise BadInput(f"{where}: input {name!r} has a symbolic dim {k} ({d!r}; shape {_text(dims)}): "
                               f"give its shape with --shape {name}={example}{hint}")
            bound[name] = tuple(dims)
        return bound


def _batch_size(text: str) -> int:
    if not re.fullmatch(r"\s*\d+\s*", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_shape_options(parser) -> None:
    """Add ``--shape`` and ``--batch`` to a subcommand's parser.

    Example:
        >>> import argparse; p = argparse.ArgumentParser(); add_shape_options(p)
        >>> p.parse_args(["--shape", "x=1x8", "--batch", "2"]).shape
        ['x=1x8']
    """
    parser.add_argument("--shape", action="append", metavar="[NAME=]DIMS",
                        help="an input's shape, as x=1x3x224x224 (repeatable; a model with one input also takes "
                             "1x3x224x224): binds the model's symbolic dims")
    parser.add_argument("--batch", type=_batch_size, metavar="N",
                        help="bind the symbolic first dim of every input that --shape does not name to N")
