"""``python -m tilefuse.autotune ...``: the ``autotune`` command (see ``autotune.cli``).

Usage, from a shell (the same as ``autotune tune examples/mlp.json --trials 64``)::

    python -m tilefuse.autotune tune examples/mlp.json --trials 64
"""
import sys

from tilefuse.autotune.cli import main

if __name__ == "__main__":
    sys.exit(main())
