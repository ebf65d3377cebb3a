"""Saved sessions against compiling: for each model, in fresh processes (so nothing is cached
in memory), the wall time of ``InferenceSession(model)`` plus its first run, against
``load_compiled(saved file)`` plus its first run, and the file's size. Also peak RSS of both
processes (before the compiling one saves) and of onnxruntime's session on the same model.

Run: ``python benchmarks/bench_session.py [--models resnet50 resnet_block]`` (bundled
examples, the onnx package's light models, or .onnx paths).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import model_path  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
import numpy as np
started = time.perf_counter()
warnings.simplefilter("ignore")
mode, model, saved = sys.argv[1:4]
if mode == "ort":
    import onnxruntime as ort
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
else:
    from tilefuse.graph_api import InferenceSession, load_compiled
    sess = InferenceSession(model) if mode == "compile" else load_compiled(saved)
ready = time.perf_counter()
x = sess.get_inputs()[0]
sess.run(None, {x.name: np.ones([d if isinstance(d, int) else 1 for d in x.shape], "float32")})
done = time.perf_counter()
def peak_mb():   # this program's high-water mark (ru_maxrss would carry the parent's over fork and exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
peak = peak_mb()      # before saving
if mode == "compile" and saved != "-":
    sess.save(saved)
print(json.dumps({"open": ready - started, "first_run": done - ready, "peak_mb": peak}))
"""


def measure(mode: str, model: Path, saved) -> dict:
    """One fresh process opening ``model`` (``mode``: compile, load or ort): its timings
    (``open``: import and compile, load, or session creation; ``first_run``) and peak RSS in
    MB. ``saved``: where compile saves the session and load reads it ("-": compile saves none).

    Example:
        >>> # measure("load", Path("resnet50.onnx"), Path("/tmp/resnet50.tfm"))["open"]
    """
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(saved)], capture_output=True,
                          text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "resnet_block"])
    args = parser.parse_args(argv)
    print(f"{'model':14} {'engine':22} {'open s':>8} {'1st run s':>9} {'total s':>8} {'peak MB':>8}")
    for name in args.models:
        model = model_path(name)
        with tempfile.TemporaryDirectory() as tmp:
            saved = Path(tmp) / f"{name}.tfm"
            rows = {"compile + first run": measure("compile", model, saved)}
            rows["load + first run"] = measure("load", model, saved)
            rows["onnxruntime session"] = measure("ort", model, saved)
            size = saved.stat().st_size / 2**20
        for engine, r in rows.items():
            print(f"{name:14} {engine:22} {r['open']:8.2f} {r['first_run']:9.3f} {r['open'] + r['first_run']:8.2f} "
                  f"{r['peak_mb']:8.0f}")
        total = {k: r["open"] + r["first_run"] for k, r in rows.items()}
        print(f"{name:14} saved file {size:.1f} MB; load is {total['compile + first run'] / total['load + first run']:.1f}x "
              f"faster than compiling")


if __name__ == "__main__":
    main()
