"""LLVM's binding (``llvmlite.binding``), loaded on first use.

Loading it maps LLVM's whole shared library: about 40 MB of resident memory and a tenth of a
second before any work. Compiling a kernel needs it; running kernels does not
(``object_loader``), nor does finding a warm start's kernels in the disk cache
(``target.Target.host`` reads the host's description the first compile recorded). So the
modules that compile import ``llvm`` from here, and a process that never compiles never
loads it.

Example:
    >>> llvm.get_process_triple().count("-") >= 2       # first use loads the binding
    True
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import multiprocessing
import os
import sys
import threading

__all__ = ["llvm", "is_loaded", "outside_this_process"]

_NAME = "llvmlite.binding"


def _lazy_module(name: str):
    """``name`` as a module executed at its first attribute access (importlib's LazyLoader),
    or the module itself when something imported it already."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def is_loaded() -> bool:
    """Whether LLVM's binding has been loaded into this process (not only named).

    Example:
        >>> _ = llvm.get_process_triple(); is_loaded()
        True
    """
    module = sys.modules.get(_NAME)
    return module is not None and type(module) is type(sys)


def outside_this_process(function, *args):
    """``function(*args)`` computed in a forked child process, where LLVM's work maps LLVM
    into the child alone, when this process has not loaded LLVM yet; here otherwise, and also
    when another thread runs (a fork copies only the calling thread: a lock another held would
    stay held in the child) or the child dies. The result must pickle.

    Example:
        >>> outside_this_process(pow, 2, 10)
        1024
    """
    if is_loaded() or threading.active_count() > 1 or not hasattr(os, "fork"):
        return function(*args)
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            return pool.submit(function, *args).result()
    except concurrent.futures.process.BrokenProcessPool:
        return function(*args)


llvm = _lazy_module(_NAME)
