"""Screw-theory multirotor model, control allocation and tracking controller (skeleton)."""
