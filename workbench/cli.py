"""The ``workbench`` command.

Each subcommand lives in ``workbench/commands/<name>.py`` with a ``HELP``
line, ``add_arguments(parser)`` and ``run(args) -> int``; this module only
dispatches. A :class:`~workbench.errors.WorkbenchError` becomes one line on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from workbench.errors import WorkbenchError

COMMANDS = {
    "reach": "workbench.commands.reach",
    "info": "workbench.commands.info",
    "view": "workbench.commands.view",
    "calibrate": "workbench.commands.calibrate",
    "simulate-log": "workbench.commands.simulate_log",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Optimal control, design and calibration of robots on Pinocchio and CasADi.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except WorkbenchError as exc:
        message = " ".join(str(exc).split())
        print(f"workbench {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
