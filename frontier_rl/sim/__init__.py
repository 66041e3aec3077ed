"""The synthetic learner: a StepContext answered by a model of a learning policy (learner.py),
and the runner for selector studies and sensitivity sweeps on it (run.py).

Layer "runs": the runner plays the trainer's selectors and pipeline on the learner, so it
may import everything up to the policy; controls.py and rate_model.py, studies over its
runs, are in layer "experiment".
"""

from frontier_rl.sim.learner import MODEL_DEFAULTS, SimContext, SimPrompt

__all__ = ["MODEL_DEFAULTS", "SimContext", "SimPrompt"]
