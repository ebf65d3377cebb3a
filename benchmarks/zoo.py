"""The model zoo: transformer and CNN architectures people deploy, exported to ONNX with random
weights, run side by side with onnxruntime and OpenVINO.

* ``export``: builds the zoo's own venv (``benchmarks/requirements-zoo.txt``: torch,
  torchvision, transformers; never a dependency of the package, its tests or CI) and runs
  ``zoo_export.py`` in it, which writes each model's ``.onnx`` and its manifest (inputs and
  what to feed them) to the zoo folder. Models already there are kept (``--force`` redoes).
* ``bench``: for every exported model, binds the symbolic batch and sequence (``--batch``,
  ``--seq``), makes the feeds (int64 ids and masks, images, audio features), checks every
  output of tilefuse and of OpenVINO against onnxruntime's (rtol 1e-3, atol 1e-3 of the
  output's largest magnitude), then times the engines in interleaved blocks with pauses, best
  block of ``--rounds``. Prints a table with ratios (onnxruntime's time / the engine's: above 1
  is faster than onnxruntime) and their geomean per kind, writes a PNG bar chart (``--png``)
  and, with ``--profile``, tilefuse's slowest partitions per model.

The zoo folder is ``$TILEFUSE_ZOO_DIR``, else ``~/.cache/tilefuse-zoo``. Nothing is
downloaded at run time: the weights are random (seeded), the venv installs from the
machine's package index.

Run: ``python benchmarks/zoo.py export`` then ``python benchmarks/zoo.py bench [--models
bert-base resnet18] [--kind transformer] [--batch 1] [--seq 128] [--strict] [--profile]``.
"""
from common import timed_interleaved, unset_openblas_overrides

unset_openblas_overrides()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-zoo.txt"


def zoo_dir() -> Path:
    """Where the zoo keeps its venv and models.

    Example:
        >>> zoo_dir().name in ("tilefuse-zoo", Path(os.environ.get("TILEFUSE_ZOO_DIR", "x")).name)
        True
    """
    return Path(os.environ.get("TILEFUSE_ZOO_DIR") or Path.home() / ".cache" / "tilefuse-zoo")


# ---------------------------------------------------------------------------- export

def ensure_venv(folder: Path) -> Path:
    """The zoo venv's python, created and filled from requirements-zoo.txt when missing or
    when the requirements changed since."""
    venv = folder / "venv"
    python = venv / "bin" / "python"
    stamp = venv / "requirements-zoo.txt"
    if python.exists() and stamp.exists() and stamp.read_text() == REQUIREMENTS.read_text():
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(REQUIREMENTS.read_text())
    return python


def export(args) -> int:
    folder = zoo_dir()
    python = ensure_venv(folder)
    models = folder / "models"
    names = args.models or subprocess.run(
        [str(python), "-c", "import zoo_export; print(' '.join(zoo_export.names()))"], cwd=HERE,
        capture_output=True, text=True, check=True).stdout.split()
    todo = [n for n in names if args.force or not (models / f"{n}.json").exists()]
    print(f"zoo: {len(names) - len(todo)} model(s) already in {models}, exporting {len(todo)}")
    if not todo:
        return 0
    return subprocess.run([str(python), str(HERE / "zoo_export.py"), str(models), *todo]).returncode


# ---------------------------------------------------------------------------- feeds

def feeds_for(manifest: dict, batch: int, sequence: int, seed: int = 0) -> dict:
    """{input name: array} for a manifest's inputs with "batch" and "sequence" bound.

    Example:
        >>> spec = {"inputs": [{"name": "ids", "dtype": "int64", "dims": ["batch", "sequence"],
        ...                     "feed": "ids", "high": 100}]}
        >>> f = feeds_for(spec, 2, 5)["ids"]
        >>> f.shape, f.dtype, bool((f >= 0).all() and (f < 100).all())
        ((2, 5), dtype('int64'), True)
    """
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in manifest["inputs"]:
        shape = [batch if d == "batch" else sequence if d == "sequence" else int(d) for d in spec["dims"]]
        kind = spec["feed"]
        if kind == "ids":
            feeds[spec["name"]] = rng.integers(0, spec["high"], shape, dtype=np.int64)
        elif kind in ("ones", "zeros"):
            feeds[spec["name"]] = (np.ones if kind == "ones" else np.zeros)(shape, np.int64)
        else:
            feeds[spec["name"]] = rng.standard_normal(shape).astype(spec["dtype"])
    return feeds


