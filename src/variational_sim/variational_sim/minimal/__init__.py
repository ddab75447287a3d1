"""Minimal-coordinate models (joint angles with loop constraints), the comparison baseline."""
