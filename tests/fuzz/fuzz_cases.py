"""Seeded fuzz cases for tilefuse: malformed (and some valid) input of ten classes, each case
deterministic from an integer seed, and the check that says which outcome class it ended in
(``fuzz_outcomes``: clean error, clean but unnamed, equal to onnxruntime, accepted what
onnxruntime rejects, ok, and the bad ones LEAK, WRONG, CRASH, HANG).

Case classes (``CASE_CLASSES``):

* ``onnx-bytes``: a bundled ONNX model (``examples/*.onnx``) or a small generated one with bytes
  flipped, truncated, inserted, deleted, overwritten or duplicated, fed to
  ``graph_api.onnx.import_onnx`` as bytes and as a file; what imports is compiled, run and
  compared with onnxruntime;
* ``onnx-models``: models built with ``onnx.helper`` (``fuzz_onnx_models``), valid ones of many
  op types with random shapes and wrong ones on purpose;
* ``json``: ``examples/mlp.json``, ``examples/conv_block.json`` (and shrunk copies, and graphs
  imported from small ONNX models) with keys dropped, wrong types, bad dims, unknown kinds,
  dangling or duplicate ids, cycles...; loaded with ``graph_api.load_json``, compiled, run on
  random feeds and compared with the reference interpreter;
* ``feeds``: ``CompiledGraph.run`` of a compiled graph with wrong shapes, dtypes, keys, lists,
  non-arrays (refused cleanly) and NaN, non-contiguous, Fortran-order, read-only, unaligned
  arrays (run right);
* ``store``: tuning logs and databases (``fuzz_store``): mutated log lines, damaged, truncated,
  foreign, read-only databases, through ``autotune.log``, ``autotune.database`` and the
  ``autotune`` command;
* ``windows``: one ConvTranspose, MaxPool (with its Indices output half the time) or AveragePool
  with random auto_pad, ceil_mode, output_shape, output_padding, dilations, asymmetric pads,
  groups, count_include_pad, storage_order (``fuzz_windows``), against onnxruntime; a model
  onnxruntime runs must not be refused at run time;
* ``patterns``: attention with masks, GELU and LayerNorm chains, squeeze-excite blocks and
  grouped convolutions with random small shapes (``fuzz_patterns``), against onnxruntime;
* ``saved-files``: a saved session's file saved over, replaced, truncated, overwritten, copied
  over, removed, appended to or touched under the session loaded from it (``fuzz_saved``): the
  live session runs right or refuses cleanly, never SIGBUS or garbage;
* ``threads``: 2 to 4 threads running one session with symbolic dims over 2 to 5 shapes, few
  compiled shapes kept (``fuzz_threads``), against onnxruntime, with a timeout;
* ``strided-feeds``: broadcast, negative-stride, sliced, Fortran-order, transposed, read-only
  and zero-size feeds of an ``InferenceSession`` (``fuzz_strided``), against contiguous copies.

Example:
    >>> case = make_case("json", 3)
    >>> case.cls, case.seed, case.description == make_case("json", 3).description
    ('json', 3, True)
    >>> # case.run() -> Outcome(kind='clean', message='load: ...')
"""
from __future__ import annotations

import copy
import functools
import importlib
import io
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from fuzz_outcomes import (BAD_OUTCOMES, CLEAN, EQUAL_ORT, OK, ORT_REJECTS, OUTCOMES, REPO, UNNAMED, WRONG,
                           Outcome, classify_exception, describe_exception, first_line, is_clean_error, worst)

EXAMPLES = REPO / "examples"
CASE_CLASSES = ("onnx-bytes", "onnx-models", "json", "feeds", "store", "windows", "patterns",
                "saved-files", "threads", "strided-feeds")
RTOL, ATOL = 1e-4, 1e-5
"""Against onnxruntime (both in float32)."""
MAGNITUDE_ATOL = 1e-5
"""The absolute tolerance grows to this fraction of the output's largest finite magnitude: an
element that is a small remainder of large terms (mutated weights give outputs of 1e30 beside
ones of 1e27) carries the rounding of those terms, whatever order sums them."""
REF_RTOL, REF_ATOL = 1e-4, 1e-4
"""Against the reference interpreter, which computes in float64: float32 sums of a few hundred
terms of magnitude 1 (a 3x3x16 convolution, a 256-long dot product) drift by about 1e-5."""
MAX_FEED_ELEMENTS = 1 << 21
"""Cases whose inputs hold more elements are imported and compiled, not run."""

__all__ = ["CASE_CLASSES", "Case", "make_case", "SLICE_SEEDS", "OUTCOMES", "BAD_OUTCOMES", "Outcome"]


