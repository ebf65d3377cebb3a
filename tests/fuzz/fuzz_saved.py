"""Seeded cases of saved sessions whose file changes under a live session: ``load_compiled`` a
file, then save the session over it, save another session (of the same model or another) to
it, truncate it, overwrite bytes in place, copy another file over it in place, rename another
file over it, remove it, append to it or touch it; then run the live session. It must give the
results it gave before or a clean error naming the file (a file changed in place is refused),
never SIGBUS, NaNs or garbage; a save or a rename over the file must leave it running right.
A fresh ``load_compiled`` of what is left must run right or be refused cleanly.

Half the files are aged by a minute before loading, so ``load_compiled`` maps them; a file
saved a moment before is read into memory instead (``graph_api.mapped_file``).

Example:
    >>> case = saved_case(3)
    >>> case.cls, case.description.split(":")[0] in [action[0] for action in SAVED_ACTIONS]
    ('saved-files', True)
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from fuzz_onnx_models import floats, initializer, node, onnx_model, value_info
from fuzz_outcomes import OK, WRONG, Outcome, classify_exception, is_clean_error, worst


def dense_model(rng, symbolic: bool, features: int, classes: int):
    """x[batch, features] -> MatMul(w), Add(b), Relu -> y, weights of a few pages (so that a file
    cut or rewritten under a map shows); ``batch`` symbolic or 2.

    Example:
        >>> dense_model(np.random.default_rng(0), True, 8, 4).graph.input[0].type.tensor_type.shape.dim[0].dim_param
        'batch'
    """
    batch = "batch" if symbolic else 2
    nodes = [node("MatMul", ["x", "w"], ["h"]), node("Add", ["h", "b"], ["a"]), node("Relu", ["a"], ["y"])]
    return onnx_model(nodes, [value_info("x", [batch, features])], [value_info("y", [batch, classes])],
                      [initializer("w", floats(rng, [features, classes])), initializer("b", floats(rng, [classes]))])


def _save_itself(ctx):
    ctx.loaded.save(ctx.path)


def _save_same_model(ctx):
    other = ctx.session_of(ctx.model)
    other.run(None, ctx.feeds(3))
    other.save(ctx.path)


def _save_other_model(ctx):
    ctx.session_of(ctx.other_model).save(ctx.path)


def _truncate(ctx):
    size = os.path.getsize(ctx.path)
    with open(ctx.path, "r+b") as f:
        f.truncate(int(ctx.rng.integers(0, size)))


def _overwrite(ctx):
    size = os.path.getsize(ctx.path)
    at, n = int(ctx.rng.integers(0, size)), int(ctx.rng.integers(1, 8192))
    with open(ctx.path, "r+b") as f:
        f.seek(at)
        f.write(ctx.rng.integers(0, 256, min(n, size - at), dtype=np.uint8).tobytes())


def _copy_over_in_place(ctx):
    other = os.path.join(ctx.folder, "other.tfm")
    ctx.session_of(ctx.other_model).save(other)
    data = open(other, "rb").read()
    with open(ctx.path, "r+b") as f:           # what cp does: the same inode, truncated and rewritten
        f.truncate(0)
        f.write(data)


def _rename_over(ctx):
    other = os.path.join(ctx.folder, "other.tfm")
    ctx.session_of(ctx.other_model).save(other)
    os.replace(other, ctx.path)


def _remove(ctx):
    os.unlink(ctx.path)


def _append(ctx):
    with open(ctx.path, "ab") as f:
        f.write(ctx.rng.integers(0, 256, int(ctx.rng.integers(1, 5000)), dtype=np.uint8).tobytes())


def _touch(ctx):
    later = time.time() + 5
    os.utime(ctx.path, (later, later))


# (name, what it does, whether the file stays the same inode with other bytes: "in place" may be
# refused by the live session, "replaced" must leave it running)
SAVED_ACTIONS = [("save itself over its file", _save_itself, "replaced"),
                 ("another session of the model saved over it", _save_same_model, "replaced"),
                 ("another model's session saved over it", _save_other_model, "replaced"),
                 ("truncated in place", _truncate, "in place"),
                 ("bytes overwritten in place", _overwrite, "in place"),
                 ("another saved file copied over it in place", _copy_over_in_place, "in place"),
                 ("another saved file renamed over it", _rename_over, "replaced"),
                 ("removed", _remove, "replaced"),
                 ("bytes appended in place", _append, "in place"),
                 ("its time changed", _touch, "in place")]


class _Context:
    """What an action works on: the file, the loaded session, the models and random feeds."""

    def __init__(self, seed: int, folder: str):
        self.rng = np.random.default_rng(seed)
        self.folder, self.path = folder, os.path.join(folder, "model.tfm")
        self.symbolic = bool(self.rng.random() < 0.5)
        self.features, self.classes = int(self.rng.integers(16, 97)), int(self.rng.integers(100, 400))
        self.model = dense_model(self.rng, self.symbolic, self.features, self.classes)
        self.other_model = dense_model(self.rng, self.symbolic, self.features, self.classes)
        self.loaded = None

    def feeds(self, batch: int) -> dict:
        return {"x": floats(self.rng, [batch if self.symbolic else 2, self.features])}

    def session_of(self, model):
        from tilefuse.graph_api import InferenceSession
        return InferenceSession(model.SerializeToString())


def check_saved(seed: int, action: int, aged: bool) -> Outcome:
    """Run action ``action`` of ``SAVED_ACTIONS`` on the file of a loaded session (``aged``: its
    time set a minute back before loading, so it is mapped) and classify what the live session
    and a fresh load do.

    Example:
        >>> check_saved(0, 0, True).kind
        'ok'
    """
    from tilefuse.graph_api import load_compiled
    name, act, kind = SAVED_ACTIONS[action]
    with tempfile.TemporaryDirectory(prefix="tilefuse-fuzz-") as folder:
        ctx = _Context(seed, folder)
        original = ctx.session_of(ctx.model)
        x, x_new = ctx.feeds(1), ctx.feeds(4)
        want, want_new = original.run(None, x)[0], original.run(None, x_new)[0]
        original.save(ctx.path)
        if aged:
            old = time.time() - 60
            os.utime(ctx.path, (old, old))
        ctx.loaded = load_compiled(ctx.path)
        first = ctx.loaded.run(None, x)[0]
        if not np.array_equal(first, want):
            return Outcome(WRONG, "the loaded session differs from the one saved before anything happened")
        act(ctx)
        outcomes = [_live_run(ctx.loaded, x, want, kind, "its saved shape"),
                    _live_run(ctx.loaded, x_new, want_new, kind, "a new shape" if ctx.symbolic else "new values")]
        outcomes.append(_fresh_load(ctx, x))
    return worst(outcomes)


def _live_run(session, x, want, kind: str, what: str) -> Outcome:
    try:
        got = session.run(None, x)[0]
    except Exception as err:      # classified: a clean refusal is fine only after a change in place
        outcome = classify_exception(err, "run")
        if outcome.allowed and kind == "replaced":
            return Outcome(WRONG, f"the live session refused to run {what} after its file was replaced: "
                                  f"{outcome.message}")
        return outcome
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        bad = int(np.sum(~np.isclose(got, want, rtol=1e-5, atol=1e-6))) if got.shape == want.shape else got.size
        return Outcome(WRONG, f"the live session ran {what} to other values ({bad} of {want.size} differ, "
                              f"NaN: {bool(np.isnan(got).any())}) with no error")
    return Outcome(OK, f"the live session ran {what} right")


def _fresh_load(ctx, x) -> Outcome:
    """A new load_compiled of what is at the path: right results of the model whose session is
    there, or a clean error naming the file."""
    from tilefuse.graph_api import load_compiled
    try:
        got = load_compiled(ctx.path).run(None, x)[0]
    except Exception as err:      # a damaged or missing file must be refused cleanly, naming it
        if is_clean_error(err) and ctx.path not in str(err):
            return Outcome(WRONG, f"a fresh load was refused without naming the file: {err}")
        return classify_exception(err, "fresh load")
    candidates = [ctx.session_of(m).run(None, x)[0] for m in (ctx.model, ctx.other_model)]
    if any(got.shape == c.shape and np.allclose(got, c, rtol=1e-5, atol=1e-6) for c in candidates):
        return Outcome(OK, "a fresh load runs right")
    return Outcome(WRONG, "a fresh load of the file runs to values of neither model with no error")


def saved_case(seed: int):
    """The ``saved-files`` case of ``seed``: action ``seed % len(SAVED_ACTIONS)``, the file aged
    (mapped) for even ``seed // len(SAVED_ACTIONS)``.

    Example:
        >>> saved_case(13).description
        'truncated in place: model.tfm read at load'
    """
    from fuzz_cases import Case
    action = seed % len(SAVED_ACTIONS)
    aged = (seed // len(SAVED_ACTIONS)) % 2 == 0
    description = f"{SAVED_ACTIONS[action][0]}: model.tfm {'mapped' if aged else 'read'} at load"
    return Case("saved-files", seed, description, lambda: check_saved(seed, action, aged))
