"""Build tilefuse's wheel, install it into a fresh venv beside PyPI's ``schedule`` and
``autotune``, and check that all three work there.

PyPI has unrelated top-level packages named ``schedule`` (a job scheduler) and ``autotune``;
tilefuse installs only ``tilefuse`` (``tilefuse.tensorir``, ``tilefuse.schedule``,
``tilefuse.graph_api``, ``tilefuse.autotune``) and the ``autotune`` command. This script installs
packages, so it runs outside the unit suite:

    python scripts/check_installed_wheel.py            # about a minute with pip's cache warm

It checks, each step printed as it passes:
- the wheel holds only ``tilefuse/...`` (no top-level ``schedule`` or ``autotune``) and its
  package data (``tilefuse/tensorir/runtime/threadpool.ll``);
- in a venv where PyPI's ``schedule`` and ``autotune`` were installed first, installing the wheel
  leaves both importable and working (``schedule.every``, ``autotune.main``);
- a session runs from the installed wheel, not from this source tree (run from an empty folder,
  with ``tilefuse.__file__`` under the venv), and its outputs match onnxruntime's where it is
  installed in the running interpreter;
- the ``autotune`` command of the wheel runs ``autotune graph`` on a bundled example.

Exit 0 when everything holds, 1 with the failing step's output otherwise.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEIGHBOURS = ["schedule", "autotune"]          # PyPI's packages of those names

SESSION_CHECK = textwrap.dedent("""
    import sys, numpy as np, tilefuse, schedule, autotune
    from pathlib import Path
    venv = Path(sys.prefix).resolve()
    for module in (tilefuse, tilefuse.tensorir, tilefuse.graph_api):
        assert venv in Path(module.__file__).resolve().parents, f"{module.__name__} from {module.__file__}"
    assert (Path(tilefuse.tensorir.__file__).parent / "runtime" / "threadpool.ll").is_file()
    sess = tilefuse.InferenceSession(sys.argv[1])
    x = sess.get_inputs()[0]
    feed = {x.name: np.random.default_rng(0).standard_normal(x.shape).astype("float32")}
    y, = sess.run(None, feed)
    np.save(sys.argv[2], y)
    np.save(sys.argv[3], feed[x.name])
    print("tilefuse", tilefuse.__version__, "from", Path(tilefuse.__file__).parent, "output", y.shape)
""")

NEIGHBOUR_CHECK = textwrap.dedent("""
    import schedule, autotune
    from pathlib import Path
    ran = []
    job = schedule.every(1).seconds.do(lambda: ran.append(1))
    job.run()
    assert ran == [1], ran
    assert callable(autotune.main), "PyPI's autotune lost its main"
    assert not hasattr(schedule, "create_schedule") and not hasattr(autotune, "tune")
    print("PyPI's schedule from", Path(schedule.__file__).parent, "and autotune from", Path(autotune.__file__).parent)
""")


class CheckFailed(Exception):
    pass


def run(args, cwd, what):
    print(f"-- {what}", flush=True)
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CheckFailed(f"{what} failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


def build_wheel(out: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT], out, "build the wheel")
    wheel, = out.glob("tilefuse-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    if tops != {"tilefuse"}:
        raise CheckFailed(f"the wheel installs top-level names {sorted(tops)}, not only tilefuse")
    if "tilefuse/tensorir/runtime/threadpool.ll" not in names:
        raise CheckFailed("the wheel lacks tilefuse/tensorir/runtime/threadpool.ll")
    print(f"   {wheel.name}: {len(names)} files, all under tilefuse/, package data included")
    return wheel


def check(work: Path) -> None:
    wheel = build_wheel(work)
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv], work, "create a fresh venv")
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    run([python, "-m", "pip", "install", "-q", *NEIGHBOURS], work, "install PyPI's schedule and autotune first")
    run([python, "-m", "pip", "install", "-q", wheel], work, "install the tilefuse wheel beside them")
    empty = work / "elsewhere"
    empty.mkdir()
    print("  ", run([python, "-c", NEIGHBOUR_CHECK], empty, "PyPI's schedule and autotune still work").strip())
    model = ROOT / "examples" / "resnet_block.onnx"
    ours, feed = work / "ours.npy", work / "feed.npy"
    print("  ", run([python, "-c", SESSION_CHECK, model, ours, feed], empty,
                    "a session runs from the installed wheel").strip())
    compare_with_onnxruntime(model, ours, feed)
    dot = empty / "graph.dot"
    run([bin_dir / "autotune", "graph", ROOT / "examples" / "mlp.json", "-o", dot], empty,
        "the wheel's autotune command")
    if "digraph" not in dot.read_text():
        raise CheckFailed("autotune graph wrote no DOT graph")
    print(f"   autotune graph wrote {dot.stat().st_size} bytes of DOT")


def compare_with_onnxruntime(model: Path, ours: Path, feed: Path) -> None:
    try:
        import numpy as np
        import onnxruntime
    except ImportError:
        print("   (onnxruntime is not installed here: outputs not compared)")
        return
    x = np.load(feed)
    sess = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want, = sess.run(None, {sess.get_inputs()[0].name: x})
    got = np.load(ours)
    error = float(abs(got - want).max())
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        raise CheckFailed(f"the installed session's output differs from onnxruntime's by {error:.3g}")
    print(f"   matches onnxruntime (max |diff| {error:.2g})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    try:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            check(args.keep.resolve())
        else:
            with tempfile.TemporaryDirectory(prefix="tilefuse-wheel-") as work:
                check(Path(work))
    except CheckFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print("the installed wheel works beside PyPI's schedule and autotune")
    return 0


if __name__ == "__main__":
    sys.exit(main())
