"""Tuners against each other: xgb, random and grid search, several seeds each, on a GEMM, a
convolution, a depthwise convolution and a softmax task, best so far against trials.

For every (task, tuner, seed) the task is tuned alone in a fresh in-memory database with
``autotune.tune`` (``--trials`` trials, batches of 8); its records, in measurement order, give
the best cost after each trial. Printed per task and tuner:

* the median over seeds of the best cost at the end and at a quarter and half of the trials;
* the trials each run needed to come within 5% of the best cost any run of the task found
  (the median over seeds; "-" when a run never did);
* tuning throughput, trials per second of wall time (build, check and timing included);
* how many trials xgb needs to reach random search's final best (median over tasks and seeds)
  against half the trials: what the cost model is for; exactly, and within 2% (the least of
  random search's many noisy measurements is biased low).

With matplotlib installed (the optional ``[plot]`` extra), ``--plot curves.png`` draws the
median best-so-far curve of each tuner, one panel per task.

Run: ``python benchmarks/bench_tuner.py [--trials 256] [--seeds 3] [--tasks gemm conv ...]``
(the defaults take about an hour on 2 cores; ``--trials 32 --seeds 1`` a few minutes).
"""
from common import unset_openblas_overrides

unset_openblas_overrides()

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import autotune  # noqa: E402
from autotune.plots import best_so_far  # noqa: E402
from autotune.record import first_measurements  # noqa: E402
from tensorir import compute, placeholder, reduce_axis, sum as rsum  # noqa: E402
from tensorir.ops import nn, window  # noqa: E402

TUNERS = ("xgb", "random", "grid")
WITHIN = 0.05           # "reached the best": within this share of the best cost any run found
NOISE = 0.02            # a measurement's noise: random search's best is the least of its many noisy
                        # measurements, so xgb is also judged against it with this slack


def gemm():
    A, B = placeholder((512, 512), name="A"), placeholder((512, 384), name="B", constant=True)
    r = reduce_axis((0, 512), name="r")
    return compute((512, 384), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="gemm")


def conv():
    x = placeholder((1, 56, 56, 64), name="x")
    w = placeholder((3, 3, 64, 64), name="w", constant=True)
    return window.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], data_format="NXC", weights_format="XIO")


def depthwise():
    x = placeholder((1, 96, 28, 28), name="x")
    w = placeholder((96, 1, 3, 3), name="w", constant=True)
    return window.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], groups=96, data_format="NCX", weights_format="OIX")


def softmax():
    return nn.softmax(placeholder((512, 1000), name="x"), axis=1)


TASKS = {"gemm": gemm, "conv": conv, "depthwise": depthwise, "softmax": softmax}


def run(task, tuner: str, seed: int, trials: int):
    """(best-so-far curve, trials per second) of one tuning run of ``task`` in a fresh db."""
    db = autotune.Database(":memory:")
    started = time.monotonic()
    autotune.tune([task], trials=trials, db=db, tuner=tuner, seed=seed, scheduler="sequential")
    seconds = time.monotonic() - started
    records = first_measurements(db.records(task.key))      # the trials, in measurement order
    db.close()
    return best_so_far(records), len(records) / seconds


def trials_to(curve, target: float):
    """The first trial (1-based) whose best is at most ``target``, or None."""
    return next((k + 1 for k, c in enumerate(curve) if c <= target), None)


def at(curve, trial: int) -> float:
    return curve[min(trial, len(curve)) - 1] if curve else math.inf


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--tuners", nargs="+", choices=TUNERS, default=list(TUNERS))
    parser.add_argument("--plot", metavar="PNG", help="draw the median curves (needs matplotlib)")
    args = parser.parse_args()
    curves, throughput = {}, {}
    for name in args.tasks:
        task = autotune.Task(TASKS[name]())
        print(f"{name}: {task.template_name} template, {len(task.space)} configs", flush=True)
        for tuner in args.tuners:
            for seed in range(args.seeds):
                curve, rate = run(task, tuner, seed, args.trials)
                curves[name, tuner, seed], throughput[name, tuner, seed] = curve, rate
                print(f"  {tuner:6} seed {seed}: best {at(curve, args.trials) * 1e3:.4f} ms after "
                      f"{len(curve)} trials, {rate:.1f} trials/s", flush=True)
    print(f"\nper task and tuner (median over {args.seeds} seed(s); 'to 95%': trials to come within "
          f"{WITHIN:.0%} of the best any run found)")
    print(f"  {'task':10} {'tuner':7} {'best ms':>9} {'at 1/4':>9} {'at 1/2':>9} {'to 95%':>7} {'trials/s':>9}")
    for name in args.tasks:
        overall = min(min(c) for (n, _, _), c in curves.items() if n == name and c)
        for tuner in args.tuners:
            runs = [curves[name, tuner, s] for s in range(args.seeds)]
            reach = median_or_none([trials_to(c, overall * (1 + WITHIN)) for c in runs])
            cells = [statistics.median(at(c, t) for c in runs) * 1e3
                     for t in (args.trials, max(1, args.trials // 4), max(1, args.trials // 2))]
            rate = statistics.median(throughput[name, tuner, s] for s in range(args.seeds))
            print(f"  {name:10} {tuner:7} {cells[0]:9.4f} {cells[1]:9.4f} {cells[2]:9.4f} "
                  f"{reach if reach is not None else '-':>7} {rate:9.1f}")
    if {"xgb", "random"} <= set(args.tuners):
        print()
        for slack in (0.0, NOISE):
            needed = []
            for name in args.tasks:
                for seed in range(args.seeds):
                    goal = at(curves[name, "random", seed], args.trials) * (1 + slack)
                    needed.append(trials_to(curves[name, "xgb", seed], goal))
            reached = [n for n in needed if n is not None]
            median = statistics.median([n if n is not None else math.inf for n in needed])
            median = "never (most runs do not)" if math.isinf(median) else f"{median:g}"
            within = f" within {slack:.0%}" if slack else ""
            print(f"xgb reaches random search's {args.trials}-trial best{within} in a median of {median} trials "
                  f"({len(reached)} of {len(needed)} runs reach it; the issue asks for at most {args.trials // 2})")
    if args.plot:
        plot(curves, args)


def plot(curves, args) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'tilefuse[plot]'")
        return
    fig, axes = plt.subplots(1, len(args.tasks), figsize=(4.5 * len(args.tasks), 3.6), squeeze=False)
    for ax, name in zip(axes[0], args.tasks):
        for tuner in args.tuners:
            runs = [curves[name, tuner, s] for s in range(args.seeds)]
            length = max(len(c) for c in runs)
            median = [statistics.median(at(c, t) for c in runs) * 1e3 for t in range(1, length + 1)]
            ax.plot(range(1, length + 1), median, label=tuner)
        ax.set_title(name)
        ax.set_xlabel("trials")
        ax.set_ylabel("best ms")
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
