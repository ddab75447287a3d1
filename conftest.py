"""Workspace-wide pytest settings: hypothesis profiles selected by tools/test."""

from hypothesis import HealthCheck, settings

# ci: derandomized so a CI failure reproduces exactly; dev: fresh examples each run.
settings.register_profile("ci", derandomize=True, max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("dev")
