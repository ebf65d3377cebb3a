"""``autotune best``, ``show``, ``export`` and ``import``: the tuning records of a database or
a log, listed, and moved between the two.

Each ``cmd_*`` function takes the parsed arguments and returns the exit code.
"""
from __future__ import annotations

import json
import os
import sys

from .cli_io import (EXIT_OK, EXIT_UNUSABLE, BadInput, format_table, load_graph, ms_text, open_database,
                     print_json, read_log_or_fail, report_problems, shorten)
from .cli_shapes import ShapeRequest
from .database import Database
from .extract import extract_tasks
from .log import export_log, import_contents
from .target import current_target

def cmd_best(args) -> int:
    """``autotune best``: the best record per workload on this CPU, or (``--missing GRAPH``)
    the graph's workloads without one (exit 1 when there are any).

    Example:
        >>> import os, tempfile
        >>> from types import SimpleNamespace
        >>> db = os.path.join(tempfile.mkdtemp(), "tuning.db"); Database(db).close()
        >>> cmd_best(SimpleNamespace(db=db, missing=None, json=False))   # doctest: +ELLIPSIS
        best records for ... in .../tuning.db: 0 workload(s)
        0
    """
    target = current_target()
    with open_database(args.db, must_exist=True) as db:
        if args.missing:
            tasks = extract_tasks(load_graph(args.missing, ShapeRequest.of(args)))
            missing = set(db.missing([t.key for t in tasks]))
            rows = [t for t in tasks if t.key in missing]
            if args.json:
                print_json({"graph": args.missing, "db": args.db, "target": {"cpu": target.cpu, "key": target.key},
                            "workloads": len(tasks),
                            "missing": [{"name": t.name, "template": t.template_name, "weight": t.weight,
                                         "key": t.key} for t in rows]})
            else:
                print(f"{len(rows)} of {len(tasks)} workload(s) of {args.missing} have no record for "
                      f"{target.cpu} in {args.db}")
                if rows:
                    print(format_table(["task", "template", "weight", "key"],
                                       [[shorten(t.name), t.template_name, t.weight, t.key[:16]] for t in rows],
                                       right={2}))
            if not rows:
                return EXIT_OK
            print(f"autotune: {len(rows)} workload(s) of {args.missing} have no record on this CPU "
                  f"({target.cpu}) in {args.db}; `autotune tune {args.missing}` tunes them", file=sys.stderr)
            return EXIT_UNUSABLE
        best = db.best_all(target.key)
    records = list(best.values())
    if args.json:
        print_json({"db": args.db, "target": {"cpu": target.cpu, "key": target.key},
                    "best": [{"workload_key": r.workload_key, "name": r.task_name, "template": r.template,
                              "mean_ms": r.mean_cost * 1e3, "config": r.config, "timestamp": r.timestamp}
                             for r in records]})
        return EXIT_OK
    print(f"best records for {target.cpu} in {args.db}: {len(records)} workload(s)")
    if records:
        print(format_table(["task", "template", "mean ms", "key", "config"],
                           [[shorten(r.task_name), r.template, ms_text(r.mean_cost), r.workload_key[:16],
                             json.dumps(r.config, sort_keys=True, separators=(",", ":"))] for r in records],
                           right={2}))
    return EXIT_OK


def cmd_show(args) -> int:
    """``autotune show``: the records of a JSON-lines log; unreadable lines go to stderr.

    Example:
        >>> import os, tempfile
        >>> from types import SimpleNamespace
        >>> log = os.path.join(tempfile.mkdtemp(), "t.jsonl"); open(log, "w").close()
        >>> cmd_show(SimpleNamespace(log=log, json=False))   # doctest: +ELLIPSIS
        0 record(s) in .../t.jsonl: 0 ok, 0 error(s)
        0
    """
    contents = read_log_or_fail(args.log)
    report_problems(args.log, contents.problems)
    records = contents.records
    if args.json:
        print_json({"log": args.log, "records": [r.to_json() for r in records],
                    "problems": [{"line": line, "reason": reason} for line, reason in contents.problems]})
        return EXIT_OK
    rows = [[k + 1, shorten(r.task_name, 32), r.template, ms_text(r.mean_cost) if r.is_ok else r.error_kind,
             r.target_cpu, json.dumps(r.config, sort_keys=True, separators=(",", ":"))]
            for k, r in enumerate(records)]
    if rows:
        print(format_table(["#", "task", "template", "ms / error", "cpu", "config"], rows, right={0, 3}))
    ok = sum(r.is_ok for r in records)
    skipped = f"; {len(contents.problems)} unreadable line(s) skipped (see stderr)" if contents.problems else ""
    print(f"{len(records)} record(s) in {args.log}: {ok} ok, {len(records) - ok} error(s){skipped}")
    return EXIT_OK


def _workload_key(db: Database, key: str) -> str:
    keys = sorted({w.key for w in db.workloads()})
    if key in keys:
        return key
    found = [k for k in keys if k.startswith(key)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadInput(f"no workload {key!r} in {db.path} (`autotune best` lists them)")
    raise BadInput(f"workload prefix {key!r} is ambiguous in {db.path}: {', '.join(k[:16] for k in found)}")


def cmd_export(args) -> int:
    """``autotune export``: append the database's records (all CPUs) to a log, skipping those
    it already holds.

    Example:
        >>> import os, tempfile
        >>> from types import SimpleNamespace
        >>> folder = tempfile.mkdtemp(); db = os.path.join(folder, "tuning.db"); Database(db).close()
        >>> cmd_export(SimpleNamespace(db=db, log=os.path.join(folder, "out.jsonl"), workload=None))   # doctest: +ELLIPSIS
        exported 0 of 0 record(s) from .../tuning.db to .../out.jsonl (0 already there)
        0
    """
    with open_database(args.db, must_exist=True) as db:
        key = _workload_key(db, args.workload) if args.workload is not None else None
        total = len(db.records(workload_key=key))
        if os.path.isdir(args.log):
            raise BadInput(f"{args.log} is a directory, not a log file")
        try:
            written = export_log(db, args.log, workload_key=key)
        except OSError as err:
            raise BadInput(f"{args.log}: cannot write: {err.strerror or err}") from None
    which = f" of workload {key[:16]}" if key else ""
    print(f"exported {written} of {total} record(s){which} from {args.db} to {args.log} "
          f"({total - written} already there)")
    return EXIT_OK


def cmd_import(args) -> int:
    """``autotune import``: add a log's records to the database (created when missing);
    importing the same log again adds nothing.

    Example:
        >>> import os, tempfile
        >>> from types import SimpleNamespace
        >>> folder = tempfile.mkdtemp(); log = os.path.join(folder, "t.jsonl"); open(log, "w").close()
        >>> cmd_import(SimpleNamespace(log=log, db=os.path.join(folder, "tuning.db")))   # doctest: +ELLIPSIS
        imported 0 record(s) from .../t.jsonl into .../tuning.db (0 already there)
        0
    """
    if not os.path.exists(args.log):
        raise BadInput(f"{args.log}: no such log file")
    if os.path.isdir(args.log):
        raise BadInput(f"{args.log} is a directory, not a log file")
    contents = read_log_or_fail(args.log)   # a file that is no log at all: refused before the database is made
    with open_database(args.db, must_exist=False) as db:
        imported, skipped, problems = import_contents(db, contents)
    report_problems(args.log, problems)
    unreadable = f"; {len(problems)} unreadable line(s) skipped (see stderr)" if problems else ""
    print(f"imported {imported} record(s) from {args.log} into {args.db} ({skipped} already there){unreadable}")
    return EXIT_OK
