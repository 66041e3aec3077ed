"""The papers' policy sizes and batch shapes, random init: for the fit check and the benches.

  frontier-rl fit --config=configs/scale.py:qwen2.5-math-1.5b --mesh=data=1,fsdp=8 --device=h200
  frontier-rl bench train_step --bench_config=qwen2.5-0.5b

The argument names the architecture (models/presets.py: qwen2.5-0.5b, qwen2.5-math-1.5b,
qwen2.5-math-7b, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, llama3.2-1b,
deepseek-r1-distill-qwen-1.5b, qwen3-4b-base, qwen3-4b-instruct-2507, llama3.2-3b-instruct,
qwen2.5-7b-instruct), with the real vocabulary
and the shape of a released checkpoint. The run shape is the papers' (HIVE and HeaPA both train
with verl): 256 prompts x 8 responses per step, prompts up to 1,024 tokens, responses up to
4,096, Adam at lr 1e-6, 4 PPO minibatches of 64 prompts per step.

Precision and memory: float32 master weights and Adam moments, bfloat16 compute, each decoder
layer rematerialised in the backward pass, a scan over the layers (one compiled layer), and
log-probs computed in chunks of 1,024 positions. `rl.micro_batch_size` (rows per
forward/backward, gradients accumulated over a minibatch's micro-batches) is the size-dependent
knob: the values below fit one 8 x H200 node with mesh (data=1, fsdp=8); `frontier-rl fit`
checks any other mesh or device. The default mesh shards parameters, gradients and optimizer
state over 8 devices (FSDP); on a bigger pod raise `mesh.data`.

The task stays the embedded arithmetic one (its char tokenizer ids all lie inside the real
vocabulary): training at these sizes needs a checkpoint (`model.path`) and the papers' data.
"""

from frontier_rl import config_lib
from frontier_rl.models import presets

# Rows per micro-batch (whole mesh): 2 rows x 5,120 tokens per device for the 1.5B-8B sizes on
# fsdp=8, 4 for the smaller ones.
MICRO_BATCH = {
    "qwen2.5-0.5b": 32, "qwen3-0.6b": 32, "llama3.2-1b": 32,
    "qwen2.5-math-1.5b": 16, "qwen3-1.7b": 16, "qwen3-4b": 16,
    "qwen2.5-math-7b": 16, "qwen3-8b": 16,
    # not yet checked with `frontier-rl fit`: the values of the same size class
    "deepseek-r1-distill-qwen-1.5b": 16, "qwen3-4b-base": 16, "qwen3-4b-instruct-2507": 16,
    "llama3.2-3b-instruct": 16, "qwen2.5-7b-instruct": 16,
}


def get_config(arg: str | None = None):
    name = arg or "qwen2.5-math-1.5b"
    if name not in presets.PRESETS:
        raise ValueError(f"configs/scale.py: unknown arg {arg!r} (use one of "
                         f"{sorted(presets.PRESETS)})")
    c = config_lib.default_config()
    c.model.preset = name
    config_lib.accelerator_memory(c, MICRO_BATCH[name])
    c.rl.batch_size = 256
    c.rl.group_size = 8
    c.rl.learning_rate = 1e-6
    c.rl.epochs = 1
    c.rl.minibatches = 4
    c.rollout.max_new_tokens = 4096
    c.fit.prompt_len = 1024
    c.fit.entropy_rows = 1024
    return config_lib.validate(c)
