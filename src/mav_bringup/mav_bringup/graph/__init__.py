"""The node graph in one process (``mav-sim``): components, recorder, lock-step runner, report."""
