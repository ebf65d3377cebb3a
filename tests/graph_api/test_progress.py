"""The compile progress bar: drawn only on a terminal, after a delay, with no thread of its own."""
import io
import threading

from tilefuse.graph_api import progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_is_drawn_on_a_terminal_once_the_delay_has_passed(monkeypatch):
    screen = _Terminal()
    monkeypatch.setattr(progress.sys, "stderr", screen)
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    threads = threading.active_count()
    with progress.kernel_progress(4) as bar:
        assert threading.active_count() == threads      # build workers are forked: no monitor thread
        for _ in range(4):
            bar.update()
    assert "compiling kernels" in screen.getvalue() and "/4 " in screen.getvalue()


def test_nothing_is_drawn_before_the_delay(monkeypatch):
    screen = _Terminal()
    monkeypatch.setattr(progress.sys, "stderr", screen)
    with progress.kernel_progress(2) as bar:
        bar.update(2)
    assert "compiling" not in screen.getvalue()


def test_nothing_is_drawn_into_a_pipe_or_a_file(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", pipe)
    monkeypatch.setattr(progress, "SHOW_AFTER_SECONDS", 0.0)
    with progress.kernel_progress(3) as bar:
        bar.update(3)
    assert bar.disable and pipe.getvalue() == ""
