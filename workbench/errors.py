"""The one exception users see.

Anything a user can cause (a malformed file, an unknown name, arrays of the
wrong shape, NaN, an unreachable target, a failed solve) raises
:class:`WorkbenchError` with a message that says what was wrong and where.
The command line turns it into one line on stderr and exit code 2.
"""

from __future__ import annotations


class WorkbenchError(ValueError):
    """A user-facing error: the message names what was wrong and where."""


class WorkbenchWarning(UserWarning):
    """Something a user should know that does not stop the run (one line, names what and where).

    The command line prints each as ``workbench COMMAND: warning: ...`` and
    reports list them (``summary.json`` ``warnings``).
    """


class ImplausibleFit(WorkbenchError):
    """A calibration that ran on a log the model contradicts (a mis-described unit, sample
    period, column, transmission or torque sign): the message names the likely cause and what
    was compared. The command line prints it and exits with code 1 (not 2: the input parsed)."""


EXCERPT = 40  # characters of a user's file quoted in a message, at most


def excerpt(text: object, limit: int = EXCERPT) -> str:
    """A short, escaped quote of user content for messages: ``repr`` of at most ``limit`` chars.

    Messages never echo a file's content beyond this (a wrong file given as
    input may hold secrets), and control characters cannot reach the terminal.
    """
    text = str(text)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")
