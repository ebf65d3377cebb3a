"""Where a model's time goes, as a share of this machine's FMA peak: each step of the graph
compiled with the templates' default configs and with a tuning database's picks, side by side.

The FMA peak and the copy bandwidth are measured first (``machine.py``). The two compiled
graphs are timed step by step as the tuner's check in the model times them
(``autotune.timing.time_steps``): taking turns in rounds after a pause and a warm-up,
each step keeping its best round's median. A
step's flop count is its task's (the direct algorithm's: a Winograd step computes fewer
multiplies than it counts, so its share can pass 100%). Printed:

* each compiled step: its ops and output shape, GFLOP, default and tuned ms with their shares
  of the peak, and whether its tuned config is its default one;
* the steps grouped by that: how much of the default's time tuning could change at all, and
  how close to the peak the rest already runs;
* two ceilings of tuned/default that follow: with the steps left at their default as measured
  and every tuned step free; and with each tuned Winograd step costing only its matrix
  products at the FMA peak (no transforms, no memory traffic: the multiplies it cannot skip),
  every other step as measured.

Run: ``python benchmarks/bench_peak_share.py resnet50 --db tuning.db [--rounds 5]`` (a bundled
example's name, a light model of the onnx package, or an .onnx path; the database from
``autotune tune``).
"""
from common import model_path, unset_openblas_overrides

unset_openblas_overrides()

import argparse  # noqa: E402
import warnings  # noqa: E402

from tilefuse import graph_api  # noqa: E402
from tilefuse.autotune import HistoryBest  # noqa: E402
from tilefuse.autotune.extract import tasks_by_workload  # noqa: E402
from tilefuse.autotune.model_check import random_feeds  # noqa: E402
from tilefuse.autotune.timing import time_steps  # noqa: E402
from machine import copy_bandwidth_gbs, fma_peak_gflops  # noqa: E402
from tilefuse.schedule.config_source import FixedConfigs  # noqa: E402
from tilefuse.tensorir.ops.winograd import tile_grid, transform_matrices  # noqa: E402


def winograd_products_flop(task, config) -> int:
    """The flops of the alpha^2 matrix products of ``task`` computed by Winograd as ``config``
    says (0 when it is not): tiles x input channels x output channels per point, x2.

    Example:
        >>> # winograd_products_flop(task, Config({..., "winograd": 4})) -> 57802752 for a 56x56x64 layer
    """
    m = config.values.get("winograd") if config is not None else None
    operands = getattr(task.template, "winograd", None)
    if not m or operands is None:
        return 0
    padded, _, _, stride = operands
    n, height, width, channels = task.template.anchor.output(0).shape
    rows, cols = tile_grid(height, width, m)
    alpha = transform_matrices(m, stride)[2].shape[0]
    return 2 * alpha * alpha * n * rows * cols * padded.shape[3] * channels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--db", required=True, help="the tuning database of the tuned configs")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    peak, copy = fma_peak_gflops(), copy_bandwidth_gbs()
    print(f"machine: FMA peak {peak:.1f} GFLOPS, copy {copy:.1f} GB/s (measured now)")
    graph = graph_api.from_onnx(str(model_path(args.model)))
    workloads = tasks_by_workload(graph)
    task_of = {index: task for task, indices in workloads.values() for index in indices}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engines = {"default": graph_api.compile_graph(graph, configs=FixedConfigs(lambda template: None)),
                   "tuned": graph_api.compile_graph(graph, configs=HistoryBest(args.db))}
    feeds = random_feeds(engines["default"].input_ports)
    times, _ = time_steps(engines, feeds, args.rounds)
    tuned_steps = {step.index: step for step in engines["tuned"].steps}

    def share(flop, seconds):
        return f"{flop / seconds / 1e9 / peak:6.0%}" if flop and seconds else "     -"

    print(f"{'step':>4}  {'ops':34} {'output':16} {'GFLOP':>6}  {'default ms':>10} {'peak':>6}  "
          f"{'tuned ms':>8} {'peak':>6}  config")
    groups = {"left at default": [0.0, 0.0, 0], "tuned": [0.0, 0.0, 0]}   # default s, tuned s, flop
    floor = 0.0         # the tuned steps' seconds if each were its Winograd products at the peak
    for index in sorted(times["default"]):
        task = task_of.get(index)
        flop = task.flop if task is not None else 0
        d, t = times["default"][index], times["tuned"].get(index, 0.0)
        config = tuned_steps[index].config
        untouched = task is None or config is None or config == task.template.default_config()
        group = groups["left at default" if untouched else "tuned"]
        group[0] += d
        group[1] += t
        group[2] += flop
        products = winograd_products_flop(task, config) if not untouched else 0
        floor += products / peak / 1e9 if products else (t if not untouched else 0.0)
        ops = "+".join(op.kind.value for op in tuned_steps[index].ops)
        shape = "x".join(map(str, task.outputs[0].shape)) if task is not None else ""
        print(f"{index:4}  {ops[:34]:34} {shape[:16]:16} {flop / 1e9:6.3f}  {d * 1e3:10.3f} {share(flop, d)}  "
              f"{t * 1e3:8.3f} {share(flop, t)}  {'default' if untouched else 'tuned'}")
    total_d = sum(g[0] for g in groups.values())
    total_t = sum(g[1] for g in groups.values())
    total_flop = sum(g[2] for g in groups.values())
    print()
    for name, (d, t, flop) in groups.items():
        print(f"{name:16}: default {d * 1e3:7.2f} ms ({d / total_d:4.0%} of its steps, {share(flop, d).strip()} of "
              f"the peak), tuned {t * 1e3:7.2f} ms ({share(flop, t).strip()})")
    print(f"{'all steps':16}: default {total_d * 1e3:7.2f} ms ({share(total_flop, total_d).strip()}), tuned "
          f"{total_t * 1e3:7.2f} ms ({share(total_flop, total_t).strip()}): tuned/default {total_d / total_t:.3f}x")
    left = groups["left at default"][1]
    if left:
        print(f"ceilings: the steps left at their default take {left * 1e3:.2f} ms tuned. Were every tuned step free, "
              f"tuned/default would be {total_d / left:.2f}x; were each Winograd step its products at the FMA "
              f"peak ({floor * 1e3:.2f} ms for all tuned steps), {total_d / (left + floor):.2f}x")


if __name__ == "__main__":
    main()
