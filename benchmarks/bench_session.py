"""Start-up side by side: for each model, in fresh processes (nothing cached in memory), the
wall time of opening a session and running it once, and the process's peak RSS, for

* tilefuse **cold**: an empty kernel disk cache, every kernel compiled by LLVM;
* tilefuse **warm**: a new process on the cache the cold one filled (a restarted service);
* tilefuse **load**: ``load_compiled`` of the file the cold process saved;
* **onnxruntime**'s session;
* **OpenVINO** fp32, cold and with its ``CACHE_DIR`` filled (where installed).

Engines run one after another with a short pause between them (a process's threads may spin
after it exits on 2 cores). Timings include importing each engine.

Run: ``python benchmarks/bench_session.py [--models resnet50 bert-base] [--batch 1] [--seq 128]``
(bundled examples, the onnx package's light models, zoo models by name (``benchmarks/zoo.py``),
or .onnx paths). Inputs: a zoo model's manifest, else random values of each input's declared
type with symbolic dims bound to ``--batch``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import model_path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time, warnings
started = time.perf_counter()
warnings.simplefilter("ignore")
mode, model, saved, feeds_path, cache = sys.argv[1:6]
import numpy as np
feeds = dict(np.load(feeds_path))
if mode == "onnxruntime":
    import onnxruntime as ort
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, feeds)
elif mode.startswith("openvino"):
    import openvino as ov
    core = ov.Core()
    if mode == "openvino warm":
        core.set_property({"CACHE_DIR": cache})
    m = core.read_model(model)
    m.reshape({name: list(v.shape) for name, v in feeds.items()})
    compiled = core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    run = lambda: request.infer(feeds)
else:
    os.environ["TILEFUSE_CACHE_DIR"] = cache
    from tilefuse.graph_api import InferenceSession, load_compiled
    sess = load_compiled(saved) if mode == "load" else InferenceSession(model)
    run = lambda: sess.run(None, feeds)
ready = time.perf_counter()
run()
done = time.perf_counter()
def peak_mb():   # this program's high-water mark (ru_maxrss would carry the parent's over fork and exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
peak = peak_mb()      # before saving
if mode == "cold":
    sess.save(saved)
print(json.dumps({"open": ready - started, "first_run": done - ready, "peak_mb": peak}))
"""

MODES = ["cold", "warm", "load", "onnxruntime", "openvino cold", "openvino warm"]


def measure(mode: str, model: Path, saved: Path, feeds: Path, cache: Path) -> dict:
    """One fresh process opening ``model`` in ``mode`` (see ``MODES``) and running it once on
    the arrays of ``feeds`` (an .npz file): its timings (``open``: imports and session creation
    or load; ``first_run``) and peak RSS in MB. ``cache``: the kernel cache (tilefuse) or
    model cache (OpenVINO) folder.

    Example:
        >>> # measure("warm", Path("resnet50.onnx"), Path("/tmp/r.tfm"), Path("/tmp/f.npz"), Path("/tmp/c"))["open"]
    """
    # Python's bytecode cache on, as for an installed package (pip compiles it at install; an
    # editable checkout's first process writes it), where a sandbox may have turned it off
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(saved), str(feeds), str(cache)],
                          capture_output=True, text=True, check=True, cwd=REPO, env=env)
    os.sync()      # a file the process wrote (a saved session: 0.7 GB for ViT) is on disk before the next one starts
    return json.loads(done.stdout.strip().splitlines()[-1])


def feeds_of(model: Path, batch: int, seq: int) -> dict:
    """The arrays to run ``model`` on: its zoo manifest's (``NAME.json`` beside it), else random
    values of each input's declared type, symbolic dims bound to ``batch``."""
    manifest = model.with_suffix(".json")
    if manifest.exists():
        from zoo import feeds_for
        return feeds_for(json.loads(manifest.read_text()), batch, seq)
    import onnx
    from bench_onnx import model_feeds
    proto = onnx.load(str(model), load_external_data=False)
    initializers = {t.name for t in proto.graph.initializer}
    shapes = {vi.name: tuple(d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim)
              for vi in proto.graph.input if vi.name not in initializers}
    return model_feeds(proto, shapes)


def resolve(name: str) -> Path:
    """A model's path: an .onnx path, a zoo model's, a bundled example, else a light model."""
    if not name.endswith(".onnx"):
        from zoo import zoo_dir
        zoo = zoo_dir() / "models" / f"{name}.onnx"
        if zoo.exists():
            return zoo
    return model_path(name)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "resnet_block"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between processes")
    args = parser.parse_args(argv)
    try:
        import openvino  # noqa: F401
        modes = MODES
    except ImportError:
        modes = MODES[:4]
        print("(openvino is not installed: its columns are left out)")
    print(f"{'model':18} {'engine':14} {'open s':>7} {'1st run s':>9} {'total s':>8} {'peak MB':>8} "
          f"{'vs ort time':>11} {'vs ort RSS':>10}")
    for name in args.models:
        model = resolve(name)
        rows = {}
        with tempfile.TemporaryDirectory() as tmp:
            import numpy as np
            feeds = Path(tmp) / "feeds.npz"
            np.savez(feeds, **feeds_of(model, args.batch, args.seq))
            saved = Path(tmp) / f"{model.stem}.tfm"
            for mode in modes:
                cache = Path(tmp) / ("openvino-cache" if mode.startswith("openvino") else "kernels")
                if mode == "openvino warm":      # its cache filled by a first process
                    measure(mode, model, saved, feeds, cache)
                time.sleep(args.pause)
                rows[mode] = measure(mode, model, saved, feeds, cache)
            size = saved.stat().st_size / 2**20
        ort = rows["onnxruntime"]
        ort_total = ort["open"] + ort["first_run"]
        for mode, r in rows.items():
            total = r["open"] + r["first_run"]
            print(f"{model.stem:18} {mode:14} {r['open']:7.2f} {r['first_run']:9.3f} {total:8.2f} {r['peak_mb']:8.0f} "
                  f"{total / ort_total:10.2f}x {r['peak_mb'] / ort['peak_mb']:9.2f}x")
        print(f"{model.stem:18} saved file {size:.1f} MB")


if __name__ == "__main__":
    main()
