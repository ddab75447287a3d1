"""Bringup of the suite: the launch and config files it installs, and ``mav-sim``."""
