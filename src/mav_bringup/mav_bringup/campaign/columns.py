"""Names of a campaign output directory's files and columns, in one place: the pipeline that
writes a run's series, the engine that writes the results table and the report that reads
them all import these, so a rename happens here only.

Layout of a campaign output directory ``OUT/``:

- ``campaign.yaml``: the campaign file the runs came from;
- ``results.parquet``: one row per run (``RESULTS_COLUMNS``, ``param.<node>.<name>`` for every
  swept or drawn parameter, ``metric.<name>`` for every figure of merit);
- ``series/<run_id>.parquet``: the run's time series on a 10 Hz grid of simulation time,
  from 0.1 s to the end (``TIME``, errors truth - estimate in ENU with their one-sigma
  bounds, NEES, tracking error; the estimate's columns are NaN before the filter starts,
  the tracking error's while the controller idles);
- ``updates/<run_id>.parquet``: one row per measurement update (``UPDATE_COLUMNS``);
- ``report/``: ``report.md``, its PNG figures and ``summary.json``.
"""

from __future__ import annotations

CAMPAIGN_FILE = "campaign.yaml"
RESULTS_FILE = "results.parquet"
SERIES_DIR = "series"
UPDATES_DIR = "updates"
REPORT_DIR = "report"

# results.parquet
RUN_ID = "run_id"
CONFIG_HASH = "config_hash"  # equal for runs that differ by their seed only
STATUS = "status"
ERROR = "error"
SEED = "seed"
VEHICLE = "vehicle"
SCENARIO = "scenario"
TRAJECTORY = "trajectory"
DURATION = "duration_s"
RESULTS_COLUMNS = (RUN_ID, CONFIG_HASH, STATUS, ERROR, SEED, VEHICLE, SCENARIO, TRAJECTORY,
                   DURATION)
STATUS_OK = "ok"
STATUS_FAILED = "failed"
PARAM_PREFIX = "param."  # param.<node>.<name>: a swept or drawn node parameter
METRIC_PREFIX = "metric."  # metric.<name>: a figure of merit of the run

# series/<run_id>.parquet
SERIES_RATE_HZ = 10.0
"""Rate of the series grid: every run's samples fall on multiples of 1 / SERIES_RATE_HZ."""
TIME = "t_s"  # simulation time since the simulation start, s
AXES = ("x", "y", "z")
ERROR_KINDS = ("position", "velocity", "attitude")
ERROR_UNITS = {"position": "m", "velocity": "m/s", "attitude": "rad"}
"""Units of the error and sigma columns of each kind (attitude: rotation vector)."""
NEES_DOF = 3
"""Degrees of freedom of each NEES column (one 3-vector each)."""


def error_column(kind: str, axis: str) -> str:
    """Truth minus estimate of ``kind`` (ERROR_KINDS) along ``axis`` (ENU)."""
    return f"error_{kind}_{axis}"


def sigma_column(kind: str, axis: str) -> str:
    """The estimator's one-sigma bound of ``error_column(kind, axis)``."""
    return f"sigma_{kind}_{axis}"


def nees_column(kind: str) -> str:
    """Normalised estimation error squared of the 3-vector ``kind`` (full covariance)."""
    return f"nees_{kind}"


TRACKING_COLUMNS = tuple(f"tracking_error_{axis}" for axis in AXES)
"""Reference minus truth position, m."""
TRUTH_POSITION_COLUMNS = tuple(f"truth_{axis}" for axis in "enu")
ESTIMATE_POSITION_COLUMNS = tuple(f"estimate_{axis}" for axis in "enu")
"""Truth and estimated position east, north, up, m (the estimate NaN before the filter
starts)."""

# updates/<run_id>.parquet
UPDATE_TIME = "t_s"
SOURCE = "source"  # gnss_position, gnss_velocity, barometer, magnetometer, ...
NIS = "nis"
DOF = "dof"
ACCEPTED = "accepted"
UPDATE_COLUMNS = (UPDATE_TIME, SOURCE, NIS, DOF, ACCEPTED)
