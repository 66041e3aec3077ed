"""The accelerator planner: will a run fit, and what do its programs cost, before any hardware
is rented. `frontier-rl fit` (command.py) plays the selector on the synthetic learner, sizes
every device program the run will make and compiles each for the target (targets.py: the GPU
and TPU compilers with no device; gpu_specs.py: the chips' memory and speed); propose.py
searches meshes and knobs that fit; node_memory.py and node_check.py size a GPU node (trainer
and SGLang side by side); churn.py counts the programs a run compiles; shapes.py holds the
shape buckets every program is padded to; accounting.py and perf.py count FLOPs and
utilisation; compile_cache.py is JAX's persistent compilation cache.

Layer "runs" for the planner itself (command, propose, node_check, churn), which may import
everything up to the trainer's components (config, policy, sim). Its lower modules are
imported by the trainer too and sit in lower layers: shapes, compile_cache, gpu_specs,
targets, perf and node_memory in "base" (they import only that layer: frontier_rl.run and
each other), accounting in "models". tests/test_imports.py enforces the order; this
package's __init__ imports nothing.
"""
