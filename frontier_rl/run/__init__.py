"""The run's services, beneath every component: errors (the one-line RunError), statefile
(atomic writes), lock (one writer per run directory), checkpoint (orbax: save, restore,
retention, damaged-step fallback), metrics (metrics.jsonl, TensorBoard, W&B), budget (when a
run stops), distributed (several processes: init, host-0 work, agreement), health (the NaN
guard and collapse watch), provenance (machine, date, commit and command of a result) and
fields (a config section declared beside the component that reads it).

Layer "base": these modules import nothing of frontier_rl but each other (and no jax model
code), so every layer above may use them. tests/test_imports.py enforces it.
"""
