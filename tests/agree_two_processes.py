"""One of two processes for tests/test_multihost.py's agreement test (run by that test, with
FRONTIER_RL_COORDINATOR / FRONTIER_RL_NUM_PROCESSES / FRONTIER_RL_PROCESS_ID set).

Each process: (1) receives process 0's object from `broadcast_object`; (2) rolls out with a
scripted engine and a verifier that, on process 1 only, scores one response the other way,
and prints the outcomes both processes then hold (process 0's: decided once); (3) passes
`check_agree` on equal batches and (4) stops with the cross-process error on batches that
differ in one advantage. Exit 3 on that error, 0 if it never came, anything else on a bug."""

import json
import sys

import jax
import numpy as np

from frontier_rl.rollout.context import PolicyContext
from frontier_rl.rollout.sampler import SampleResult
from frontier_rl.run import distributed
from frontier_rl.run.errors import RunError
from frontier_rl.tasks import Prompt, build_char_tokenizer


class Scripted:
    """An external engine whose response to prompt i is the digit i % 10, every sample."""

    external = True

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompt_ids, n, sampling):
        eos = self.tokenizer.eos_token_id
        rows = [[self.tokenizer.encode(str(i % 10), add_special_tokens=False)[0], eos]
                for i in range(len(prompt_ids)) for _ in range(n)]
        r = len(rows)
        return SampleResult(tokens=np.asarray(rows, np.int32),
                            logps=np.zeros((r, 2), np.float32),
                            entropies=np.zeros((r, 2), np.float32),
                            lengths=np.full(r, 2, np.int32), finished=np.ones(r, bool))


def main() -> int:
    distributed.initialize()
    me = jax.process_index()
    got = distributed.broadcast_object({"from": me, "items": [1, 2, 3]})

    def verify(prompt, text, finished):
        right = int(text == prompt.answer)
        return 1 - right if (me == 1 and prompt.id == "p2") else right  # a host that disagrees

    prompts = [Prompt(id=f"p{i}", text=f"q{i}", answer=str(i % 2), bucket="b")
               for i in range(4)]
    tokenizer = build_char_tokenizer("0123456789q")
    ctx = PolicyContext(sampler=None, engine=Scripted(tokenizer), tokenizer=tokenizer,
                        prompts=prompts,
                        verify=verify, shape_rewards=lambda o, lengths: o, group_size=2,
                        batch_size=4, temperature=1.0, top_p=1.0, seed=0)
    ctx.begin_step(1, None)
    groups = ctx.rollout([0, 1, 2, 3], 2)
    print(json.dumps({"process": me, "broadcast": got,
                      "outcomes": [g.outcomes.tolist() for g in groups]}), flush=True)
    batch = {"tokens": np.arange(12).reshape(3, 4), "advantages": np.ones(3, np.float32)}
    distributed.check_agree("the packed batch", batch, step=1)
    if me == 1:
        batch["advantages"][2] = -1.0
    try:
        distributed.check_agree("the packed batch", batch, step=2)
    except RunError as e:
        print(f"AGREE_ERROR {e}", flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
