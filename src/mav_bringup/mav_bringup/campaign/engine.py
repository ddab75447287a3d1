"""Runs a campaign's runs on Ray, one task each, and keeps every result as it arrives.

The driver submits a bounded window of tasks (twice the cluster's CPUs), waits for the next
to finish and writes it at once (``CampaignStore.write``), so a run that finished is on disk
whatever happens later. A run that raises is a failed row (``records.execute``); a worker
that dies (killed, out of memory, segfault) is a failed row too; the campaign goes on.
SIGINT or SIGTERM stops submitting and cancels what is in flight; what finished stays.

Ray: ``ray.init()`` starts a local cluster of ``workers`` CPUs, or joins the one at
``address`` (``ray start --head`` prints it). Tasks take one CPU, are not retried (a run is
deterministic: a second try fails the same way), and run with the math libraries' thread
pools at one thread, so ``workers`` runs use ``workers`` cores.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

import ray
import ray.exceptions
from ray._private.authentication.authentication_token_setup import (
    maybe_enable_token_auth_if_token_available,
)

from mav_bringup.campaign.campaign_file import RunSpec
from mav_bringup.campaign.progress import Progress
from mav_bringup.campaign.records import (
    RunFunction,
    RunRecord,
    error_text,
    execute,
    failed_record,
)
from mav_bringup.campaign.store import CampaignStore

THREAD_LIMITS = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                        "MKL_NUM_THREADS")}
"""Environment of the workers: one thread per run, one run per CPU."""
TASKS_PER_CPU = 2
"""Tasks in flight per cluster CPU: enough to keep every CPU busy between two waits."""
WAIT_S = 0.5
"""Longest wait for a run before the driver looks at signals and the progress line again."""
CONNECT_TIMEOUT_S = 10.0
"""How long ``--address`` may take to accept a connection."""


@dataclass
class CampaignOutcome:
    """What one invocation did: runs finished here, failed among them, and the signal that
    stopped it (None: it ran to the end)."""

    finished: int
    failed: int
    stopped_by: int | None = None


def _cluster_cpus() -> int:
    resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return max(1, int(resources.get("CPU", 1)))


def _check_reachable(address: str) -> None:
    """ConnectionError unless a HOST:PORT address accepts connections: Ray itself retries an
    address where nothing listens for many minutes without a word."""
    host, separator, port = address.rpartition(":")
    if not (separator and host and port.isdigit()) or "/" in address:
        return  # "auto", "ray://...": Ray's own lookup
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S
                                 ).close()
    except OSError as error:
        raise ConnectionError(f"no Ray cluster at {address[:100]}: {error}") from None


@contextmanager
def ray_session(workers: int | None, address: str | None) -> Iterator[int]:
    """A connected Ray driver: the session already open in this process, a new local
    cluster of ``workers`` CPUs (all when None), or the cluster at ``address``. Yields the
    cluster's CPUs; shuts down only what it started."""
    if ray.is_initialized():
        yield _cluster_cpus()
        return
    arguments: dict[str, Any] = {"address": address}
    if address is None:  # "local": a new cluster, even where `ray start` left one running
        arguments = {"address": "local", "num_cpus": workers or os.cpu_count() or 1,
                     "include_dashboard": False}
    else:
        _check_reachable(address)
        # `ray start --head` turns token authentication on when a token exists
        # (~/.ray/auth_token), but a driver given an explicit address sends it only in token
        # mode: the same rule for the driver (RAY_AUTH_MODE, when set, decides).
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    try:
        ray.init(**arguments, log_to_driver=False, logging_level=logging.ERROR,
                 runtime_env={"env_vars": THREAD_LIMITS})
    except (ValueError, RuntimeError) as error:  # bad address, authentication, start-up
        raise ConnectionError(f"Ray could not {'join ' + address if address else 'start'}: "
                              f"{' '.join(str(error).split())[:300]}") from None
    try:
        yield _cluster_cpus()
    finally:
        ray.shutdown()


@contextmanager
def stop_requests() -> Iterator[list[int]]:
    """The SIGINT and SIGTERM received inside the block (noted, not raised: the driver
    stops between two waits); the previous handlers come back after it."""
    received: list[int] = []

    def note(number: int, _frame: FrameType | None) -> None:
        received.append(number)

    previous = {number: signal.signal(number, note)
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _collect(reference: Any, spec: RunSpec, reproduce: str) -> RunRecord:
    """The record of a finished task; a task that did not return one (its worker died, it
    could not start) is a failed run."""
    try:
        record: RunRecord = ray.get(reference)
        return record
    except ray.exceptions.RayTaskError as error:
        cause = error.cause if isinstance(error.cause, BaseException) else error
        return failed_record(spec, error_text(cause), reproduce)
    except ray.exceptions.RayError as error:
        return failed_record(spec, error_text(error), reproduce)


def run_campaign(runs: Sequence[RunSpec], store: CampaignStore, run_function: RunFunction, *,
                 reproduce: Callable[[str], str], progress: Progress,
                 workers: int | None = None, address: str | None = None) -> CampaignOutcome:
    """Run ``runs`` on Ray, writing each run's record to ``store`` as it finishes."""
    remote = ray.remote(num_cpus=1, max_retries=0)(execute)
    outcome = CampaignOutcome(finished=0, failed=0)
    with ray_session(workers, address) as cpus, stop_requests() as received:
        function = ray.put(run_function)
        waiting = deque(runs)
        in_flight: dict[Any, RunSpec] = {}
        while (waiting or in_flight) and not received:
            while waiting and len(in_flight) < TASKS_PER_CPU * cpus:
                spec = waiting.popleft()
                in_flight[remote.remote(spec, function, reproduce(spec.run_id))] = spec
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=WAIT_S)
            for reference in ready:
                spec = in_flight.pop(reference)
                record = _collect(reference, spec, reproduce(spec.run_id))
                if received and not record.ok:
                    continue  # Ctrl-C reaches the workers too: no row, it runs on resume
                store.write(record)
                outcome.finished += 1
                outcome.failed += not record.ok
                progress.finished(record.ok)
            progress.show()
        if received:
            outcome.stopped_by = received[0]
            for reference in in_flight:
                ray.cancel(reference, force=True)
    progress.show(final=True)
    return outcome
