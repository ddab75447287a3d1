"""A campaign's output directory: one file per finished run, written so that a file that
exists is complete, and the results table made of them (layout in ``columns``)::

    OUT/campaign.yaml             the campaign file's text (the directory belongs to it)
    OUT/runs/<run_id>.json        the run's row; written last, so a row means the run is done
    OUT/series/<run_id>.parquet   its time series
    OUT/updates/<run_id>.parquet  its measurement updates
    OUT/results.parquet           every row of the campaign's runs, one table
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mav_bringup.campaign import columns as C
from mav_bringup.campaign.campaign_file import Campaign, CampaignError
from mav_bringup.campaign.records import ROW_COLUMNS, RunRecord

RUNS_DIR = "runs"


def _write_atomically(path: Path, write: Any) -> None:
    """``write(temporary_path)``, then rename it to ``path`` (readers never see a part)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _table(columns: Mapping[str, np.ndarray]) -> pa.Table:
    return pa.table({name: pa.array(np.asarray(values)) for name, values in columns.items()})


class CampaignStore:
    """The output directory of one campaign."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.runs = self.root / RUNS_DIR
        self.series = self.root / C.SERIES_DIR
        self.updates = self.root / C.UPDATES_DIR

    def claim(self, campaign: Campaign) -> None:
        """Make the directory this campaign's, or check that it already is: an output
        directory holds the runs of one campaign file (CampaignError otherwise)."""
        copy = self.root / C.CAMPAIGN_FILE
        if copy.exists():
            if copy.read_text() != campaign.text:
                raise CampaignError(
                    f"output directory {self.root} holds the runs of another campaign file "
                    f"(its {C.CAMPAIGN_FILE} differs from {campaign.source}); choose another "
                    "--output-dir")
        elif self.root.exists() and any(self.root.iterdir()):
            raise CampaignError(f"output directory {self.root} is not empty and holds no "
                                f"{C.CAMPAIGN_FILE}; choose another --output-dir")
        for folder in (self.runs, self.series, self.updates):
            folder.mkdir(parents=True, exist_ok=True)
        if not copy.exists():
            _write_atomically(copy, lambda path: path.write_text(campaign.text))

    def rows(self) -> dict[str, dict[str, Any]]:
        """The rows of the finished runs, by run id."""
        found = {}
        for path in sorted(self.runs.glob("*.json")):
            try:
                row = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # not written by us, or damaged: the run is not done
            if isinstance(row, dict) and row.get(C.RUN_ID) == path.stem:
                found[path.stem] = row
        return found

    def write(self, record: RunRecord) -> None:
        """The run's tables, then its row."""
        run_id = record.row[C.RUN_ID]
        for folder, columns in ((self.series, record.series), (self.updates, record.updates)):
            path = folder / f"{run_id}.parquet"
            if columns:
                table = _table(columns)
                _write_atomically(path, lambda temporary, t=table: pq.write_table(t, temporary))
            else:
                path.unlink(missing_ok=True)  # a failed retry leaves no stale tables
        text = json.dumps(record.row, allow_nan=True)
        _write_atomically(self.runs / f"{run_id}.json", lambda path: path.write_text(text))

    def combine(self, run_ids: Iterable[str]) -> Path:
        """``results.parquet``: the rows of ``run_ids`` that are done, in that order; columns
        in ``ROW_COLUMNS`` order, then the parameters, then the metrics (sorted)."""
        rows = self.rows()
        chosen = [rows[run_id] for run_id in run_ids if run_id in rows]
        names = {name for row in chosen for name in row}
        extra = sorted(names - set(ROW_COLUMNS))
        order = [*ROW_COLUMNS,
                 *(n for n in extra if n.startswith(C.PARAM_PREFIX)),
                 *(n for n in extra if not n.startswith(C.PARAM_PREFIX))]
        table = pa.table({name: pa.array([row.get(name) for row in chosen]) for name in order})
        path = self.root / C.RESULTS_FILE
        _write_atomically(path, lambda temporary: pq.write_table(table, temporary))
        return path

