"""Reproducible experiments of the Fly-Hopper issue; each writes PNGs and prints its figures."""
