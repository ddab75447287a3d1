"""``mav-campaign``: many closed-loop runs (vehicles x scenarios x parameter sets x seeds)
from one campaign file, run in parallel on Ray, each run a row of one tidy table."""
