"""Settings read from environment variables: one parser for the positive numbers they hold.

Example:
    >>> positive_setting("TILEFUSE_CACHE_MAX_BYTES", " 4096 ")
    4096
    >>> positive_setting("TILEFUSE_CACHE_MAX_BYTES", "1 GB")
    Traceback (most recent call last):
    ...
    ValueError: TILEFUSE_CACHE_MAX_BYTES must be a positive whole number, got '1 GB'
"""
from __future__ import annotations


def positive_setting(name: str, text: str, error: type = ValueError) -> int:
    """The positive whole number ``text`` (the value of variable ``name``) holds; ``error``
    (an exception type) naming the variable and the text when it holds anything else.

    Example:
        >>> positive_setting("TILEFUSE_MAX_TENSOR_BYTES", "0")
        Traceback (most recent call last):
        ...
        ValueError: TILEFUSE_MAX_TENSOR_BYTES must be a positive whole number, got '0'
    """
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise error(f"{name} must be a positive whole number, got {text!r}")
    return value
