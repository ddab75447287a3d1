"""Demonstrations built on the integrators (command-line tools)."""
