"""A long fuzz campaign over tilefuse's inputs: many seeded cases of the fuzz suite's classes,
each batch in a subprocess with a per-case timeout, so that crashes and hangs are counted too.

Run it from the repository root, in the project's virtual environment:

    python benchmarks/fuzz_campaign.py                        # 1200 cases over all classes
    python benchmarks/fuzz_campaign.py --cases 300 --seed 1000 --classes json,feeds --timeout 30
    python benchmarks/fuzz_campaign.py --json results.json    # every case's outcome, for later

Case classes (``tests/fuzz/fuzz_cases.py`` builds them; the CI slice in ``tests/fuzz`` runs a
fixed set of seeds of the same classes):

* ``onnx-bytes``: bundled and small ONNX models with bytes flipped, truncated, inserted, deleted,
  overwritten, fed to ``graph_api.onnx.import_onnx`` as bytes and as a file, then compiled, run
  and compared with onnxruntime;
* ``onnx-models``: small models built with ``onnx.helper``, valid ones of many op types (must
  equal onnxruntime) and wrong ones on purpose (must be refused cleanly);
* ``json``: mutated oneDNN Graph JSON files through ``graph_api.load_json``, compiled and run
  against the reference interpreter;
* ``feeds``: ``CompiledGraph.run`` with wrong or odd feeds;
* ``store``: tuning logs and databases, damaged every which way, through ``autotune.log``,
  ``autotune.database`` and the ``autotune`` command;
* ``windows``: one ConvTranspose or pool with random auto_pad, ceil_mode, output_shape,
  output_padding, dilations, asymmetric pads, count_include_pad, MaxPool's Indices and
  storage_order, against onnxruntime (never refused at run time);
* ``patterns``: attention with masks, GELU, LayerNorm, squeeze-excite and grouped convolutions
  with random small shapes, against onnxruntime;
* ``saved-files``: a loaded session's file saved over, replaced, truncated, overwritten in
  place, removed, appended to or touched, then the live session run (right or a clean error);
* ``threads``: threads running one session with symbolic dims over many shapes, against
  onnxruntime, with a timeout;
* ``strided-feeds``: broadcast, negative-stride, sliced, Fortran-order, transposed, read-only
  and zero-size feeds, against the same session on contiguous copies.

Outcomes: ``clean`` (a clean error), ``clean-unnamed`` (clean, but the message names no file or
model), ``equal-ort``, ``ort-rejects`` (onnxruntime refuses what tilefuse ran: listed for
review), ``ok`` (accepted and consistent), and the bad ones: ``LEAK`` (a third-party or internal
exception escaped, or a command printed a traceback), ``WRONG`` (a result or a file left wrong),
``CRASH`` (the worker process died) and ``HANG`` (a case ran over ``--timeout``). N cases are
split evenly over the classes, seeds S, S+1, ... in each.

Prints a table of counts per class and outcome, the details (class, seed, description, message)
of every bad case, the cases onnxruntime rejects, and the clean-but-unnamed messages grouped.
Exit 0 when no case is bad, 1 otherwise. Workers run with ``TILEFUSE_MAX_TENSOR_BYTES``
(``--max-tensor-bytes``, default 2 GiB) and an address-space limit (``--memory-limit``,
default 12 GiB), so that a runaway allocation fails instead of exhausting a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FUZZ_DIR = REPO / "tests" / "fuzz"
STARTUP_TIMEOUT = 180.0
BATCH_SIZE = 40
for _path in (str(REPO), str(FUZZ_DIR)):      # the fuzz cases live with the tests
    if _path not in sys.path:
        sys.path.insert(0, _path)


# ---------------------------------------------------------------------------- the worker

def worker_main(memory_limit: int) -> int:
    """Run the cases ([class, seed] pairs, JSON on stdin), writing ``START index`` before each
    and ``DONE {json}`` after it on the original stdout; anything else printed goes to stderr.

    Example:
        >>> # echo '[["json", 3]]' | python benchmarks/fuzz_campaign.py --worker
    """
    import faulthandler
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                              # stray prints (C libraries too) go to stderr
    faulthandler.enable(sys.stderr)
    _limit_memory(memory_limit)
    from fuzz_cases import make_case
    cases = json.loads(sys.stdin.read())
    for index, (cls, seed) in enumerate(cases):
        case = make_case(cls, seed)
        protocol.write(f"START {index} {json.dumps(case.description)}\n")
        started = time.monotonic()
        outcome = case.run()
        record = {"cls": cls, "seed": seed, "description": case.description, "kind": outcome.kind,
                  "message": outcome.message, "seconds": round(time.monotonic() - started, 3)}
        protocol.write(f"DONE {json.dumps(record)}\n")
    return 0


def _limit_memory(limit: int) -> None:
    if limit <= 0:
        return
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard if hard != resource.RLIM_INFINITY else limit))


# ---------------------------------------------------------------------------- the parent

def plan_cases(total: int, seed: int, classes: list) -> list:
    """[class, seed] pairs: ``total`` cases split evenly over ``classes`` (the first ones get
    the remainder), seeds ``seed``, ``seed + 1``, ... in each class.

    Example:
        >>> plan_cases(5, 10, ["json", "feeds"])
        [['json', 10], ['feeds', 10], ['json', 11], ['feeds', 11], ['json', 12]]
    """
    counts = {cls: total // len(classes) + (k < total % len(classes)) for k, cls in enumerate(classes)}
    plan = []
    for offset in range(max(counts.values(), default=0)):
        plan += [[cls, seed + offset] for cls in classes if offset < counts[cls]]
    return plan


def run_batch(cases: list, timeout: float, env: dict, memory_limit: int) -> list:
    """Run ``cases`` in worker subprocesses; a case that kills its worker is a CRASH, one that
    runs over ``timeout`` seconds a HANG (its worker is killed), and the cases after it run in
    a new worker. Returns one record per case, in order.

    Example:
        >>> # run_batch([["json", 3]], 60, dict(os.environ), 0)[0]["kind"]
    """
    records, pending = [], list(cases)
    while pending:
        done, stopped = _run_worker(pending, timeout, env, memory_limit)
        records += done
        pending = pending[len(done):]
        if stopped is not None:
            records.append(stopped)
            pending = pending[1:]
    return records


def _run_worker(cases: list, timeout: float, env: dict, memory_limit: int):
    """(finished records, the record of the case that crashed or hung, or None)."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", "--memory-limit", str(memory_limit)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=REPO,
                                start_new_session=True)
        proc.stdin.write(json.dumps(cases).encode())
        proc.stdin.close()
        done, current, description = [], None, ""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        buffer = b""
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                _kill(proc)
                if current is None:
                    return done, _failed(cases[len(done)], "HANG", "", "the worker did not start in time")
                return done, _failed(cases[current], "HANG", description, f"ran over {timeout:g} s; killed")
            ready, _, _ = select.select([proc.stdout], [], [], min(wait, 1.0))
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                kind, _, rest = line.decode().partition(" ")
                if kind == "START":
                    index, _, text = rest.partition(" ")
                    current, description = int(index), json.loads(text)
                    deadline = time.monotonic() + timeout
                elif kind == "DONE":
                    done.append(json.loads(rest))
                    current = None
        code = proc.wait()
        if len(done) == len(cases):
            return done, None
        stderr.seek(0)
        tail = _tail(stderr.read().decode("utf-8", "replace"))
        case = cases[current if current is not None else len(done)]
        return done, _failed(case, "CRASH", description, f"worker died with {_signal_name(code)}; {tail}")