# ---------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """One fuzz case: its class, seed, what it feeds tilefuse, and the check that runs it and
    returns its ``Outcome``.

    Example:
        >>> case = Case("json", 0, "nothing", lambda: Outcome(OK, "fine"))
        >>> case.run().kind, case.report(case.run())
        ('ok', 'json seed 0: nothing -> ok: fine')
    """
    cls: str
    seed: int
    description: str
    check: Callable[[], Outcome]

    def run(self) -> Outcome:
        """Run the check with warnings silenced (importer warnings about Wildcards are
        expected); an exception escaping the check is classified like any other.

        Example:
            >>> Case("json", 0, "boom", lambda: {}["k"]).run().kind
            'LEAK'
        """
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                return self.check()
            except Exception as err:      # the check let it through: classify it as it is
                return classify_exception(err, "case")

    def report(self, outcome: Outcome) -> str:
        """One line naming the case and its outcome (the assertion message of the tests).

        Example:
            >>> Case("store", 4, "zero-length db", None).report(Outcome(CLEAN, "exit 2"))
            'store seed 4: zero-length db -> clean: exit 2'
        """
        return f"{self.cls} seed {self.seed}: {self.description} -> {outcome.kind}: {outcome.message}"


def make_case(cls: str, seed: int) -> Case:
    """The case of class ``cls`` (one of ``CASE_CLASSES``) and ``seed``; generating it is cheap
    and deterministic, running it (``Case.run``) does the work.

    Example:
        >>> make_case("onnx-models", 1).description == make_case("onnx-models", 1).description
        True
    """
    makers = {"onnx-bytes": onnx_bytes_case, "onnx-models": onnx_model_case, "json": json_case,
              "feeds": feeds_case}
    if cls in makers:
        return makers[cls](seed)
    if cls not in CASE_CLASSES:
        raise ValueError(f"unknown case class {cls!r}; expected one of {CASE_CLASSES}")
    module, maker = OTHER_MAKERS[cls]
    return getattr(importlib.import_module(module), maker)(seed)


OTHER_MAKERS = {"store": ("fuzz_store", "store_case"), "windows": ("fuzz_windows", "window_case"),
                "patterns": ("fuzz_patterns", "pattern_case"), "saved-files": ("fuzz_saved", "saved_case"),
                "threads": ("fuzz_threads", "threads_case"), "strided-feeds": ("fuzz_strided", "strided_case")}
"""Classes whose cases live in modules of their own (module, maker), imported when asked for."""


# ---------------------------------------------------------------------------- arrays

def random_array(rng, shape, dtype) -> np.ndarray:
    """Random values of ``shape`` and ``dtype``: floats in [-1, 1), signed integers in [-2, 3),
    unsigned ones in [0, 3), random booleans.

    Example:
        >>> bool(random_array(np.random.default_rng(0), (2, 2), np.int64).max() < 3)
        True
    """
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype.kind == "f":
        return rng.uniform(-1, 1, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(size=shape) < 0.5
    return rng.integers(-2 if dtype.kind == "i" else 0, 3, size=shape).astype(dtype)


def compare_outputs(got: dict, want: dict, rtol: float = RTOL, atol: float = ATOL) -> str:
    """'' when every output of ``want`` is in ``got`` with the same shape, dtype and values
    (``np.isclose`` with NaN equal to NaN, ``atol`` at least ``MAGNITUDE_ATOL`` of the output's
    largest finite magnitude; exact for integers and booleans), else what differs.

    Example:
        >>> compare_outputs({"y": np.ones(2)}, {"y": np.ones(2)})
        ''
        >>> compare_outputs({"y": np.zeros(2)}, {"y": np.ones(2)})
        "output 'y': 2 of 2 elements differ, max |diff| 1, first at (0,): 0.0 vs 1.0"
    """
    problems = []
    for name, expected in want.items():
        if name not in got:
            problems.append(f"output {name!r} is missing")
            continue
        actual, expected = np.asarray(got[name]), np.asarray(expected)
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            problems.append(f"output {name!r} is {actual.dtype}{list(actual.shape)}, expected "
                            f"{expected.dtype}{list(expected.shape)}")
            continue
        problem = _value_difference(actual, expected, rtol, atol)
        if problem:
            problems.append(f"output {name!r}: {problem}")
    return "; ".join(problems)


def _value_difference(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> str:
    if actual.dtype.kind in "fc":
        finite = np.abs(expected[np.isfinite(expected)]).astype(np.float64)
        atol = max(atol, MAGNITUDE_ATOL * float(finite.max())) if finite.size else atol
        close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = actual == expected
    if np.all(close):
        return ""
    bad = np.argwhere(~np.asarray(close))
    first = tuple(int(i) for i in bad[0])
    with np.errstate(all="ignore"):
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    worst_diff = np.nanmax(np.where(close, 0, diff)) if diff.size else 0
    return (f"{len(bad)} of {actual.size} elements differ, max |diff| {worst_diff:.3g}, first at {first}: "
            f"{actual[first].item()!r} vs {expected[first].item()!r}")


# ---------------------------------------------------------------------------- ONNX: running

def _onnx_numpy_dtype(elem_type: int):
    """The numpy dtype of an ONNX element type we can make random inputs of, else None."""
    from onnx import helper
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:           # onnx raises KeyError/ValueError/TypeError for unknown or exotic types
        return None
    return dtype if dtype.kind in "fiub" else None


def model_feeds(model_bytes: bytes, seed: int):
    """Random arrays (by input name) for the graph inputs that are not initializers of a
    serialized ONNX model; None when onnx cannot parse it, an input is no tensor of a numeric
    type or of a known rank, or the inputs hold more than ``MAX_FEED_ELEMENTS`` elements. A
    symbolic dim is given 1 (tilefuse refuses it anyway).

    Example:
        >>> from fuzz_onnx_models import generate_model
        >>> feeds = model_feeds(generate_model(4)[1].SerializeToString(), 0)
        >>> sorted(feeds)
        ['x']
    """
    import onnx
    try:
        model = onnx.load_from_string(model_bytes)
    except Exception:           # protobuf's DecodeError and others: nothing to feed
        return None
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds, total = {}, 0
    for vi in model.graph.input:
        if vi.name in initializers or vi.name in feeds:
            continue
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        dtype = _onnx_numpy_dtype(tt.elem_type) if tt is not None else None
        if dtype is None or not tt.HasField("shape"):
            return None
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        total += math.prod(shape)
        if any(d < 0 for d in shape) or total > MAX_FEED_ELEMENTS:
            return None
        feeds[vi.name] = random_array(rng, shape, dtype)
    return feeds


def onnxruntime_outputs(model_bytes: bytes, feeds: dict):
    """(outputs by name, '') of onnxruntime on ``feeds``, or (None, why) when it refuses the
    model or fails to run it.

    Example:
        >>> onnxruntime_outputs(b"not a model", {})[0] is None
        True
    """
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, feeds)
    except Exception as err:      # onnxruntime's Fail, InvalidGraph, InvalidArgument, RuntimeException...
        return None, f"{type(err).__name__}: {first_line(err)}"
    return dict(zip(names, values)), ""


def tilefuse_onnx_outputs(source, feeds):
    """Import (``graph_api.onnx.import_onnx``), compile and run a model given as bytes or a
    path: (outputs by name, stage, None), or (None, stage, the exception) where ``stage`` is
    import, compile or run. With ``feeds`` None nothing runs: (None, 'compile', None).

    Example:
        >>> tilefuse_onnx_outputs(b"\\x00", None)[1]
        'import'
    """
    from tilefuse.graph_api import compile_graph
    from tilefuse.graph_api.onnx import import_onnx
    stage = "import"
    try:
        imported = import_onnx(source)
        stage = "compile"
        compiled = compile_graph(imported.graph)
        if feeds is None:
            return None, stage, None
        stage = "run"
        results = compiled.run({tid: feeds[name] for name, tid in imported.inputs if tid is not None})
    except Exception as err:      # classified by the caller
        return None, stage, err
    named = {}
    for name, tid in imported.outputs:
        named[name] = imported.constant_outputs[name] if tid is None else results[tid]
    return named, stage, None


def onnx_outcome(source, feeds, expected, ort_problem: str, names) -> Outcome:
    """The outcome of tilefuse on one model (``source``: bytes or a path) given onnxruntime's
    ``expected`` outputs (None when it refused, with ``ort_problem``); an import error must
    name the model with one of ``names``.

    Example:
        >>> onnx_outcome(b"\\x00\\x01", None, None, "bad", ["ONNX model"]).kind
        'clean'
    """
    got, stage, err = tilefuse_onnx_outputs(source, feeds)
    if err is not None:
        return classify_exception(err, stage, names if stage == "import" else ())
    if got is None:
        return Outcome(OK, "imported and compiled; not run (inputs too large or not numeric)")
    if expected is None:
        shapes = {name: list(np.shape(v)) for name, v in got.items()}
        model_bytes = source if isinstance(source, bytes) else Path(source).read_bytes()
        return Outcome(ORT_REJECTS, f"onnxruntime refuses it ({ort_problem}); tilefuse returned {shapes}, "
                                    f"{onnx_reference_verdict(model_bytes, feeds, got)}")
    problem = compare_outputs(got, expected)
    return Outcome(WRONG, f"run: differs from onnxruntime: {problem}") if problem else Outcome(EQUAL_ORT)


LIMIT_KEY = "tilefuse_fuzz_tensor_limit"
"""Model metadata asking ``check_onnx_model`` to import the model under that tensor limit."""


def _tensor_limit(model_bytes: bytes):
    import onnx
    try:
        model = onnx.load_from_string(model_bytes)
    except Exception:             # not parseable: no limit asked for
        return None
    found = [p.value for p in model.metadata_props if p.key == LIMIT_KEY]
    return int(found[0]) if found else None


def check_limited_import(model_bytes: bytes, limit: int) -> Outcome:
    """Import and compile a model under ``TILEFUSE_MAX_TENSOR_BYTES=limit`` while tracemalloc
    watches numpy's allocations: WRONG when more than twice the limit was allocated (the limit
    exists so that a huge tensor is refused before anything is allocated) or when the model
    compiled though one of its tensors is over the limit; else the refusal's outcome.

    Example:
        >>> from fuzz_onnx_models import limit_model
        >>> # check_limited_import(limit_model(np.random.default_rng(0))[1].SerializeToString(), 32 << 20)
    """
    import tracemalloc
    from tilefuse.graph_api import compile_graph
    from tilefuse.graph_api.limits import ENV_VAR
    from tilefuse.graph_api.onnx import import_onnx
    saved = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(limit)
    tracemalloc.start()
    stage, err = "import", None
    try:
        graph = import_onnx(model_bytes).graph
        stage = "compile"
        compile_graph(graph)
    except Exception as caught:   # classified below
        err = caught
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if saved is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = saved
    if peak > 2 * limit:
        what = f"refusing it ({describe_exception(err)})" if err is not None else "accepting it"
        return Outcome(WRONG, f"{stage}: allocated {peak / 2 ** 20:.0f} MiB under a tensor limit of "
                              f"{limit / 2 ** 20:.0f} MiB before {what}")
    if err is None:
        return Outcome(WRONG, f"compiled a model with a tensor over the limit of {limit / 2 ** 20:.0f} MiB")
    return classify_exception(err, stage, ["ONNX model"] if stage == "import" else ())


def onnx_reference_verdict(model_bytes: bytes, feeds: dict, got: dict) -> str:
    """What onnx's reference implementation says of a model onnxruntime refused: equal to
    tilefuse's outputs ``got``, different, or failing too (for the review of ort-rejects).

    Example:
        >>> onnx_reference_verdict(b"garbage", {}, {}).startswith("onnx's reference implementation fails too")
        True
    """
    import onnx
    from onnx.reference import ReferenceEvaluator
    try:
        model = onnx.load_from_string(model_bytes)
        values = ReferenceEvaluator(model).run(None, feeds)
        expected = dict(zip([o.name for o in model.graph.output], values))
    except Exception as err:      # onnx's implementations raise anything
        return f"onnx's reference implementation fails too ({type(err).__name__}: {first_line(err)[:150]})"
    problem = compare_outputs(got, expected)
    return "equal to onnx's reference implementation" if not problem else \
        f"differs from onnx's reference implementation: {problem}"


def check_onnx_model(model_bytes: bytes, seed: int, as_file: bool = False) -> Outcome:
    """Feed one serialized model to tilefuse (as bytes, and with ``as_file`` also as a file)
    and classify what happens against onnxruntime on the same random inputs. Bytes and file
    must end alike: one refused and the other run is WRONG.

    Example:
        >>> check_onnx_model(b"garbage", 0).kind
        'clean'
    """
    limit = _tensor_limit(model_bytes)
    if limit is not None:
        return check_limited_import(model_bytes, limit)
    feeds = model_feeds(model_bytes, seed)
    expected, ort_problem = (None, "no inputs to feed it") if feeds is None else onnxruntime_outputs(model_bytes,
                                                                                                   feeds)
    outcomes = [onnx_outcome(model_bytes, feeds, expected, ort_problem, ["ONNX model"])]
    if as_file:
        with tempfile.TemporaryDirectory(prefix="tilefuse-fuzz-") as tmp:
            path = os.path.join(tmp, "mutated.onnx")
            with open(path, "wb") as f:
                f.write(model_bytes)
            outcomes.append(onnx_outcome(path, feeds, expected, ort_problem, [path]))
        refused = [o.kind in (CLEAN, UNNAMED) for o in outcomes]
        if refused[0] != refused[1] and all(o.allowed for o in outcomes):
            return Outcome(WRONG, f"bytes and file of one model end differently: bytes -> {outcomes[0].kind} "
                                  f"({outcomes[0].message}); file -> {outcomes[1].kind} ({outcomes[1].message})")
    return worst(outcomes)


# ---------------------------------------------------------------------------- ONNX: cases

BUNDLED_MODELS = ("resnet_block.onnx", "transformer_encoder.onnx")


@functools.lru_cache(maxsize=None)
def bundled_model_bytes(name: str) -> bytes:
    """The bytes of ``examples/<name>``.

    Example:
        >>> bundled_model_bytes("resnet_block.onnx")[:2] != b""
        True
    """
    return (EXAMPLES / name).read_bytes()


def _mutation_position(rng, size: int) -> int:
    """A byte position; in a large model, half the time near its start (the nodes) or its end
    (inputs, outputs, value_info), where a change alters structure rather than weights."""
    if size > 8192 and rng.random() < 0.5:
        return int(rng.integers(0, 4096)) if rng.random() < 0.5 else size - 1 - int(rng.integers(0, 4096))
    return int(rng.integers(0, max(size, 1)))


BYTE_MUTATIONS = {"flip": 0.3, "small value": 0.25, "overwrite": 0.08, "zero": 0.04, "truncate": 0.09,
                  "insert": 0.08, "delete": 0.08, "duplicate": 0.04, "varint": 0.04}
"""Mutation kinds and their odds: same-length ones (a bit flip, a byte set to a small value,
which keeps protobuf's framing and changes a dim, a type, an attribute or an index) more often
than those that shift the bytes after them."""


def mutate_bytes(data: bytes, rng) -> tuple[str, bytes]:
    """1 to 3 random mutations of ``data`` (kinds and odds in ``BYTE_MUTATIONS``): bit flips,
    a byte below 0x80 set to another small value, overwritten, zeroed, inserted, deleted or
    duplicated bytes, a truncation, a 10-byte varint (a huge length).

    Example:
        >>> what, mutated = mutate_bytes(b"0123456789", np.random.default_rng(1))
        >>> isinstance(mutated, bytes) and bool(what)
        True
    """
    data = bytearray(data)
    done = []
    kinds, odds = list(BYTE_MUTATIONS), np.array(list(BYTE_MUTATIONS.values()))
    for _ in range(int(rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1]))):
        kind = kinds[int(rng.choice(len(kinds), p=odds / odds.sum()))]
        at = _mutation_position(rng, len(data))
        n = int(rng.integers(1, 33))
        if kind == "flip":
            positions = sorted({_mutation_position(rng, len(data)) for _ in range(int(rng.integers(1, 4)))})
            for p in positions:
                if p < len(data):
                    data[p] ^= 1 << int(rng.integers(0, 8))
            done.append(f"flip bits at {positions}")
        elif kind == "small value":
            small = [p for p in (_mutation_position(rng, len(data)) for _ in range(16)) if p < len(data)
                     and data[p] < 0x80]
            if small:
                old, data[small[0]] = data[small[0]], int(rng.integers(0, 128))
                done.append(f"byte {small[0]}: {old} -> {data[small[0]]}")
        elif kind == "truncate":
            data = data[:at]
            done.append(f"truncate to {at} bytes")
        elif kind == "insert":
            data[at:at] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            done.append(f"insert {n} random bytes at {at}")
        elif kind == "delete":
            del data[at:at + n]
            done.append(f"delete {n} bytes at {at}")
        elif kind == "overwrite":
            data[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            done.append(f"overwrite {n} bytes at {at}")
        elif kind == "duplicate":
            chunk = data[at:at + 4 * n]
            to = _mutation_position(rng, len(data))
            data[to:to] = chunk
            done.append(f"copy {len(chunk)} bytes from {at} to {to}")
        elif kind == "varint":
            data[at:at] = b"\xff" * 9 + b"\x01"
            done.append(f"insert a 10-byte varint at {at}")
        else:
            data[at:at + 4 * n] = bytes(len(data[at:at + 4 * n]))
            done.append(f"zero {4 * n} bytes at {at}")
    return "; ".join(done) or "no change", bytes(data)


def pick_str(rng, options):
    """One of ``options``.

    Example:
        >>> pick_str(np.random.default_rng(0), ["only"])
        'only'
    """
    return options[int(rng.integers(len(options)))]


def onnx_bytes_case(seed: int) -> Case:
    """A bundled or small generated model (by ``seed % 3``) with its bytes mutated, fed as bytes
    and as a file.

    Example:
        >>> make_case("onnx-bytes", 0).description.startswith("resnet_block.onnx")
        True
    """
    from fuzz_onnx_models import VALID_MODELS
    rng = np.random.default_rng(seed)
    source = seed % 3
    if source < 2:
        name, data = BUNDLED_MODELS[source], bundled_model_bytes(BUNDLED_MODELS[source])
    else:
        generator = VALID_MODELS[int(rng.integers(len(VALID_MODELS)))]
        what, model = generator(rng)
        name, data = f"small model ({what})", model.SerializeToString()
    what, mutated = mutate_bytes(data, rng)
    description = f"{name} ({len(data)} bytes): {what}"
    return Case("onnx-bytes", seed, description, lambda: check_onnx_model(mutated, seed, as_file=True))


def onnx_model_case(seed: int) -> Case:
    """A model of ``fuzz_onnx_models.generate_model(seed)`` (valid or wrong on purpose), fed as
    bytes.

    Example:
        >>> make_case("onnx-models", 0).description.startswith("valid: ")
        True
    """
    from fuzz_onnx_models import generate_model
    description, model = generate_model(seed)
    data = model.SerializeToString()
    return Case("onnx-models", seed, description, lambda: check_onnx_model(data, seed))


# ---------------------------------------------------------------------------- JSON graphs

def _row_major(shape) -> list:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return strides[::-1]


def shrink_graph(data: dict, dims: dict) -> dict:
    """A copy of a oneDNN JSON graph with every dim ``d`` replaced by ``dims.get(d, d)`` and
    row-major strides (a small graph of the same structure).

    Example:
        >>> small = shrink_graph(json.loads((EXAMPLES / "mlp.json").read_text()), {32: 4})
        >>> small["graph"][0]["inputs"][0]["shape"], small["graph"][0]["inputs"][0]["stride"]
        ([4, 256], [256, 1])
    """
    data = copy.deepcopy(data)
    for op in data["graph"]:
        for t in op["inputs"] + op["outputs"]:
            t["shape"] = [dims.get(d, d) for d in t["shape"]]
            t["stride"] = _row_major(t["shape"])
    return data


@functools.lru_cache(maxsize=None)
def _json_base_texts() -> dict:
    mlp = json.loads((EXAMPLES / "mlp.json").read_text())
    conv = json.loads((EXAMPLES / "conv_block.json").read_text())
    bases = {"mlp.json": mlp, "conv_block.json": conv,
             "mlp.json shrunk": shrink_graph(mlp, {32: 4, 256: 16, 128: 8, 64: 8}),
             "conv_block.json shrunk": shrink_graph(conv, {16: 4, 28: 6})}
    return {name: json.dumps(data) for name, data in bases.items()}


def _onnx_json_base(rng):
    """(name, JSON dict) of a small valid ONNX model imported by tilefuse and written as oneDNN
    JSON (its initializers become constant inputs); None if that fails (a bug the onnx classes
    report)."""
    from fuzz_onnx_models import VALID_MODELS
    from tilefuse.graph_api import from_onnx, graph_to_json
    generator = VALID_MODELS[int(rng.integers(len(VALID_MODELS)))]
    what, model = generator(rng)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f"imported ONNX ({what})", json.loads(graph_to_json(from_onnx(model)))
    except Exception:             # reported by the onnx-models class; fall back to another base
        return None


def json_base(rng) -> tuple[str, dict]:
    """(name, parsed JSON) of a base graph: a bundled one, a shrunk copy, or a small ONNX model
    imported and written as JSON.

    Example:
        >>> name, data = json_base(np.random.default_rng(0))
        >>> isinstance(data["graph"], list) and bool(name)
        True
    """
    texts = _json_base_texts()
    names = sorted(texts)
    k = int(rng.integers(len(names) + 2))
    if k >= len(names):
        found = _onnx_json_base(rng)
        if found is not None:
            return found
        k = 0
    return names[k], json.loads(texts[names[k]])


def _tensors(data) -> list:
    """Every logical tensor dict of the ops of a JSON graph."""
    ops = data.get("graph") if isinstance(data, dict) else None
    return [t for op in ops or [] if isinstance(op, dict) for key in ("inputs", "outputs")
            for t in op.get(key) or [] if isinstance(t, dict)]


def _locations(value, path=()) -> list:
    """(container, key, path) of every value inside a JSON document."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found.append((value, key, path + (key,)))
        found.extend(_locations(child, path + (key,)))
    return found


BAD_VALUES = [None, "x", [], {}, 1.5, True, -1, 10 ** 30, "NaN", [[1]], {"id": 0}, "", 0]
BAD_DTYPES = ["f16", "bf16", "s8", "u8", "s32", "boolean", "f64", "undef", "foo", "F32", 32]
BAD_KINDS = ["FooOp", "relu", "", "Wildcard", "End", 42, "Convolution", "SoftMax", None]


def _drop_key(data, rng):
    places = [(c, k, p) for c, k, p in _locations(data) if isinstance(c, dict)]
    container, key, path = places[int(rng.integers(len(places)))]
    del container[key]
    return f"drop key {list(path)}"


def _wrong_type(data, rng):
    places = _locations(data)
    container, key, path = places[int(rng.integers(len(places)))]
    container[key] = copy.deepcopy(BAD_VALUES[int(rng.integers(len(BAD_VALUES)))])
    return f"set {list(path)} to {container[key]!r}"


def _random_tensor(data, rng):
    tensors = _tensors(data)
    return tensors[int(rng.integers(len(tensors)))]


def _set_dim(values):
    def mutate(data, rng):
        t = _random_tensor(data, rng)
        if not t.get("shape"):
            t["shape"] = [1]
        k = int(rng.integers(len(t["shape"])))
        t["shape"][k] = values[int(rng.integers(len(values)))]
        return f"tensor {t.get('id')}: dim {k} set to {t['shape'][k]}"
    return mutate


def _unknown_kind(data, rng):
    op = data["graph"][int(rng.integers(len(data["graph"])))]
    op["kind"] = BAD_KINDS[int(rng.integers(len(BAD_KINDS)))]
    return f"op {op.get('id')}: kind {op['kind']!r}"


def _dangling_port(data, rng):
    key = pick_str(rng, ["input_ports", "output_ports"])
    ports = data.setdefault(key, [])
    value = pick_str(rng, [999, -1, "0", 2 ** 70, 1.0])
    ports.append(value)
    return f"{key} gets {value!r}"


def _duplicate_op_id(data, rng):
    ops = data["graph"]
    if len(ops) < 2:
        ops.append(copy.deepcopy(ops[0]))
        return "op duplicated whole"
    a, b = (int(i) for i in rng.choice(len(ops), 2, replace=False))
    ops[b]["id"] = ops[a]["id"]
    return f"op #{b} takes the id of op #{a} ({ops[a]['id']})"


def _duplicate_tensor_id(data, rng):
    tensors = _tensors(data)
    a, b = tensors[int(rng.integers(len(tensors)))], tensors[int(rng.integers(len(tensors)))]
    b["id"] = a["id"]
    return f"a tensor takes id {a['id']} (shape {a.get('shape')}), its own shape {b.get('shape')}"


def _cycle(data, rng):
    ops = data["graph"]
    last = ops[-1]["outputs"][0]
    target = ops[int(rng.integers(len(ops)))]
    k = int(rng.integers(len(target["inputs"]))) if target["inputs"] else 0
    if target["inputs"]:
        target["inputs"][k] = copy.deepcopy(last)
    else:
        target["inputs"].append(copy.deepcopy(last))
    return f"op {target.get('id')} input {k} is the last op's output {last['id']} (a cycle)"


def _bad_dtype(data, rng):
    t = _random_tensor(data, rng)
    t["dtype"] = BAD_DTYPES[int(rng.integers(len(BAD_DTYPES)))]
    return f"tensor {t.get('id')}: dtype {t['dtype']!r}"


ATTR_VALUES = [("s64", 0), ("s64", -1), ("s64", 99), ("s64", -99), ("s64[]", []), ("s64[]", [0, 0]),
               ("s64[]", [-1, -1]), ("s64[]", [10 ** 12, 10 ** 12]), ("string", "x"), ("f32", 1.5), ("bool", True),
               ("s64", 2 ** 63), ("f32", "NaN"), ("s64[]", [1, 2, 3, 4, 5]), ("string", "")]


def _attr_value(data, rng):
    op = data["graph"][int(rng.integers(len(data["graph"])))]
    attrs = op.setdefault("attrs", {})
    name = pick_str(rng, sorted(attrs)) if attrs and rng.random() < 0.8 else pick_str(
        rng, ["axis", "strides", "pads_begin", "kernel", "groups", "epsilon", "data_format", "keep_dims"])
    declared, value = ATTR_VALUES[int(rng.integers(len(ATTR_VALUES)))]
    if name in attrs and rng.random() < 0.7:
        declared = attrs[name].get("type", declared)
    attrs[name] = {"type": declared, "value": value}
    return f"op {op.get('id')} ({op.get('kind')}): attribute {name} = {value!r} ({declared})"


def _inputs_changed(data, rng):
    op = data["graph"][int(rng.integers(len(data["graph"])))]
    what = pick_str(rng, ["drop", "add", "swap"])
    if what == "drop" and op["inputs"]:
        op["inputs"].pop(int(rng.integers(len(op["inputs"]))))
    elif what == "add":
        extra = copy.deepcopy(op["inputs"][0] if op["inputs"] else op["outputs"][0])
        extra["id"] = 10_000 + int(rng.integers(100))
        op["inputs"].append(extra)
    else:
        op["inputs"].reverse()
    return f"op {op.get('id')} ({op.get('kind')}): inputs {what}"


def _rank_changed(data, rng):
    t = _random_tensor(data, rng)
    shape = list(t.get("shape") or [])
    if shape and rng.random() < 0.5:
        shape.pop()
    else:
        shape.append(int(pick_str(rng, [1, 3])))
    t["shape"] = shape
    return f"tensor {t.get('id')}: shape {shape} (rank changed)"


def _bad_stride(data, rng):
    t = _random_tensor(data, rng)
    t["stride"] = pick_str(rng, [[0] * len(t.get("shape") or [1]), [-1] * len(t.get("shape") or [1]), [1],
                                 [2 ** 62] * len(t.get("shape") or [1]), "dense", None])
    return f"tensor {t.get('id')}: stride {t['stride']!r}"


def _layout_or_property(data, rng):
    t = _random_tensor(data, rng)
    key = pick_str(rng, ["layout_type", "property_type"])
    t[key] = pick_str(rng, ["opaque", "any", "foo", None, "constant", "variable", "undef", 7])
    return f"tensor {t.get('id')}: {key} {t[key]!r}"


def _top_level(data, rng):
    what = pick_str(rng, ["list", "graph dict", "engine", "fpmath", "apply_to_int", "version", "empty graph",
                          "graph null"])
    if what == "list":
        return "top level is a list", [data]
    if what == "graph dict":
        data["graph"] = {"0": data["graph"][0]}
    elif what == "engine":
        data["engine_kind"] = "gpu"
    elif what == "fpmath":
        data["fpmath_mode"] = pick_str(rng, ["bf16", "tf32", "any", "foo", 3])
    elif what == "apply_to_int":
        data["fpmath_mode_apply_to_int"] = pick_str(rng, ["true", "yes", 1, None])
    elif what == "version":
        data["version"] = pick_str(rng, ["99.0.0", "", None])
    elif what == "empty graph":
        data["graph"] = []
    else:
        data["graph"] = None
    return f"top level: {what}"


def _ops_reordered(data, rng):
    ops = data["graph"]
    what = pick_str(rng, ["shuffle", "drop middle op", "reverse"])
    if what == "shuffle":
        order = rng.permutation(len(ops))
        data["graph"] = [ops[int(i)] for i in order]
    elif what == "reverse":
        ops.reverse()
    elif len(ops) > 1:
        ops.pop(int(rng.integers(len(ops))))
    return f"ops: {what}"


def _bad_text(data, rng):
    text = json.dumps(data)
    what = pick_str(rng, ["truncate", "garbage", "nan", "bom", "deep"])
    if what == "truncate":
        text = text[: int(rng.integers(len(text)))]
    elif what == "garbage":
        at = int(rng.integers(len(text)))
        text = text[:at] + pick_str(rng, ["\x00", "}", "\"", "\udcff", ",,"]) + text[at:]
    elif what == "nan":
        text = text.replace("1,", "NaN,", 1)
    elif what == "bom":
        text = "\ufeff" + text
    else:
        text = text[:-1] + ', "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return f"text: {what}", text


def _consistent_dims(data, rng):
    dims = sorted({d for t in _tensors(data) for d in t.get("shape") or [] if isinstance(d, int) and d > 1})
    if not dims:
        return "no dims to change"
    old = dims[int(rng.integers(len(dims)))]
    new = int(pick_str(rng, [0, 1, 2, 3, 5, 7, 13, 33, 100]))
    for t in _tensors(data):
        if isinstance(t.get("shape"), list) and all(isinstance(d, int) for d in t["shape"]):
            t["shape"] = [new if d == old else d for d in t["shape"]]
            t["stride"] = _row_major(t["shape"])
    return f"every dim {old} becomes {new}"


JSON_MUTATIONS = [_drop_key, _wrong_type, _set_dim([-1, -2, -7]), _set_dim([10 ** 12, 2 ** 31, 2 ** 62, 2 ** 64]),
                  _set_dim([0]), _unknown_kind, _dangling_port, _duplicate_op_id, _duplicate_tensor_id, _cycle,
                  _bad_dtype, _attr_value, _inputs_changed, _rank_changed, _bad_stride, _layout_or_property,
                  _top_level, _ops_reordered, _bad_text, _consistent_dims]
JSON_MUTATION_NAMES = ["drop key", "wrong type", "negative dim", "huge dim", "zero dim", "unknown kind",
                       "dangling port", "duplicate op id", "duplicate tensor id", "cycle", "bad dtype",
                       "attribute value", "inputs changed", "rank changed", "bad stride", "layout/property",
                       "top level", "ops reordered", "bad text", "consistent dims"]


def mutate_json(data: dict, seed: int, rng) -> tuple[str, str]:
    """(description, text) of mutation ``seed % len(JSON_MUTATIONS)`` (and, half the time, one
    more random one) of a parsed JSON graph.

    Example:
        >>> what, text = mutate_json(json.loads((EXAMPLES / "mlp.json").read_text()), 4, np.random.default_rng(4))
        >>> what.startswith("zero dim")
        True
    """
    chosen = [seed % len(JSON_MUTATIONS)]
    if rng.random() < 0.5:
        chosen.append(int(rng.integers(len(JSON_MUTATIONS))))
    done = []
    for k in chosen:
        if not isinstance(data, dict) or not isinstance(data.get("graph"), list) or not data["graph"] \
                or not all(isinstance(op, dict) for op in data["graph"]):
            break
        result = JSON_MUTATIONS[k](data, rng)
        if isinstance(result, tuple):
            what, data = result
            done.append(f"{JSON_MUTATION_NAMES[k]}: {what}")
            if isinstance(data, str):
                return "; ".join(done), data
        else:
            done.append(f"{JSON_MUTATION_NAMES[k]}: {result}")
    return "; ".join(done), json.dumps(data)


def graph_feeds(ports, seed: int):
    """Random arrays for input ports (logical tensors) by id; None when a shape is unknown, a
    data type has no numpy dtype, or they hold more than ``MAX_FEED_ELEMENTS`` elements.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor
        >>> graph_feeds([LogicalTensor(3, DataType.f32, (2,))], 0)[3].shape
        (2,)
    """
    rng = np.random.default_rng(seed)
    feeds, total = {}, 0
    for port in ports:
        if not port.is_known():
            return None
        try:
            dtype = np.dtype(port.dtype.numpy)
        except Exception:         # undef, or a data type without a numpy dtype
            return None
        total += math.prod(port.shape)
        if total > MAX_FEED_ELEMENTS:
            return None
        feeds[port.id] = random_array(rng, port.shape, dtype)
    return feeds


def reference_outputs(graph, feeds: dict, ids) -> dict:
    """The reference interpreter's values of tensors ``ids`` of ``graph`` run on ``feeds``
    (its bound constants added).

    Example:
        >>> from tilefuse.graph_api import load_json
        >>> g = load_json(str(EXAMPLES / "mlp.json"))
        >>> # reference_outputs(g, feeds, [15])
    """
    from tilefuse.graph_api import reference
    values = reference.run(graph, {**graph.constant_values, **feeds})
    return {tid: values[tid] for tid in ids if tid in values}


def check_graph_file(path: str, seed: int) -> Outcome:
    """Load a oneDNN JSON file with ``graph_api.load_json``, compile it, run it on random feeds
    and compare with the reference interpreter. A load error must name the file.

    Example:
        >>> check_graph_file("/no/such/graph.json", 0).kind
        'clean'
    """
    from tilefuse.graph_api import compile_graph, load_json
    stage = "load"
    try:
        graph = load_json(path)
        stage = "compile"
        compiled = compile_graph(graph)
        feeds = graph_feeds(compiled.input_ports, seed)
        if feeds is None:
            return Outcome(OK, "loaded and compiled; not run (unknown, large or non-numeric inputs)")
        stage = "run"
        got = compiled.run(feeds)
        stage = "reference"
        want = reference_outputs(graph, feeds, compiled.output_ids)
    except Exception as err:      # classified below
        return classify_exception(err, stage, [path] if stage == "load" else ())
    problem = compare_outputs(got, want, REF_RTOL, REF_ATOL)
    return Outcome(WRONG, f"compiled graph differs from the reference interpreter: {problem}") if problem \
        else Outcome(OK, f"ran; {len(want)} output(s) equal to the reference interpreter")


def check_json_text(text: str, seed: int) -> Outcome:
    """``check_graph_file`` on ``text`` written to a temporary ``graph.json``.

    Example:
        >>> check_json_text("{", 0).kind
        'clean'
    """
    with tempfile.TemporaryDirectory(prefix="tilefuse-fuzz-") as tmp:
        path = os.path.join(tmp, "graph.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        return check_graph_file(path, seed)


def json_case(seed: int) -> Case:
    """A base graph (bundled, shrunk, or imported from a small ONNX model) with mutation
    ``seed % len(JSON_MUTATIONS)``, loaded from a file.

    Example:
        >>> make_case("json", 0).description.count(":") >= 1
        True
    """
    rng = np.random.default_rng(seed)
    name, data = json_base(rng)
    what, text = mutate_json(data, seed, rng)
    return Case("json", seed, f"{name}: {what}", lambda: check_json_text(text, seed))


# ---------------------------------------------------------------------------- feeds

@dataclass
class FeedBase:
    """A compiled graph to feed: the graph, its ``CompiledGraph``, and a tensor id that is
    neither an input nor bound (a computed tensor) and one that is a bound constant (None in a
    JSON graph).

    Example:
        >>> base = feed_base("onnx gather")
        >>> sorted(base.compiled.run(valid_feeds(base, 0))) == sorted(base.compiled.output_ids)
        True
    """
    name: str
    graph: object
    compiled: object
    computed_id: int
    constant_id: int | None


def _gather_model():
    """x f32[3, 4] -> MatMul(w) -> Gather(idx: an int64 input) -> Relu -> y; and z = x + c."""
    from fuzz_onnx_models import floats, initializer, node, onnx_model, value_info, INT64
    rng = np.random.default_rng(0)
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Gather", ["h", "idx"], ["g"], axis=0),
             node("Relu", ["g"], ["y"]), node("Add", ["x", "c"], ["z"])]
    return onnx_model(nodes, [value_info("x", [3, 4]), value_info("idx", [2], INT64)],
                      [value_info("y", None), value_info("z", None)],
                      [initializer("w", floats(rng, [4, 5])), initializer("c", floats(rng, [4]))], opset=13)


def _wildcard_model():
    """x f32[2, 3] -> Hardmax (a Wildcard, run by the reference) and x -> Relu -> Mul(c)."""
    from fuzz_onnx_models import floats, initializer, node, onnx_model, value_info
    nodes = [node("Hardmax", ["x"], ["y"], axis=1), node("Relu", ["x"], ["r"]), node("Mul", ["r", "c"], ["z"])]
    return onnx_model(nodes, [value_info("x", [2, 3])], [value_info("y", None), value_info("z", None)],
                      [initializer("c", floats(np.random.default_rng(1), [3]))], opset=13)


FEED_BASES = ("mlp.json shrunk", "conv_block.json shrunk", "onnx gather", "onnx wildcard")


@functools.lru_cache(maxsize=None)
def feed_base(name: str) -> FeedBase:
    """The compiled graph ``name`` of ``FEED_BASES`` (compiled once per process).

    Example:
        >>> feed_base("mlp.json shrunk").constant_id is None
        True
    """
    from tilefuse.graph_api import compile_graph, from_onnx, load_json
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name.startswith("onnx"):
            graph = from_onnx(_gather_model() if name == "onnx gather" else _wildcard_model())
        else:
            graph = load_json(io.StringIO(_json_base_texts()[name]))
        compiled = compile_graph(graph)
    inputs = {t.id for t in compiled.input_ports}
    computed = next(t.id for op in graph.ops for t in op.outputs if t.id not in inputs)
    constant = min(graph.constant_values) if graph.constant_values else None
    return FeedBase(name, graph, compiled, computed, constant)


def valid_feeds(base: FeedBase, seed: int) -> dict:
    """Random valid feeds of ``base`` by input id (integer inputs in [0, 3), valid Gather
    indices).

    Example:
        >>> sorted(valid_feeds(feed_base("onnx gather"), 0).values(), key=lambda a: a.dtype.kind)[0].dtype
        dtype('float32')
    """
    return graph_feeds(base.compiled.input_ports, seed)


def _strided(a: np.ndarray) -> np.ndarray:
    """A non-contiguous view holding the values of ``a``."""
    if a.ndim == 0:
        return a
    big = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
    view = big[..., ::2]
    view[...] = a
    return view


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` whose data address is aligned to its itemsize but not to 16
    bytes."""
    offset = a.dtype.itemsize if a.dtype.itemsize < 16 else 8
    buffer = np.zeros(a.nbytes + 64, np.uint8)
    start = (-buffer.ctypes.data) % 16 + offset
    view = buffer[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return view


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


def _with_specials(a: np.ndarray, rng) -> np.ndarray:
    """``a`` with some elements NaN, +inf, -inf, huge, denormal or -0.0 (floats only)."""
    a = a.copy()
    if a.dtype.kind != "f" or a.size == 0:
        return a
    flat = a.reshape(-1)
    for value in (np.nan, np.inf, -np.inf, 3e38, 1e-45, -0.0):
        if rng.random() < 0.6:
            flat[int(rng.integers(flat.size))] = value
    return a


def _per_array(make):
    def variant(base, feeds, rng):
        return {tid: make(a) for tid, a in feeds.items()}, feeds
    return variant


def _nan_inf(base, feeds, rng):
    special = {tid: _with_specials(a, rng) for tid, a in feeds.items()}
    return special, special


def _by_position(container):
    def variant(base, feeds, rng):
        return container(feeds[t.id] for t in base.compiled.input_ports), feeds
    return variant


def _broadcast_view(base, feeds, rng):
    views = {tid: np.broadcast_to(a.reshape(-1)[:1].reshape((1,) * a.ndim), a.shape) if a.size else a
             for tid, a in feeds.items()}
    return views, {tid: np.array(v) for tid, v in views.items()}


def _numpy_int_keys(base, feeds, rng):
    return {np.int64(tid): a for tid, a in feeds.items()}, feeds


def _second_run(base, feeds, rng):
    base.compiled.run({tid: random_array(rng, a.shape, a.dtype) for tid, a in feeds.items()})
    return feeds, feeds


def _one_input(feeds, rng):
    ids = sorted(feeds)
    return ids[int(rng.integers(len(ids)))]


def _wrong_shape(base, feeds, rng):
    tid = _one_input(feeds, rng)
    a = feeds[tid]
    changed = pick_str(rng, [a[..., None], a.reshape(-1) if a.ndim != 1 else a[None], np.concatenate([a.reshape(-1),
                                                                                                   a.reshape(-1)])])
    return {**feeds, tid: changed}, None


def _wrong_dtype(base, feeds, rng):
    tid = _one_input(feeds, rng)
    to = pick_str(rng, [np.float64, np.float16, np.int32, np.int64, np.bool_, np.uint8])
    if np.dtype(to) == feeds[tid].dtype:
        to = np.float64 if feeds[tid].dtype.kind != "f" else np.int32
    return {**feeds, tid: feeds[tid].astype(to)}, None


def _missing_input(base, feeds, rng):
    tid = _one_input(feeds, rng)
    return {k: v for k, v in feeds.items() if k != tid}, None


def _unknown_key(base, feeds, rng):
    key = pick_str(rng, [10 ** 6, -1, "x", 1.5, None, (0,)])
    return {**feeds, key: next(iter(feeds.values()))}, None


def _internal_key(base, feeds, rng):
    tid = base.constant_id if base.constant_id is not None and rng.random() < 0.7 else base.computed_id
    shape = base.graph.tensor(tid).shape
    dtype = np.dtype(base.graph.tensor(tid).dtype.numpy)
    return {**feeds, tid: np.zeros(shape, dtype)}, None


def _wrong_length(base, feeds, rng):
    arrays = [feeds[t.id] for t in base.compiled.input_ports]
    arrays = arrays[:-1] if rng.random() < 0.5 else arrays + [arrays[0]]
    return arrays, None


def _not_a_mapping(base, feeds, rng):
    return pick_str(rng, ["x", 5, None, {1, 2}, iter([]), b"feeds", np.zeros(3)]), None


def _non_array_value(base, feeds, rng):
    tid = _one_input(feeds, rng)
    a = feeds[tid]
    value = pick_str(rng, [a.tolist(), "text", None, object(), {"a": 1}, a.tolist() if a.ndim else [a.tolist()]])
    try:
        canonical = {**feeds, tid: np.asarray(value)}
    except Exception:             # not convertible: must be refused
        canonical = None
    return {**feeds, tid: value}, canonical


def _scalar_value(base, feeds, rng):
    tid = _one_input(feeds, rng)
    value = feeds[tid].dtype.type(1)
    return {**feeds, tid: value}, {**feeds, tid: np.asarray(value)}


def _big_endian(base, feeds, rng):
    tid = _one_input(feeds, rng)
    swapped = feeds[tid].astype(feeds[tid].dtype.newbyteorder(">"))
    return {**feeds, tid: swapped}, {**feeds, tid: feeds[tid]}


# (name, expectation, variant): "valid" must run right, "invalid" must be refused cleanly,
# "either" may do both (run right on its values, or refuse cleanly)
FEED_VARIANTS = [
    ("NaN, inf, huge and denormal values", "valid", _nan_inf),
    ("non-contiguous arrays", "valid", _per_array(_strided)),
    ("Fortran-order arrays", "valid", _per_array(np.asfortranarray)),
    ("read-only arrays", "valid", _per_array(_read_only)),
    ("16-byte unaligned arrays", "valid", _per_array(_unaligned)),
    ("a list in input order", "valid", _by_position(list)),
    ("a tuple in input order", "valid", _by_position(tuple)),
    ("zero-stride broadcast views", "valid", _broadcast_view),
    ("after a run on other values", "valid", _second_run),
    ("numpy integer keys", "either", _numpy_int_keys),
    ("one input of a wrong shape", "invalid", _wrong_shape),
    ("one input of a wrong dtype", "invalid", _wrong_dtype),
    ("one input missing", "invalid", _missing_input),
    ("an unknown key", "invalid", _unknown_key),
    ("a bound constant's or computed tensor's id", "invalid", _internal_key),
    ("a list of the wrong length", "invalid", _wrong_length),
    ("not a dict or list", "invalid", _not_a_mapping),
    ("a non-array value", "either", _non_array_value),
    ("a numpy scalar for an input", "either", _scalar_value),
    ("a big-endian array", "either", _big_endian),
]


def check_feeds(base: FeedBase, seed: int, expectation: str, variant) -> Outcome:
    """Run ``base`` on the feeds ``variant`` makes from valid random ones and classify: a
    ``valid`` variant must equal the reference interpreter, an ``invalid`` one must be refused
    cleanly, ``either`` may do both. The feeds must not be modified, and the compiled graph must
    still run right afterwards.

    Example:
        >>> check_feeds(feed_base("mlp.json shrunk"), 0, "invalid", _missing_input).kind
        'clean'
    """
    rng = np.random.default_rng(seed)
    feeds = valid_feeds(base, seed)
    argument, canonical = variant(base, feeds, rng)
    before = copy.deepcopy(argument) if not isinstance(argument, type(iter([]))) else argument
    try:
        got = base.compiled.run(argument)
    except Exception as err:      # classified below
        outcome = classify_exception(err, "run")
        if outcome.allowed and expectation == "valid":
            return Outcome(WRONG, f"refused a valid feed: {outcome.message}")
        return worst([outcome, _still_runs(base, seed)])
    if expectation == "invalid":
        return Outcome(WRONG, "accepted an invalid feed and returned outputs")
    outcome = _against_reference(base, got, canonical)
    return worst([outcome, _unchanged(argument, before), _still_runs(base, seed)])


def _against_reference(base: FeedBase, got: dict, canonical) -> Outcome:
    try:
        want = reference_outputs(base.graph, canonical, base.compiled.output_ids) if canonical is not None else None
    except Exception as err:      # the oracle refuses these feeds: run should have too
        if not is_clean_error(err):
            return classify_exception(err, "reference")
        want = None
    if want is None:
        return Outcome(WRONG, "accepted a feed the reference interpreter refuses")
    problem = compare_outputs(got, want, REF_RTOL, REF_ATOL)
    return Outcome(WRONG, f"differs from the reference interpreter: {problem}") if problem \
        else Outcome(OK, "ran; equal to the reference interpreter")


def _unchanged(argument, before) -> Outcome:
    if isinstance(argument, dict) and isinstance(before, dict):
        for key, value in argument.items():
            if isinstance(value, np.ndarray) and not np.array_equal(value, before[key], equal_nan=True):
                return Outcome(WRONG, f"run modified the caller's feed {key!r}")
    return Outcome(OK)


def _still_runs(base: FeedBase, seed: int) -> Outcome:
    """After a refused or accepted odd feed, the compiled graph runs valid feeds right."""
    feeds = valid_feeds(base, seed + 1)
    try:
        got = base.compiled.run(feeds)
        want = reference_outputs(base.graph, feeds, base.compiled.output_ids)
    except Exception as err:      # a compiled graph broken by an earlier call
        return Outcome(WRONG, f"the compiled graph no longer runs valid feeds: {describe_exception(err)}")
    problem = compare_outputs(got, want, REF_RTOL, REF_ATOL)
    return Outcome(WRONG, f"after the case, valid feeds give other outputs: {problem}") if problem else Outcome(OK)


def feeds_case(seed: int) -> Case:
    """Variant ``seed % len(FEED_VARIANTS)`` of the feeds of base graph
    ``(seed // len(FEED_VARIANTS)) % len(FEED_BASES)``.

    Example:
        >>> make_case("feeds", 2).description
        'mlp.json shrunk: Fortran-order arrays (valid)'
    """
    name, expectation, variant = FEED_VARIANTS[seed % len(FEED_VARIANTS)]
    base_name = FEED_BASES[(seed // len(FEED_VARIANTS)) % len(FEED_BASES)]
    return Case("feeds", seed, f"{base_name}: {name} ({expectation})",
                lambda: check_feeds(feed_base(base_name), seed, expectation, variant))


# ---------------------------------------------------------------------------- the fast slice

def _slice_seeds() -> dict:
    from fuzz_onnx_models import MODEL_GENERATORS
    from fuzz_patterns import PATTERNS
    from fuzz_saved import SAVED_ACTIONS
    from fuzz_store import STORE_SCENARIOS
    from fuzz_strided import LAYOUTS
    from fuzz_threads import THREAD_MODELS
    return {"onnx-bytes": list(range(45)), "onnx-models": list(range(6 * len(MODEL_GENERATORS))),
            "json": list(range(8 * len(JSON_MUTATIONS))),
            "feeds": list(range(len(FEED_VARIANTS) * len(FEED_BASES))),
            "store": list(range(10 * len(STORE_SCENARIOS))), "windows": list(range(30)),
            "patterns": list(range(3 * len(PATTERNS))), "saved-files": list(range(2 * len(SAVED_ACTIONS))),
            "threads": list(range(2 * len(THREAD_MODELS))), "strided-feeds": list(range(3 * len(LAYOUTS)))}


SLICE_SEEDS = _slice_seeds()
"""The seeds of the CI slice per class, consecutive from 0: every model generator six times,
every JSON mutation eight times, every store scenario ten times (each time with other random
parameters), every feed variant on every base graph, fifteen mutated copies of each bundled
model and of small generated ones; 30 random ConvTranspose and pool models, every model pattern
three times, every change of a saved file on a mapped and a read file, every threaded model
twice, every feed layout three times."""
