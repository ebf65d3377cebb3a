"""How configs reach schedule templates without this package knowing where they come from.

A ``ConfigSource`` is anything with ``config_for(template) -> Config | None`` (None: "use the
template's default"). The tuning database of ``autotune`` is one; a test can pass a lambda
wrapped in ``FixedConfigs``. Sources are given explicitly (``graph_api.compile_graph(graph,
configs=...)``) or made active for a block with ``using_configs(source)``: there is one stack
of active sources per thread, and the innermost source that has a config for a template wins.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule.templates import template_for
    >>> A = placeholder((100,), name="A"); B = compute((100,), lambda i: A[i] * 2.0, name="B")
    >>> t = template_for(B); other = t.space.get(len(t.space) - 1)
    >>> with using_configs(FixedConfigs(lambda template: other)):
    ...     chosen_config(t) == other
    True
    >>> chosen_config(t) == t.default_config()
    True
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Protocol, runtime_checkable

from .space import Config


@runtime_checkable
class ConfigSource(Protocol):
    """Where a template's config comes from: ``config_for(template)`` returns a Config of
    ``template.space``, or None to leave the template's default.

    Example:
        >>> isinstance(FixedConfigs(lambda template: None), ConfigSource)
        True
    """

    def config_for(self, template) -> Config | None:
        ...


class FixedConfigs:
    """A ConfigSource from a function of the template (tests, hand-picked configs).

    Example:
        >>> FixedConfigs(lambda template: None).config_for(object()) is None
        True
    """

    def __init__(self, choose: Callable):
        self._choose = choose

    def config_for(self, template) -> Config | None:
        """``choose(template)``.

        Example:
            >>> FixedConfigs(lambda template: Config({"a": 1})).config_for(None)
            Config({'a': 1})
        """
        return self._choose(template)


_active = threading.local()


def active_sources() -> list:
    """The sources made active by ``using_configs`` in this thread, innermost last.

    Example:
        >>> active_sources()
        []
    """
    return list(getattr(_active, "stack", []))


@contextlib.contextmanager
def using_configs(source: ConfigSource):
    """Inside the block, templates without an explicit config ask ``source`` first.

    Example:
        >>> source = FixedConfigs(lambda template: None)
        >>> with using_configs(source):
        ...     active_sources() == [source]
        True
    """
    if not isinstance(source, ConfigSource):
        raise TypeError(f"a config source needs a config_for(template) method, got {type(source).__name__}")
    stack = getattr(_active, "stack", None)
    if stack is None:
        stack = _active.stack = []
    stack.append(source)
    try:
        yield source
    finally:
        stack.pop()


def config_sources(source: ConfigSource | None = None) -> list:
    """The sources asked for a config, first one first: ``source`` when given, else those made
    active with ``using_configs`` in this thread, innermost first.

    Example:
        >>> source = FixedConfigs(lambda template: None)
        >>> config_sources(source) == [source], config_sources()
        (True, [])
    """
    return [source] if source is not None else list(reversed(active_sources()))


def sourced_config(template, sources: list) -> Config | None:
    """The config of the first of ``sources`` that has one for ``template``; None: none has.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule.templates import template_for
        >>> A = placeholder((10,), name="A"); t = template_for(compute((10,), lambda i: A[i] + 1.0))
        >>> sourced_config(t, [FixedConfigs(lambda template: None)]) is None
        True
    """
    return next((c for c in (s.config_for(template) for s in sources) if c is not None), None)


def chosen_config(template, source: ConfigSource | None = None) -> Config:
    """The config to build ``template`` with: ``source``'s if given, else that of the innermost
    active source that has one, else the template's default.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule.templates import template_for
        >>> A = placeholder((10,), name="A"); t = template_for(compute((10,), lambda i: A[i] + 1.0))
        >>> chosen_config(t, FixedConfigs(lambda template: None)) == t.default_config()
        True
    """
    config = sourced_config(template, config_sources(source))
    return template.default_config() if config is None else config