def _failed(case, kind: str, description: str, message: str) -> dict:
    return {"cls": case[0], "seed": case[1], "description": description, "kind": kind, "message": message,
            "seconds": None}


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)     # the worker's own session: it and its children
    except ProcessLookupError:
        pass
    proc.wait()


def _signal_name(code: int) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(text: str, lines: int = 6) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(no output on stderr)"


# ---------------------------------------------------------------------------- the report

def outcome_table(records: list, classes: list) -> str:
    """Counts per class (rows) and outcome (columns), with a total row.

    Example:
        >>> print(outcome_table([{"cls": "json", "kind": "clean"}], ["json"]).splitlines()[0].split()[:3])
        ['class', 'clean', 'clean-unnamed']
    """
    from fuzz_outcomes import OUTCOMES
    counts = Counter((r["cls"], r["kind"]) for r in records)
    rows = [[cls] + [counts[cls, kind] for kind in OUTCOMES] + [sum(counts[cls, k] for k in OUTCOMES)]
            for cls in classes]
    rows.append(["total"] + [sum(counts[cls, kind] for cls in classes) for kind in OUTCOMES] + [len(records)])
    headers = ["class"] + list(OUTCOMES) + ["cases"]
    widths = [max(len(str(row[k])) for row in rows + [headers]) for k in range(len(headers))]

    def line(row):
        return "  ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w) for k, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def signature(message: str) -> str:
    """A message with paths, numbers and quoted names blurred, to group cases by cause.

    Example:
        >>> signature("op 12: tensor 'x' at /tmp/a/b.json")
        "op N: tensor '…' at PATH"
    """
    text = re.sub(r"/[\w./-]+", "PATH", message)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:220]


