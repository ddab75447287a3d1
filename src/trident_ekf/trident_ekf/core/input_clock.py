"""The IMU input's time base as its stamps show it: stamp faults, clock changes, blackouts.

A sample is judged against the time of the latest sample taken (``stamp_fault``): the same
stamp is a ``duplicate``, an earlier one ``out_of_order``, and a forward interval longer than
``FilterConfig.max_imu_stamp_jump`` a ``stamp_jump`` (a gap is shorter: bridged or skipped).
Backward and jumping samples are rejected one by one, so one bad stamp costs one sample. But
``clock_change_samples`` of them in a row that agree among themselves (increasing, intervals
at most ``max_imu_interval``) are a new time base: the driver's clock stepped back, or
jumped ahead. ``InputClock`` then gives the time on the new base at which the estimate
continues: the first sample of the run minus one of its intervals, as if the old base's last
sample had been stamped there. The samples of the run before the last are lost (counted by
their rejection); nothing else is.

A blackout is no usable IMU sample (non-finite, saturated, or none at all) for longer than
``FilterConfig.imu_timeout``. In the input's time that is the stamps of the unusable samples
since the last usable one; when nothing arrives at all only the caller's clock can tell
(``InputClock.fault``'s ``silence_s``: the node's clock since the last usable sample).

Faults that are over stay reported for ``FAULT_HOLD`` s of input time, so that a monitor
reading diagnostics at 1 Hz sees a clock change that took a few milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WARN, ERROR = 1, 2  # diagnostic_msgs/DiagnosticStatus levels
FAULT_HOLD = 1.0  # s of input time a fault that is over is still reported
STAMP_FAULTS = ("duplicate", "out_of_order", "stamp_jump")


def stamp_fault(interval: float, max_stamp_jump: float) -> str | None:
    """Why a sample ``interval`` s after the latest one taken is rejected, or None."""
    if interval <= 0.0:
        return "duplicate" if interval == 0.0 else "out_of_order"
    if interval > max_stamp_jump:
        return "stamp_jump"
    return None


@dataclass(frozen=True)
class InputFault:
    """What diagnostics report about the IMU input: level (WARN, ERROR) and the reason."""

    level: int
    reason: str


class InputClock:
    """Watches the IMU stamps of one session: runs of samples rejected for their stamps (a
    clock change once ``clock_change_samples`` agree), the latest usable and unusable stamps
    (blackout), saturated samples and clock changes (reported for ``FAULT_HOLD``)."""

    def __init__(self) -> None:
        self._run: list[float] = []  # stamps of the current run of stamp-rejected samples
        self.changes = 0  # clock changes so far
        self.last_step = math.nan  # s: new time base minus old at the latest change
        self._changed_at = math.nan  # first stamp integrated on the new base
        self._last_usable = math.nan
        self._last_unusable = math.nan  # latest unusable stamp after the last usable one
        self._saturated_at = math.nan

    @property
    def last_usable(self) -> float:
        """Stamp of the latest usable sample, s (NaN before any)."""
        return self._last_usable

    @property
    def input_time(self) -> float:
        """The latest stamp on the current time base, usable or not (NaN before any)."""
        if math.isnan(self._last_unusable):
            return self._last_usable
        return self._last_unusable

    @property
    def blackout(self) -> float:
        """Input time since the last usable sample, s, from the unusable samples since."""
        if math.isnan(self._last_unusable):
            return 0.0
        return self._last_unusable - self._last_usable

    def usable(self, t: float) -> None:
        """A sample taken (by the filter or the initializer) at ``t``: any run ends."""
        self._last_usable = t
        self._last_unusable = math.nan
        self._run.clear()

    def unusable(self, t: float, saturated: bool, max_stamp_jump: float) -> None:
        """A sample with an unusable reading at ``t``: its stamp measures a blackout when it
        would be a valid one (after the last usable, within ``max_stamp_jump``)."""
        if not 0.0 < t - self._last_usable <= max_stamp_jump:
            return
        last = self._last_unusable
        self._last_unusable = t if math.isnan(last) else max(t, last)
        if saturated:
            self._saturated_at = t

    def stamp_rejected(self, t: float, max_interval: float, needed: int) -> bool:
        """A sample rejected for its stamp (out of order or a jump): True when it is the
        ``needed``-th of a run agreeing on one new time base (then call ``change``)."""
        run = self._run
        if run and not 0.0 < t - run[-1] <= max_interval:
            run.clear()
        run.append(t)
        return len(run) >= needed

    def change(self, previous: float) -> float:
        """Declare the clock change of the current run; ``previous`` is the time of the
        latest sample taken on the old base. Returns the time at which the estimate
        continues on the new base (one run interval before the run's first sample)."""
        run = self._run
        start = run[0] - (run[-1] - run[0]) / (len(run) - 1)
        self.changes += 1
        self.last_step = start - previous
        self._changed_at = run[-1]
        self._last_unusable = math.nan
        self._saturated_at = math.nan
        run.clear()
        return start

    def fault(self, timeout: float, silence_s: float = 0.0) -> InputFault | None:
        """The IMU fault to report now: a blackout longer than ``timeout`` s in input time,
        or ``silence_s`` on the caller's clock (ERROR); a clock change (ERROR) or saturated
        samples (WARN) within ``FAULT_HOLD`` s of input time; None when the input is fine.
        Nothing before the first usable sample."""
        if math.isnan(self._last_usable):
            return None
        silence = max(self.blackout, silence_s)
        if silence > timeout:
            return InputFault(ERROR, f"IMU blackout: no usable sample for {silence:.1f} s")
        now = self.input_time
        if now - self._changed_at < FAULT_HOLD:
            return InputFault(ERROR, f"IMU clock stepped {self.last_step:+.3f} s: continuing "
                                     "on the new time base")
        if now - self._saturated_at < FAULT_HOLD:
            return InputFault(WARN, "IMU saturated: samples at the sensor's range rejected")
        return None
