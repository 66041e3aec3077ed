"""The synthetic learner: a StepContext answered by a model of a learning policy (learner.py),
and the runner for selector studies and sensitivity sweeps on it (run.py)."""

from frontier_rl.sim.learner import MODEL_DEFAULTS, SimContext, SimPrompt

__all__ = ["MODEL_DEFAULTS", "SimContext", "SimPrompt"]