def assert_close(name: str, got: list, want: list) -> float:
    """The largest |got - want| over the outputs, each scaled by its output's largest magnitude;
    raises AssertionError past rtol 1e-3 / atol 1e-3 of that magnitude."""
    worst = 0.0
    for k, (g, w) in enumerate(zip(got, want)):
        scale = float(np.abs(w).max()) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale, err_msg=f"{name}: output {k}")
        if w.size and scale > 0:
            worst = max(worst, float(np.abs(g.astype(np.float64) - w).max()) / scale)
    return worst


# ---------------------------------------------------------------------------- engines

def openvino_runner(path: Path, feeds: dict):
    """OpenVINO's CPU plugin at fp32 on the model reshaped to the feeds' shapes, or None when
    openvino is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    model = core.read_model(str(path))
    model.reshape({name: list(v.shape) for name, v in feeds.items()})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    outputs = list(compiled.outputs)

    def run():
        result = request.infer(feeds)
        return [np.asarray(result[o]) for o in outputs]
    return run


def bench_model(path: Path, manifest: dict, args) -> dict:
    """One model: {engine: seconds} after every engine's outputs matched onnxruntime's, plus
    "compile s" and "error" entries."""
    import onnxruntime
    from tilefuse import InferenceSession
    from tilefuse.tensorir.errors import TilefuseError
    feeds = feeds_for(manifest, args.batch, args.seq)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    engines = {"onnxruntime": lambda: session.run(None, feeds)}
    row = {}
    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = InferenceSession(str(path), strict=args.strict)
            got = ours.run(None, feeds)
    except (TilefuseError, NotImplementedError, ValueError) as err:    # a refusal (strict: any fallback)
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
        ours = None
    row["compile s"] = time.monotonic() - started
    if ours is not None:
        row["max err"] = assert_close("tilefuse", got, want)
        engines["tilefuse"] = lambda: ours.run(None, feeds)
    try:
        openvino = openvino_runner(path, feeds)
    except Exception as err:          # OpenVINO's own failures are reported, not ours to fix
        print(f"  openvino failed: {type(err).__name__}: {str(err)[:160]}")
        openvino = None
    if openvino is not None:
        assert_close("openvino", openvino(), want)
        engines["openvino"] = openvino
    row.update(timed_interleaved(engines, args.rounds, pause=0.1))
    if args.profile and ours is not None:
        from machine import fma_peak_gflops
        print_profile(ours, feeds, args.top, fma_peak_gflops())
    return row


def print_profile(session, feeds: dict, top: int, peak_gflops: float) -> None:
    """The slowest partitions of the session's compiled graph for these feeds, each timed where
    a run reaches it (``CompiledGraph.step_times``: its weights from memory as in a real run,
    not from cache as when a step is timed alone; the best of 10 runs), with its GFLOP and
    its share of the FMA peak, then the same partitions (ops and output shape) summed."""
    from bench_onnx import _describe
    from tilefuse.graph_api.profiler import multiply_add_flop
    key = tuple(np.asarray(v).shape for v in feeds.values())
    compiled = session._compiled[key]
    graph = compiled.graph
    tf_feeds = {port.id: feeds[name] for port, name in zip(
        graph.input_ports, [list(feeds)[k] for k in compiled.fed])}
    steps = {step.index: step for step in graph._run_steps}
    times = {index: min(seconds) for index, seconds in graph.step_times(tf_feeds, runs=10).items()}
    total = sum(times.values())

    def row(seconds, flop):
        share = f"{flop / seconds / 1e9 / peak_gflops:6.0%}" if flop and seconds else f"{'-':>6}"
        return f"{seconds * 1e6:9.1f} {seconds / total * 100:5.1f}% {flop / 1e9:7.3f} {share}"
    flops = {index: multiply_add_flop(steps[index].ops) for index in times}
    print(f"    steps timed in a run sum to {total * 1e3:.2f} ms; FMA peak {peak_gflops:.0f} GFLOPS")
    print(f"    {'step us':>9} {'share':>6} {'GFLOP':>7} {'peak':>6}  partition")
    for index in sorted(times, key=lambda i: -times[i])[:top]:
        print(f"    {row(times[index], flops[index])}  {_describe(steps[index])}")
    kinds = {}
    for index, seconds in times.items():       # the same partition (ops and output shape) summed
        entry = kinds.setdefault(_describe(steps[index]), [0, 0.0, 0])
        entry[0] += 1
        entry[1] += seconds
        entry[2] += flops[index]
    print(f"    by partition: {'count':>5} {'us':>9} {'share':>6} {'GFLOP':>7} {'peak':>6}")
    for name, (count, seconds, flop) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"    {count:5d} {row(seconds, flop)}  {name}")


# ---------------------------------------------------------------------------- table

def geomean(values) -> float:
    """The geometric mean of positive values (nan for none).

    Example:
        >>> round(geomean([0.5, 2.0, 1.0]), 6)
        1.0
    """
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def print_table(rows: dict, manifests: dict) -> None:
    print(f"\n{'model':24} {'kind':11} {'onnxruntime ms':>14} {'tilefuse ms':>11} {'speed':>6} "
          f"{'openvino ms':>11} {'speed':>6} {'compile s':>9}")
    for kind in ("transformer", "cnn"):
        ours, vino = [], []
        for name, row in rows.items():
            if manifests[name]["kind"] != kind:
                continue
            ort = row["onnxruntime"]
            tf, ov = row.get("tilefuse", math.nan), row.get("openvino", math.nan)
            ours.append(ort / tf)
            vino.append(ort / ov)
            print(f"{name:24} {kind:11} {ort * 1e3:14.2f} {tf * 1e3:11.2f} {ort / tf:5.2f}x {ov * 1e3:11.2f} "
                  f"{ort / ov:5.2f}x {row['compile s']:9.1f}" + (f"  {row['error']}" if "error" in row else ""))
        if ours:
            print(f"{'geomean ' + kind:36} {'':14} {geomean(ours):5.2f}x {'':11} {geomean(vino):5.2f}x")


def plot(rows: dict, path: str) -> None:
    """A bar chart of every engine's speed relative to onnxruntime, per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(rows)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(names)), 4))
    for k, engine in enumerate(("tilefuse", "openvino")):
        speeds = [rows[n]["onnxruntime"] / rows[n].get(engine, math.nan) for n in names]
        ax.bar([i + 0.4 * k for i in range(len(names))], [0 if math.isnan(s) else s for s in speeds], 0.4,
               label=engine)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.2 for i in range(len(names))], names, rotation=45, ha="right")
    ax.set_ylabel("speed vs onnxruntime (higher is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"chart: {path}")


def bench(args) -> int:
    import onnxruntime
    models = zoo_dir() / "models"
    manifests = {p.stem: json.loads(p.read_text()) for p in sorted(models.glob("*.json"))}
    if not manifests:
        print(f"no models in {models}: run `python benchmarks/zoo.py export` first", file=sys.stderr)
        return 2
    chosen = args.models or [n for n, m in manifests.items() if args.kind in (None, m["kind"])]
    missing = [n for n in chosen if n not in manifests]
    if missing:
        print(f"not exported: {missing}; the zoo has {sorted(manifests)}", file=sys.stderr)
        return 2
    try:
        import openvino
        vino = f"openvino {openvino.__version__}"
    except ImportError:
        vino = "openvino not installed"
    print(f"batch {args.batch}, sequence {args.seq}; onnxruntime {onnxruntime.__version__}, {vino}; "
          f"best block of {args.rounds} rounds, interleaved")
    rows = {}
    for name in chosen:
        print(f"{name} ({manifests[name]['exporter']})", flush=True)
        rows[name] = bench_model(models / f"{name}.onnx", manifests[name], args)
        row = rows[name]
        tf = row.get("tilefuse", math.nan)
        print(f"  onnxruntime {row['onnxruntime'] * 1e3:.2f} ms, tilefuse {tf * 1e3:.2f} ms "
              f"({row['onnxruntime'] / tf:.2f}x)" + (f", {row['error']}" if "error" in row else ""), flush=True)
    print_table(rows, manifests)
    if args.png:
        plot(rows, args.png)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="build the zoo venv and export the models")
    ex.add_argument("models", nargs="*", help="model names (default: all)")
    ex.add_argument("--force", action="store_true", help="export again models already exported")
    be = sub.add_parser("bench", help="time the exported models against onnxruntime and OpenVINO")
    be.add_argument("--models", nargs="+", help="model names (default: all exported)")
    be.add_argument("--kind", choices=["transformer", "cnn"], help="only this kind of model")
    be.add_argument("--batch", type=int, default=1)
    be.add_argument("--seq", type=int, default=128, help="sequence length of text models (default 128)")
    be.add_argument("--rounds", type=int, default=5)
    be.add_argument("--strict", action="store_true", help="compile with strict=True (no reference fallbacks)")
    be.add_argument("--profile", action="store_true", help="tilefuse's slowest partitions per model")
    be.add_argument("--top", type=int, default=10, help="partitions in a profile (default 10)")
    be.add_argument("--png", help="write a bar chart here")
    args = parser.parse_args(argv)
    return export(args) if args.command == "export" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
