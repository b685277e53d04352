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
