"""Recordings: every reader of what comes off a robot, as a :class:`Log`.

Importable without calibration: experiment design, payload identification and
``workbench info`` read logs through here too::

    import workbench as wb
    from workbench.recordings import read_log

    chain = wb.models.load("staubli_tx40")
    log = read_log("models/staubli_tx40/identification.toml", chain, require=("tau",))

- ``tables``: CSV (gzip) and NPZ tables with row and column errors: the ``Table`` every
  source gives
- ``stamps``: time stamps as integer nanoseconds: decimal text read exactly, seconds since
  the first stamp
- ``bags``: joint states and poses of ROS 1/2 bags and MCAP files (rosbags)
- ``recording``: the TOML log description and everything it may say about a recording
- ``fixture_sections``: its ``[[fixtures]]`` and ``[[distances]]``: samples resting on
  fixed points or planes, known distances between them
- ``log``: the ``Log``: a recording's samples in memory
- ``log_files``: any log file read as a ``Log``, and a ``Log`` written
- ``chunked_logs``: logs too long for memory: Parquet files and chunk directories read by
  part
- ``clock``: real clocks to uniform segments
- ``standstill``: static postures in a continuous recording
- ``signals``: filters, derivatives, parallel decimation
- ``plausibility``: a recording's channels against its model: units, dead channels,
  duplicated columns

A new log source (a file format a description's ``file`` may name) is one module here
with a reader returning a :class:`~workbench.recordings.tables.Table` (``t`` and one
column per channel) and one dispatch line in ``recording._Reader.table``.
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "Log": "log",
    "Table": "tables",
    "read_table": "tables",
    "write_table": "tables",
    "column_ns": "tables",
    "decimal_ns": "stamps",
    "read_log": "log_files",
    "write_log": "log_files",
    "logged_joints": "log_files",
    "read_description": "recording",
    "read_joint_states": "bags",
    "read_poses": "bags",
    "topics": "bags",
    "uniform_clock": "clock",
    "resample": "clock",
    "standstill_segments": "standstill",
    "average_postures": "standstill",
}

__all__, __getattr__ = exports(__name__, _NAMES)
