"""Variational-integrator simulator for multirotors and multibody robots (skeleton)."""
