"""Tuners against each other: xgb, random and grid search, several seeds each, on a GEMM, a
convolution, a depthwise convolution and a softmax task: each run's pick against trials.

For every (task, tuner, seed) the task is tuned alone in a fresh in-memory database with
``autotune.tune`` (``--trials`` trials, batches of 8). Its records, in measurement order, give
the run's pick after each trial: the config the tuner ranks first so far (the least cost
relative to the default timed around its batch, as ``autotune.tune`` ranks). Every run measures
the task's default config first, and where the default is the best point of the space every
tuner "finds" it at trial 1; so each run is also followed leaving the default out: its
*found* config after each trial, the best the search itself came upon.

A search's own measurements are single and noisy, and the least of many noisy measurements
is biased low: a run that measured more near-equal configs would look better by luck. So
after a task's runs, every config that was some run's pick or found config at some trial is
timed again, all of them in turn for several rounds in one process (``ROUNDS``; a config's
cost is its best round), and a run's curves are the re-timed costs of its picks. Printed per
task and tuner (medians over seeds):

* the final pick's cost (what the tuner hands over), and the found config's cost at the end
  and at a quarter and half of the trials;
* the trials each run needed to find a config within 5% of the best any run of the task
  found ("-" when a run never did);
* tuning throughput, trials per second of wall time (build, check and timing included);
* how many trials xgb needs to be as good as random search after all its trials (median over
  tasks and seeds) against half the trials, what the cost model is for: for found configs and
  for picks, exactly and within 2% (the re-timing's own noise), and per task and seed.

With matplotlib installed (the optional ``[plot]`` extra), ``--plot curves.png`` draws the
median curve of found configs of each tuner, one panel per task.

Run: ``python benchmarks/bench_tuner.py [--trials 256] [--seeds 3] [--tasks gemm conv ...]``
(the defaults take about 30 minutes on 2 cores; ``--trials 32 --seeds 1`` a few minutes).
"""
from common import unset_openblas_overrides

unset_openblas_overrides()

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from tilefuse import autotune  # noqa: E402
from tilefuse.autotune.measure import MeasureOptions, measure_batch  # noqa: E402
from tilefuse.autotune.record import config_key, first_measurements  # noqa: E402
from tilefuse.autotune.timing import Yardstick, rounds_in_turn  # noqa: E402
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum  # noqa: E402
from tilefuse.tensorir.ops import nn, window  # noqa: E402

TUNERS = ("xgb", "random", "grid")
WITHIN = 0.05           # "reached the best": within this share of the best pick any run made
NOISE = 0.02            # the re-timing's noise: xgb is also judged against random search with this slack
ROUNDS = 5              # rounds of re-timing the picks, each pick once per round
RETIME = MeasureOptions(repeat=5, min_repeat_ms=1.0)    # one round of a pick: the median of these


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
    """(``{"pick": keys, "found": keys}``, a key -> config map of both, trials per second) of
    one tuning run of ``task`` in a fresh db. ``pick`` is the run's pick after each trial, a
    config key (None before the first ok trial); ``found`` is the same leaving out the default
    config, which every run measures first: the best the search itself found."""
    db = autotune.Database(":memory:")
    started = time.monotonic()
    autotune.tune([task], trials=trials, db=db, tuner=tuner, seed=seed, scheduler="sequential")
    seconds = time.monotonic() - started
    records = db.records(task.key)
    db.close()
    default_key = config_key(dict(task.template.default_config().values))
    stick = Yardstick(default_key)
    stick.note(records)
    trials_made = first_measurements(records)           # the trials, in measurement order
    sequences, configs = {}, {}
    for kind, skip in (("pick", None), ("found", default_key)):
        keys, best, pick = [], math.inf, None
        for r in trials_made:
            if r.is_ok and r.config_key != skip and stick.cost(r.config_key, r.mean_cost) < best:
                best, pick = stick.cost(r.config_key, r.mean_cost), r.config_key
                configs[pick] = dict(r.config)
            keys.append(pick)
        sequences[kind] = keys
    return sequences, configs, len(trials_made) / seconds


