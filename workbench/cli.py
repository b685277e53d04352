"""The ``workbench`` command.

Each subcommand lives in ``workbench/commands/<name>.py`` with a ``HELP``
line, ``add_arguments(parser)`` and ``run(args) -> int``; this module only
dispatches. A :class:`~workbench.errors.WorkbenchError` becomes one line on
stderr and exit code 2 (an :class:`~workbench.errors.ImplausibleFit`, a
calibration of a log the model contradicts: exit code 1); Ctrl-C ends with
"interrupted" and exit code 130, SIGTERM with "terminated" and 143, both
after the clean-up of half-written files (:mod:`workbench.io`), and both ignored once
the command has published its results directory (what is left is its summary line and
exit: the results are final; :func:`workbench.io.settle_on_publish`); a closed
pipe (``workbench info iiwa | head``) ends quietly with 141, as for other
command-line tools; running out of memory is one line and exit code 2
(sizes known in advance are refused before allocation,
:func:`workbench.config.check_memory`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from workbench import __version__
from workbench.errors import ImplausibleFit, WorkbenchError, WorkbenchWarning
from workbench.io import Terminated, raise_on_sigterm, settle_on_publish

COMMANDS = {
    "reach": "workbench.commands.reach",
    "info": "workbench.commands.info",
    "view": "workbench.commands.view",
    "calibrate": "workbench.commands.calibrate",
    "simulate-log": "workbench.commands.simulate_log",
    "sweep": "workbench.commands.sweep",
    "excite": "workbench.commands.excite",
    "export": "workbench.commands.export",
    "payload": "workbench.commands.payload",
}


# commands that compile kernels on a first run: they say so at their start (and not with
# --quiet), before the imports that precede the first compilation
COMPILING = ("reach", "calibrate", "excite", "simulate-log", "sweep", "payload")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; options with a default say it ("(default: ...)")."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS)
        if shown and action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    """The ``workbench`` parser with one subparser per command."""
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Optimal control, design and calibration of robots on Pinocchio and CasADi.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(
            name, help=module.HELP, description=module.__doc__, formatter_class=HelpFormatter
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code (module docstring)."""

    args = build_parser().parse_args(argv)
    raise_on_sigterm()
    if argv is None:  # this process is the command: its published results are final
        settle_on_publish()
    try:
        if args.command in COMPILING and not getattr(args, "quiet", False):
            from workbench.runtime import announce_first_compile

            announce_first_compile()
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
            code = int(args.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except WorkbenchError as exc:
        message = " ".join(str(exc).split())
        print(f"workbench {args.command}: error: {message}", file=sys.stderr)
        return 1 if isinstance(exc, ImplausibleFit) else 2
    except Terminated:
        print(f"workbench {args.command}: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except MemoryError:
        print(
            f"workbench {args.command}: error: out of memory; the model or problem is too large "
            "for this machine",
            file=sys.stderr,
        )
        return 2


def _one_line_warnings(command: str, default):
    """A ``warnings.showwarning`` that prints the project's warnings a command does not
    report itself as one line, ``workbench COMMAND: warning: ...``, and others as ``default``."""

    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, WorkbenchWarning):
            return default(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())
        print(f"workbench {command}: warning: {text}", file=sys.stderr)
        return None

    return show


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
