"""The RL update: policy losses (GRPO, DAPO, GSPO, CISPO; losses.py, objectives.py,
registry.py), advantage estimators (advantages.py), packing of groups into train batches
(batch.py), the jitted train step and its sharding rules (train_step.py, sharding.py), the
update around it (update.py: old log-probs, rollout corrections, micro-batches), the
gradient-noise estimate (noise.py) and the `rl` config section (config.py).

Layer "rl": may import the layers below it (base: frontier_rl.run and the planner's shapes
and perf; models and accounting; tasks and data; selection), never rollout, the config or
the runs. tests/test_imports.py enforces it.
"""