def print_report(records: list, classes: list, seconds: float) -> None:
    """The table, every bad case, the cases onnxruntime rejects and the clean-but-unnamed
    messages grouped by cause.

    Example:
        >>> # print_report(records, ["json"], 12.5)
    """
    from fuzz_outcomes import BAD_OUTCOMES, ORT_REJECTS, UNNAMED
    print(f"\n{len(records)} cases in {seconds:.0f} s\n")
    print(outcome_table(records, classes))
    bad = [r for r in records if r["kind"] in BAD_OUTCOMES]
    print(f"\n{len(bad)} bad case(s)")
    for r in bad:
        print(f"\n[{r['kind']}] {r['cls']} seed {r['seed']}: {r['description']}\n    {r['message']}")
    if bad:
        print("\nbad cases grouped by cause:")
        _print_groups(bad)
    rejected = [r for r in records if r["kind"] == ORT_REJECTS]
    if rejected:
        print(f"\n{len(rejected)} case(s) tilefuse runs but onnxruntime rejects:")
        for r in rejected:
            print(f"  {r['cls']} seed {r['seed']}: {r['description']}\n      {r['message']}")
    unnamed = [r for r in records if r["kind"] == UNNAMED]
    if unnamed:
        print(f"\n{len(unnamed)} clean error(s) that do not name the file or model, grouped:")
        _print_groups(unnamed)


def _print_groups(records: list) -> None:
    groups = defaultdict(list)
    for r in records:
        groups[(r["kind"], signature(r["message"]))].append(r)
    for (kind, _), members in sorted(groups.items(), key=lambda item: -len(item[1])):
        first = members[0]
        seeds = ", ".join(f"{m['cls']}:{m['seed']}" for m in members[:8]) + (" ..." if len(members) > 8 else "")
        print(f"  {len(members):4d} x [{kind}] {first['message'][:300]}\n         seeds {seeds}")


# ---------------------------------------------------------------------------- command line

def parse_args(argv):
    """The campaign's options (see the module docstring).

    Example:
        >>> parse_args(["--cases", "10"]).cases
        10
    """
    parser = argparse.ArgumentParser(description="Run a long seeded fuzz campaign over tilefuse's inputs.")
    parser.add_argument("--cases", type=int, default=1200, help="number of cases (default 1200)")
    parser.add_argument("--seed", type=int, default=0, help="first seed of every class (default 0)")
    parser.add_argument("--classes", default=None, help="comma-separated case classes (default: all)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it is a HANG")
    parser.add_argument("--batch", type=int, default=BATCH_SIZE, help="cases per worker process")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at once (default 1)")
    parser.add_argument("--max-tensor-bytes", type=int, default=2 << 30,
                        help="TILEFUSE_MAX_TENSOR_BYTES in the workers (0: leave it unset)")
    parser.add_argument("--memory-limit", type=int, default=12 << 30,
                        help="address-space limit of a worker in bytes (0: none)")
    parser.add_argument("--json", metavar="PATH", help="write every case's record to PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the campaign; 0 when no case is bad, 1 otherwise (2 for bad options).

    Example:
        >>> # main(["--cases", "50", "--classes", "json"])
    """
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.memory_limit)
    from fuzz_cases import CASE_CLASSES
    from fuzz_outcomes import BAD_OUTCOMES
    classes = list(CASE_CLASSES) if args.classes is None else [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = [c for c in classes if c not in CASE_CLASSES]
    if unknown or not classes or args.cases < 1:
        print(f"fuzz_campaign: bad --classes {unknown or classes} or --cases {args.cases}; classes are "
              f"{', '.join(CASE_CLASSES)}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    if args.max_tensor_bytes > 0:
        env.setdefault("TILEFUSE_MAX_TENSOR_BYTES", str(args.max_tensor_bytes))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    plan = plan_cases(args.cases, args.seed, classes)
    batches = [plan[k:k + args.batch] for k in range(0, len(plan), args.batch)]
    started = time.monotonic()
    records = _run_batches(batches, args, env)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    print_report(records, classes, time.monotonic() - started)
    return 1 if any(r["kind"] in BAD_OUTCOMES for r in records) else 0


def _run_batches(batches: list, args, env: dict) -> list:
    """Every batch's records, in plan order; ``--jobs`` batches at once (threads driving worker
    processes), a progress line per batch on stderr."""
    from fuzz_outcomes import BAD_OUTCOMES
    from concurrent.futures import ThreadPoolExecutor, as_completed
    results = [None] * len(batches)
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_batch, batch, args.timeout, env, args.memory_limit): k
                   for k, batch in enumerate(batches)}
        for future in as_completed(futures):
            k = futures[future]
            results[k] = future.result()
            done += 1
            bad = sum(r["kind"] in BAD_OUTCOMES for r in results[k])
            print(f"[{done}/{len(batches)}] batch {k}: {len(results[k])} cases, {bad} bad", file=sys.stderr, flush=True)
    return [r for batch in results for r in batch]


if __name__ == "__main__":
    sys.exit(main())
