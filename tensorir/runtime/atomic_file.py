"""Files replaced whole or not at all: ``atomic_write(path)`` gives a file to write that
takes ``path``'s place only once it is complete and on disk.

The data goes to a temporary file in ``path``'s directory (so the rename stays in one file
system and is atomic), which is flushed and fsynced, renamed over ``path`` with
``os.replace``, and the directory fsynced so the rename itself survives a crash. Until the
rename, ``path`` is untouched; after it, ``path`` names a new inode, so a program that has the
old file open or mapped (a loaded session maps its file) keeps reading the old bytes. On any
error, or an exception in the ``with`` block, the temporary file is removed and ``path`` is as
it was. The new file keeps the mode of the file it replaces (a new name gets what a plain
``open(path, "wb")`` would give it: 0o666 less the umask, not ``mkstemp``'s 0o600), and a
``path`` that is a symbolic link stays one: the file it points to is replaced. Writing needs
permission to create files in the directory, not only to write the file.

Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "out.bin")
    ...     with atomic_write(path) as f:
    ...         _ = f.write(b"whole")
    ...     try:
    ...         with atomic_write(path) as f:
    ...             _ = f.write(b"half")
    ...             raise OSError("disk full")
    ...     except OSError:
    ...         pass
    ...     open(path, "rb").read(), os.listdir(folder)
    (b'whole', ['out.bin'])
"""
from __future__ import annotations

import contextlib
import os
import tempfile


def _umask() -> int:
    """The process's umask, read without setting it where Linux shows it (setting it to read
    it would race with other threads creating files)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o22)
        os.umask(mask)
        return mask


@contextlib.contextmanager
def atomic_write(path, durable: bool = True):
    """A binary file to write; on leaving the block without error it replaces ``path`` (see
    the module docstring), otherwise it is removed and ``path`` left as it was. ``durable=False``
    skips the fsyncs (a cache's entry: after a power cut it may be lost or damaged, never half
    seen by a running program, and its reader checks it).

    Example:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     with atomic_write(os.path.join(folder, "a.txt")) as f:
        ...         _ = f.write(b"hi")
        ...     open(os.path.join(folder, "a.txt"), "rb").read()
        b'hi'
    """
    target = os.path.realpath(os.fspath(path))
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    folder = os.path.dirname(os.path.abspath(target))
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), mode)
            if durable:
                os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        _fsync_directory(folder)


def _fsync_directory(folder: str) -> None:
    """Make a rename in ``folder`` durable (where directories can be opened and synced)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):      # some file systems refuse fsync on a directory
            os.fsync(fd)
    finally:
        os.close(fd)
