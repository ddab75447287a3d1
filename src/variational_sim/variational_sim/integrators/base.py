"""The integrator protocol and the errors and warnings every integrator shares."""

from __future__ import annotations

from typing import Protocol, TypeVar

StateT = TypeVar("StateT")
InputsT_contra = TypeVar("InputsT_contra", contravariant=True)


class Integrator(Protocol[StateT, InputsT_contra]):
    """Advances a state by one step of ``step_size`` seconds under held inputs."""

    step_size: float

    def step(self, state: StateT, inputs: InputsT_contra | None = None) -> StateT:
        """Return the state one step later (inputs are held over the step)."""
        ...


class NoSolutionError(RuntimeError):
    """An implicit step has no solution or its Newton solve did not converge."""


class CouplingLimitWarning(UserWarning):
    """Translation per step is large enough to degrade rotational accuracy (DQVI)."""


def check_step_size(step_size: float) -> float:
    """Validate a step size (s): positive and finite."""
    if not (step_size > 0.0 and step_size < float("inf")):
        raise ValueError(
            f"step_size must be a positive finite number of seconds, got {step_size!r}"
        )
    return float(step_size)
