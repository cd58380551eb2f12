"""Never break the user's training: an internal error turns one probe off, said once.

Every hook of the callback runs its parts through a `ProbeGuard`: a part that raises
is disabled (one line on stderr, the traceback in the log) and training goes on
without it. Each part that goes off, by an error or because it cannot run in this setting
(`off`), is told to `on_off` once: the callback records it, so the reader can say which
diagnoses the run cannot have (rather than reading "not measured" as "nothing happened").
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


# Longest reason kept for the record (a message can be a page of graph dump).
MAX_REASON_CHARS = 200


def one_line(err: BaseException) -> str:
    """The error for the record: its type and the first line of its message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


class ProbeGuard:
    def __init__(
        self,
        on_disable: Callable[[str], None] | None = None,
        on_off: Callable[[str, str, bool], None] | None = None,
    ):
        """on_disable: called with the probe's name once it is off (to uninstall what it installed).
        on_off: called once per part that goes off with (part, one-line reason, whether an
        internal error turned it off), to record it."""
        self.disabled: set[str] = set()
        self.off_reasons: dict[str, str] = {}
        self._on_disable = on_disable
        self._on_off = on_off

    def enabled(self, probe: str) -> bool:
        return probe not in self.disabled

    def disable(self, probe: str, err: BaseException) -> None:
        if probe in self.disabled:
            return
        self.disabled.add(probe)
        logger.warning("tb-trainhealth: %s probe disabled after an internal error: %r", probe, err, exc_info=err)
        print(f"tb-trainhealth: {probe} probe disabled after an internal error: {err!r}", file=sys.stderr)
        if self._on_disable is not None:
            try:
                self._on_disable(probe)
            except Exception:  # (tidying up after a failed probe must not fail the step either)
                logger.warning("tb-trainhealth: could not tidy up after the %s probe", probe, exc_info=True)
        self._tell_off(probe, one_line(err), error=True)

    def off(self, part: str, reason: str) -> None:
        """`part` cannot run in this setting (XLA, a platform, a Keras it does not support):
        recorded once, no error said (the caller prints a notice where the user asked for it)."""
        self.disabled.add(part)
        self._tell_off(part, reason, error=False)

    def _tell_off(self, part: str, reason: str, error: bool) -> None:
        if part in self.off_reasons:
            return
        self.off_reasons[part] = reason
        if self._on_off is not None:
            try:
                self._on_off(part, reason, error)
            except Exception:  # (recording it must not fail the step either)
                logger.warning("tb-trainhealth: could not record that the %s part is off", part, exc_info=True)

    def run(self, probe: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """function(*args, **kwargs), or None once `probe` is off or when it raises."""
        if probe in self.disabled:
            return None
        try:
            return function(*args, **kwargs)
        except Exception as err:
            self.disable(probe, err)
            return None


def disable_on_error(probe: str):
    """Decorate a method of an object with a `guard: ProbeGuard` attribute."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            return self.guard.run(probe, method, self, *args, **kwargs)

        return wrapper

    return decorate


_NOTICES_GIVEN: set[str] = set()


def notice_once(notice: str) -> None:
    """A feature that cannot work in this setting: one warning per process (on stderr when the
    user has configured no logging)."""
    if notice not in _NOTICES_GIVEN:
        _NOTICES_GIVEN.add(notice)
        logger.warning(notice)


def none_on_error(function: Callable[[], Any]) -> Any:
    """Best-effort context for the record: None rather than an error."""
    try:
        return function()
    except Exception:
        logger.debug("tb-trainhealth: %s failed", getattr(function, "__name__", function), exc_info=True)
        return None
