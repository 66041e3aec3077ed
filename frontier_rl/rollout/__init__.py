"""Generation: the in-process JAX sampler (sampler.py), the engines behind one interface
(engine.py, engines.py, registry.py: "jax" in process, "sglang" an HTTP client of SGLang's
native API, sglang.py), the step's context that selectors call (context.py: rollouts, pass
rates, prompt entropy, generation), the k-step off-policy pipeline (pipeline.py,
rl.staleness) and `frontier-rl serve` (serve.py).

Layer "rollout": may import base, models, tasks, selection and rl; serve.py alone is a run
(layer "runs") that loads checkpoints and the policy. tests/test_imports.py enforces it.
"""
