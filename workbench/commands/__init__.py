"""Subcommands of the ``workbench`` command line (see :mod:`workbench.cli`)."""