def retime(task, configs: dict) -> dict:
    """Config key -> cost (seconds) of each of ``configs`` (key -> config), timed in turn for
    ``ROUNDS`` rounds in this process (the best round's median; inf when it failed)."""
    keys = list(configs)
    rounds = rounds_in_turn(lambda batch: measure_batch(task, batch, RETIME), [configs[k] for k in keys], ROUNDS)
    return {key: min(costs) for key, costs in zip(keys, rounds)}


def trials_to(curve, target: float):
    """The first trial (1-based) whose pick costs at most ``target``, or None."""
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
    curves, throughput = {"pick": {}, "found": {}}, {}
    for name in args.tasks:
        task = autotune.Task(TASKS[name]())
        print(f"{name}: {task.template_name} template, {len(task.space)} configs", flush=True)
        sequences, configs = {}, {}
        for tuner in args.tuners:
            for seed in range(args.seeds):
                sequences[tuner, seed], found, throughput[name, tuner, seed] = run(task, tuner, seed, args.trials)
                configs.update(found)
                print(f"  {tuner:6} seed {seed}: {len(sequences[tuner, seed]['pick'])} trials, "
                      f"{throughput[name, tuner, seed]:.1f} trials/s", flush=True)
        costs = retime(task, configs)
        print(f"  {len(configs)} picks timed again, {ROUNDS} rounds", flush=True)
        for (tuner, seed), kinds in sequences.items():
            for kind, keys in kinds.items():
                curves[kind][name, tuner, seed] = [math.inf if k is None else costs[k] for k in keys]
    print(f"\nper task and tuner, median over {args.seeds} seed(s) of the re-timed cost of the run's pick "
          f"(ms): with the default ('pick') and without it ('found'); 'to 95%': trials to a found config "
          f"within {WITHIN:.0%} of the best any run of the task found")
    print(f"  {'task':10} {'tuner':7} {'pick':>9} {'found':>9} {'at 1/4':>9} {'at 1/2':>9} {'to 95%':>7} {'trials/s':>9}")
    for name in args.tasks:
        found = {k: c for k, c in curves["found"].items() if k[0] == name}
        overall = min(min(c) for c in found.values() if c)
        for tuner in args.tuners:
            runs = [found[name, tuner, s] for s in range(args.seeds)]
            reach = median_or_none([trials_to(c, overall * (1 + WITHIN)) for c in runs])
            pick = statistics.median(at(curves["pick"][name, tuner, s], args.trials) for s in range(args.seeds))
            cells = [statistics.median(at(c, t) for c in runs) * 1e3
                     for t in (args.trials, max(1, args.trials // 4), max(1, args.trials // 2))]
            rate = statistics.median(throughput[name, tuner, s] for s in range(args.seeds))
            print(f"  {name:10} {tuner:7} {pick * 1e3:9.4f} {cells[0]:9.4f} {cells[1]:9.4f} {cells[2]:9.4f} "
                  f"{reach if reach is not None else '-':>7} {rate:9.1f}")
    if {"xgb", "random"} <= set(args.tuners):
        print()
        for kind in ("found", "pick"):
            for slack in (0.0, NOISE):
                needed, per_task = [], []
                for name in args.tasks:
                    mine = [trials_to(curves[kind][name, "xgb", seed],
                                      at(curves[kind][name, "random", seed], args.trials) * (1 + slack))
                            for seed in range(args.seeds)]
                    needed += mine
                    per_task.append(f"{name} {'/'.join('-' if n is None else str(n) for n in mine)}")
                reached = [n for n in needed if n is not None]
                median = statistics.median([n if n is not None else math.inf for n in needed])
                median = "never (most runs do not)" if math.isinf(median) else f"{median:g}"
                within = f" within {slack:.0%}" if slack else ""
                print(f"{kind}: xgb is as good as random search's {args.trials}-trial {kind}{within} after a "
                      f"median of {median} trials ({len(reached)} of {len(needed)} runs get there; the issue "
                      f"asks for at most {args.trials // 2})\n  per seed: {', '.join(per_task)}")
    if args.plot:
        plot(curves["found"], args)


def plot(curves, args) -> None:
    """Each tuner's median curve of found configs, one panel per task."""
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
        ax.set_ylabel("found config ms (timed again)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
