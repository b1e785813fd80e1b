"""A process whose uncaught exception is its tasks' failure: the process-global ``sys.excepthook``.

A bootstrapped task that reports crashes (`Bootstrapped.report_crashes()`) is told when the
process raises an exception nobody caught, so that it tells every other task why before the
interpreter ends (its exit handlers would otherwise make the end look normal). The hook is
set while a task reports and put back when the last one stops. At an interactive prompt an
exception ends nothing, and is not reported.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__: list[str] = []  # internal: the bootstrap's protocol (docs/protocol.md)


class Crashing(Protocol):
    """A task told of the process's uncaught exception."""

    def crashed(self, kind: type[BaseException], value: BaseException) -> None:
        """The process raised ``value`` and ends."""
        ...


_reporting: weakref.WeakSet[Any] = weakref.WeakSet()  # tasks whose crash is a failure
_previous: Callable[..., Any] | None = None  # the excepthook before ours


def _hook(kind: type[BaseException], value: BaseException, traceback: Any) -> None:
    """``sys.excepthook`` while a task reports crashes."""
    if not (hasattr(sys, "ps1") or sys.flags.interactive):
        for task in list(_reporting):
            task.crashed(kind, value)
    (_previous or sys.__excepthook__)(kind, value, traceback)


def report(task: Crashing) -> None:
    """Tell ``task`` of an uncaught exception from now on."""
    global _previous
    _reporting.add(task)
    if sys.excepthook is not _hook:
        _previous, sys.excepthook = sys.excepthook, _hook


def forget(task: Crashing) -> None:
    """``task`` stopped: put the hook back once no task reports."""
    _reporting.discard(task)
    if not _reporting and sys.excepthook is _hook:
        sys.excepthook = _previous or sys.__excepthook__
