"""Log descriptions of the CSV files ``workbench.recordings.log_files.write_log`` writes."""

from __future__ import annotations

from collections.abc import Sequence

PREFIX = {"positions": "q", "velocities": "dq", "torques": "tau"}


def csv_description(
    joints: Sequence[str],
    sections: Sequence[str] = ("positions", "velocities", "torques"),
    file: str = "log.csv",
    sample_period: float = 0.01,
) -> str:
    """TOML text of a log description: ``[time] sample_period`` and, per section, ``file`` and
    the columns ``q_<joint>`` / ``dq_<joint>`` / ``tau_<joint>`` of ``joints``; the last
    section's table is left open, so that keys appended to the text belong to it."""
    text = f"[time]\nsample_period = {sample_period!r}\n"
    for section in sections:
        columns = ", ".join(f'"{PREFIX[section]}_{j}"' for j in joints)
        text += f'[{section}]\nfile = "{file}"\ncolumns = [{columns}]\n'
    return text
