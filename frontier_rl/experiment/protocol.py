"""Where each protocol setting of the paper configs comes from (experiment/paper.py).

A paper config carries `c.protocol`, a tree shaped like the config whose leaves read
"<word>: <reference>" for the setting at the same path, one of four words:

  paper    the paper's own text (section, table)
  code     the paper's released code, with the path of the file that sets it
  follows  a setup the paper says it follows, with that setup's file (HIVE follows GRESO)
  ours     a choice of this project, with the reason

`frontier-rl protocol --config=CONFIG` prints (setting, value, word, reference) per row;
`check(c)` lists what is missing or malformed, and the tests run it on every paper config.
Code references name files of the released repositories: HeaPA = horizon-rl/HeaPA (verl
0.6.1), GRESO = Infini-AI-Lab/GRESO; HIVE released no code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import ml_collections

WORDS = ("paper", "code", "follows", "ours")
_FILE = re.compile(r"[\w*{},.-]+/[\w*{},./-]+|\b[\w*-]+\.(?:py|sh|md|yaml)\b")

# Settings that are not config fields: printed with their value in the reference.
PSEUDO = ("hardware",)

_G = "GRESO train-scripts/math_qwen_{1_5b,7b}_dm_greso.sh"
_G_DS = "GRESO train-scripts/math_qwen_{1_5b,7b}_dm_dynamic_sampling.sh"
_G_YAML = "GRESO verl/trainer/config/ppo_trainer.yaml"
_H_SH = "HeaPA scripts/HeaPA_DAPO_PathAgg_MediumOnly_DAPOMath.sh"
_H_TR = "HeaPA recipe/dapo/dapo_ray_trainer_HeaPA.py"
_H_EVAL = "HeaPA eval_dataset_generation.py"
_H_7B = "HeaPA recipe/dapo/HEAP-DAPO_14kdapo_wAug-wTeacher-wRewardRefresh-path-16rollout.sh"
_G_SEL = "GRESO verl/trainer/ttis/presampling_selector.py"

# protocol -> setting -> "word: reference", the settings every config of the protocol has.
SOURCES: dict[str, dict[str, str]] = {
    "hive": {
        "model.path": "paper: HIVE App. B.1 (Qwen2.5-Math-1.5B / 7B among its five models)",
        "task.path": "paper: HIVE App. B.1 (DAPO+MATH)",
        "task.prompt_template": "follows: GRESO examples/data_preprocess/dapo_math.py, "
                                "lighteval_math.py, test_*.py ('Please solve the following math "
                                "problem: ...')",
        "task.chat_template": "follows: GRESO verl/utils/dataset/rl_dataset.py (the model's "
                              "chat template, generation prompt added)",
        "task.reward": "paper: HIVE App. B (1.0 correct / 0.1 extracted but wrong / 0.0); "
                       "scorer GRESO verl/utils/reward_score/latex_math.py",
        "task.eval_reward": "follows: GRESO verl/utils/reward_score/__init__.py (its "
                            "benchmarks are scored by latex_math too)",
        "task.eval_fraction": "ours: the papers evaluate on benchmarks only, so every corpus row "
                              "trains",
        "warmstart.enabled": "paper: HIVE App. B.1 (RL from the released checkpoints)",
        "rl.loss": f"follows: {_G} (algorithm.adv_estimator=grpo)",
        "rl.loss_agg": "follows: GRESO verl/trainer/ppo/core_algos.py (compute_policy_loss: "
                       "masked mean over the mini-batch's tokens)",
        "rl.batch_size": "paper: HIVE Table 4 (B_t = 256)",
        "rl.group_size": "paper: HIVE App. B.1 (G = 8)",
        "rl.minibatches": f"follows: {_G} (ppo_mini_batch_size=64 prompts, which verl "
                          "multiplies by n = 8: HIVE's mini-batch 512; 2,048 / 512 = 4 updates)",
        "rl.epochs": f"follows: {_G_YAML} (ppo_epochs: 1)",
        "rl.learning_rate": "paper: HIVE App. B.1 (1e-6)",
        "rl.b1": "paper: HIVE App. B.1 (AdamW betas (0.9, 0.999))",
        "rl.b2": "paper: HIVE App. B.1 (AdamW betas (0.9, 0.999))",
        "rl.weight_decay": "paper: HIVE App. B.1 (0.01)",
        "rl.warmup_steps": f"follows: {_G_YAML} (warmup_style: constant, no warm-up steps)",
        "rl.grad_clip": f"follows: {_G_YAML} (grad_clip: 1.0)",
        "rl.kl_coef": "paper: HIVE App. B.1 (no KL term)",
        "rl.eps_low": f"follows: {_G_YAML} (clip_ratio: 0.2, both sides)",
        "rl.eps_high": f"follows: {_G_YAML} (clip_ratio: 0.2, both sides)",
        "rl.clip_ratio_c": "follows: GRESO verl/trainer/ppo/core_algos.py (compute_policy_loss "
                           "has no dual clip)",
        "rl.entropy_coef": f"follows: {_G_YAML} (entropy_coeff: 0.001; "
                           "verl/workers/actor/dp_actor.py subtracts it)",
        "rl.overlong_buffer": "follows: GRESO verl/utils/reward_score/latex_math.py (the reward "
                              "is the score alone: no overlong shaping)",
        "rl.adv_std_norm": "paper: HIVE Eq. 2 (A_i = (r_i - mean r) / std r)",
        "rl.num_steps": "paper: HIVE App. B.1 (1,000 steps)",
        "rollout.temperature": "paper: HIVE App. B.1 (temperature 1.0)",
        "rollout.top_p": f"follows: {_G_YAML} (rollout top_p: 1)",
        "rollout.top_k": f"follows: {_G_YAML} (rollout top_k: -1)",
        "rollout.max_new_tokens": f"follows: {_G} (max_response_length=2560 of HIVE's "
                                  "context 4,096)",
        "fit.prompt_len": f"follows: {_G} (max_prompt_length=1536)",
        "eval.every": "paper: HIVE App. B.1 (every 50 steps, best checkpoint reported)",
        "eval.k": f"follows: {_G} (val_kwargs.n=4)",
        "eval.temperature": f"follows: {_G} (val_kwargs.temperature=1)",
        "eval.top_p": f"follows: {_G} (val_kwargs.top_p=0.7)",
        "eval.top_k": f"follows: {_G_YAML} (val_kwargs top_k: -1, which {_G} leaves as it is)",
        "eval.greedy": f"follows: {_G} (val_kwargs.do_sample=True)",
        "eval.max_new_tokens": f"follows: {_G} (validation at max_response_length=2560)",
        "eval.sets": "paper: HIVE §4.1 (MATH500, AIME24, AMC, Minerva, Gaokao, OlympiadBench); "
                     "AMC is GRESO's (examples/data_preprocess/test_amc.py: "
                     "AI-MO/aimo-validation-amc, 83 questions)",
        "hardware": "paper: 8 x A100 (HIVE App. B.1)",
    },
    "heapa": {
        "model.path": "paper: HeaPA Table 2 (Qwen3 0.6B-8B); its released script trains "
                      "Qwen3-4B-Instruct-2507",
        "task.path": f"code: {_H_SH} (TRAIN_FILE dapo-math-14k-no_chinese-unique.parquet, "
                     "written by HeaPA data/prepare_DAPO_training_dataset.py; the paper, §4, "
                     "names DAPO-Math-17k)",
        "task.prompt_template": "code: HeaPA data/prepare_eval_benchmarks.py (PROMPT_TEMPLATE, "
                                "DAPO-Math-17k's own message)",
        "task.chat_template": "code: HeaPA verl/utils/dataset/rl_dataset.py (the model's chat "
                              "template)",
        "task.reward": "code: HeaPA verl/utils/reward_score/math_dapo.py (reward_manager=dapo: "
                       "+1 / -1; verl 0.9.0's file, without 0.9.1's \\boxed{} fallback)",
        "task.eval_reward": "code: HeaPA eval_avg_at_k_multi.py (string or sympy equality)",
        "task.eval_fraction": "ours: the papers evaluate on benchmarks only, so every corpus row "
                              "trains",
        "warmstart.enabled": "paper: HeaPA §4 (RL from the released checkpoints)",
        "rl.loss": "code: HeaPA README.md 'GRPO vs DAPO' (GRPO: seq-mean-token-mean, no "
                   "group filter; DAPO: token-mean, group filter)",
        "rl.batch_size": f"code: {_H_SH} (train_prompt_bsz=512)",
        "rl.group_size": f"code: {_H_SH} (n_resp_per_prompt=16)",
        "rl.minibatches": f"code: {_H_SH} (train_prompt_mini_bsz=64: 8 updates per step)",
        "rl.epochs": "code: HeaPA verl/trainer/config/actor/actor.yaml (ppo_epochs: 1)",
        "rl.learning_rate": f"code: {_H_SH} (optim.lr=1e-6)",
        "rl.b1": "code: HeaPA verl/workers/config/optimizer.py (betas (0.9, 0.999))",
        "rl.b2": "code: HeaPA verl/workers/config/optimizer.py (betas (0.9, 0.999))",
        "rl.weight_decay": f"code: {_H_SH} (optim.weight_decay=0.1)",
        "rl.warmup_steps": f"code: {_H_SH} (optim.lr_warmup_steps=0)",
        "rl.grad_clip": f"code: {_H_SH} (grad_clip=1.0)",
        "rl.kl_coef": f"code: {_H_SH} (use_kl_loss=True, kl_loss_coef=1e-6)",
        "rl.eps_low": f"code: {_H_SH} (clip_ratio_low=0.2)",
        "rl.eps_high": f"code: {_H_SH} (clip_ratio_high=0.28)",
        "rl.clip_ratio_c": f"code: {_H_SH} (clip_ratio_c=10.0)",
        "rl.entropy_coef": f"code: {_H_SH} (entropy_coeff=0)",
        "rl.overlong_buffer": f"code: {_H_SH} and recipe/dapo/HEAP-DAPO_*.sh "
                              "(overlong_buffer.len=4096 in both recipes)",
        "rl.overlong_penalty": f"code: {_H_SH} (overlong_penalty_factor=1.0)",
        "rl.adv_std_norm": f"code: {_H_SH} (adv_estimator=grpo)",
        "rl.num_steps": f"code: {_H_SH} (total_training_steps=500)",
        "rollout.temperature": f"code: {_H_SH} (temperature=1.0)",
        "rollout.top_p": f"code: {_H_SH} (top_p=1.0)",
        "rollout.top_k": f"code: {_H_SH} (top_k=-1)",
        "rollout.max_new_tokens": f"code: {_H_SH} (max_response_length=20480)",
        "fit.prompt_len": f"code: {_H_SH} (max_prompt_length=2048)",
        "eval.every": f"code: {_H_SH} (test_freq=10)",
        "eval.k": "code: HeaPA data/prepare_eval_benchmarks.py (N_REPEATS=16: Avg@16)",
        "eval.temperature": f"code: {_H_EVAL} (temperature 0.7)",
        "eval.top_p": f"code: {_H_EVAL} (top_p 0.7)",
        "eval.top_k": f"code: {_H_EVAL} (TOP_K = 50, passed as rollout.top_k to verl's vLLM "
                      "generation, which keeps the 50 likeliest tokens before top-p)",
        "eval.greedy": f"code: {_H_EVAL} (sampled)",
        "eval.max_new_tokens": f"code: {_H_EVAL} (responses <= 20,480)",
        "eval.sets": "code: HeaPA data/prepare_eval_benchmarks.py (AIME24, AIME25, MATH500, "
                     "MinervaMath, AMC23, GPQA, OlympiadBench)",
        "hardware": "ours: 8 x H200, the machine the configs are fitted to (HeaPA's paper and "
                    "released scripts name no hardware; its scripts run 8 GPUs per node)",
    },
}

# arXiv 2608.17941 (Liu et al., "Efficient RLVR Scheduling via Graph-Structured Online
# Difficulty Estimation"): only what is known of its Table 1 is cited (models, NuminaMath,
# about 1.5M rollouts per run, Avg@8 on four benchmarks); its text was not read, so every
# other setting is HIVE's protocol, marked ours.
_T1 = "paper: 2608.17941 Table 1"
_UNREAD = ("because 2608.17941's text was not read; check against the paper before a paper "
           "run")
_NUMINA_CORPUS = ("ours: a seeded 30,000-problem subset of AI-MO/NuminaMath-CoT, boxed answers "
                  "only, one row per problem (frontier_rl/data/benchmarks.py numina_rows); "
                  "Table 1 names NuminaMath, the variant and the subset are ours " + _UNREAD)


def _as_hive(setting: str) -> str:
    return f"ours: HIVE's, configs/math_hive.py ({SOURCES['hive'][setting]}), {_UNREAD}"


SOURCES["numina"] = {
    **{k: _as_hive(k) for k in SOURCES["hive"]},
    "model.path": f"{_T1} (Qwen2.5-Math-1.5B and Llama-3.2-1B-Instruct)",
    "task.path": _NUMINA_CORPUS,
    "task.eval_fraction": SOURCES["hive"]["task.eval_fraction"],
    "warmstart.enabled": "ours: RL from the released checkpoints Table 1 names, as HIVE and "
                         "HeaPA start it, " + _UNREAD,
    "rl.rollout_budget": f"{_T1} (about 1.5M rollouts per run, pre-sampling included)",
    "rl.num_steps": "ours: HIVE's 1,000 steps as an upper bound only: the run ends at "
                    "rl.rollout_budget (uniform, at 2,048 rollouts a step, at step 733)",
    "eval.k": f"{_T1} (Avg@8)",
    "eval.sets": f"{_T1} (MATH500, AIME24, AIME25, OlympiadBench); OlympiadBench as this "
                 "project builds it (675 English open-ended math problems), the subset Table 1 "
                 "takes not known",
    "hardware": "ours: 8 x A100-80GB (HIVE's) or 8 x H100, the lines `frontier-rl fit "
                "--target` checks (docs/results/fit/compare_numina-*); not read: "
                "2608.17941's text was not available",
}

# Settings that exist only with a selector or recipe: (protocol or "*", setting) -> source.
SELECTOR_SOURCES: dict[str, dict[str, str]] = {
    "hive": {
        "selector.name": "paper: HIVE §3 (the method)",
        "selector.hive.lam": "paper: HIVE Table 4 (lambda = 1.0)",
        "selector.hive.p_easy": "paper: HIVE Table 4 (p_easy^(0) = 0.5)",
        "selector.hive.p_hard": "paper: HIVE Table 4 (p_hard^(0) = 0.5)",
        "selector.hive.delta_p": "paper: HIVE Table 4 (delta p = 0.01)",
        "selector.hive.alpha": "paper: HIVE Table 4 (alpha = 0.25)",
        "selector.hive.k_keep": "paper: HIVE Table 4 (k_keep = 0.5)",
        "selector.hive.k_off": "paper: HIVE Table 4 (k_off = 0.25)",
        "selector.hive.cand_ratio": "paper: HIVE Table 4 (B_cand = 384 = 1.5 B_t)",
        "selector.hive.b_raw": "paper: HIVE Table 4 (b_raw = 32)",
    },
    "hive_v2": {
        "selector.name": "paper: HIVE v2 (arXiv 2603.25184v2) §3.2 (Stage 1 from reward "
                         "history and response entropy)",
        "selector.hive_v2.lam": "ours: 0.5, the two Stage-1 scores at equal weight; v2 §3.2 "
                                "combines them, but its Table 4 deploys lambda = 1.0 (the "
                                "entropy term off: selector hive) and gives no lambda for the "
                                "ablation",
        "selector.hive_v2.eps_ent": "ours: 1e-8; v2 Eq. 5 calls epsilon a small constant",
        **{f"selector.hive_v2.{k}": f"paper: HIVE Table 4 ({v})"
           for k, v in (("p_easy", "p_easy^(0) = 0.5"), ("p_hard", "p_hard^(0) = 0.5"),
                        ("delta_p", "delta p = 0.01"), ("p_min", "p_min = 0.05"),
                        ("p_max", "p_max = 0.95"), ("eps_p", "epsilon_p = 0.01"),
                        ("alpha", "alpha = 0.25"), ("k_keep", "k_keep = 0.5"),
                        ("k_off", "k_off = 0.25"), ("cand_ratio", "B_cand = 384 = 1.5 B_t"),
                        ("b_raw", "b_raw = 32"), ("eta", "eta = 1.25"),
                        ("gate", "the entropy band, App. B.3"),
                        ("b_min", "b_min = 64 at B_t = 256; scaled by B_t / 256, ours"))},
        "selector.hive_v2.p_default": "ours: 0.5 after an all-invalid visit; Alg. 1 names "
                                      "'the default p_e' without a value",
        "selector.hive_v2.z_mode": "paper: HIVE Eq. 3 (trailing zero-variance visits of any "
                                   "type, tau from the latest)",
        "selector.hive_v2.skip_first_epoch": f"follows: {_G_SEL} and {_G} (p updated only "
                                             "when epoch > 0)",
        "selector.hive_v2.stage1": "paper: HIVE §3.2 (Stage 1 on)",
        "selector.hive_v2.stage2": "paper: HIVE §3.3 (the prompt-entropy gate)",
        "selector.hive_v2.scope": "paper: HIVE App. B.3 (the band per b_raw raw batch)",
        "selector.hive_v2.max_rounds": "ours: at most 16 rollout rounds a step; App. B.3 asks "
                                       "for a safeguard without a value",
    },
    "speed": {
        "selector.name": "paper: SPEED-RL arXiv 2506.09016 Alg. 1 (the method)",
        "selector.speed.n_init": "code: SPEED-RL run_fast_rloo_7b.sh (n_resp_per_prompt=4, "
                                 "N_init; N_cont is rl.group_size - 4 here, the script's "
                                 "n_resp_continue=20 for N = 24)",
        **{f"selector.speed.{k}": "paper: SPEED-RL Alg. 1 (0 < PassRate < 1); code: "
                                  "verl/trainer/ppo/data_controller.py (update_prompts keeps "
                                  "std(acc) > 0)" for k in ("p_low", "p_high")},
        "selector.speed.gen_ratio": "code: SPEED-RL run_fast_rloo_7b.sh (gen_prompt_bsz=64 for "
                                    "train_prompt_bsz=16)",
        "selector.speed.max_gen_batches": "code: SPEED-RL run_fast_rloo_7b.sh "
                                          "(max_num_gen_batches=50)",
    },
    "mopps": {
        "selector.name": "paper: MoPPS arXiv 2507.04632 (the method: Beta posteriors, Thompson "
                         "sampling, the Top-B nearest gamma*)",
        "selector.mopps.cand_ratio": "code: MoPPS recipe/ours/scripts/math/"
                                     "math_verl_1.5b_topk_noinit.sh (tasksampler.ts_ratio=16; "
                                     "the Countdown and Geometry3k scripts use 8)",
        "selector.mopps.target": "code: MoPPS recipe/ours/config/our_trainer.yaml "
                                 "(bandit_target_mean: 0.5, the README's gamma*)",
        **{f"selector.mopps.{k}0": f"code: MoPPS recipe/ours/mopps.py (PosteriorSampler "
                                   f"prior_{k}=1.0, as the trainer builds it)"
           for k in ("alpha", "beta")},
        "selector.mopps.lam": "code: MoPPS recipe/ours/config/our_trainer.yaml "
                              "(bandit_decay_ratio: 1.0, kept by the MATH *_topk_noinit.sh "
                              "scripts; the Countdown and Geometry3k scripts set 0.5)",
    },
    "learnability": {
        "selector.name": "paper: LILO arXiv 2502.12272 (sampling for learnability p(1 - p); no "
                         "code released)",
        "selector.learnability.cand_ratio": "ours: 4 B candidates a step [RECON]; the paper "
                                            "selects its batch from a larger sampled one, the "
                                            "multiple not taken from its text",
        "selector.learnability.n_probe": "ours: 4 probe responses per candidate, half of G = 8 "
                                         "[RECON]",
        "selector.learnability.rule": "ours: the B highest p(1 - p), the top-K rule of "
                                      "Sampling For Learnability (arXiv 2408.15099) [RECON]",
        "selector.learnability.reuse_probes": "ours: the trained group is drawn after the "
                                              "choice, the probes only estimate p [RECON]",
    },
    "ds": {
        "selector.name": "paper: HIVE Table 1 and HeaPA Table 1 (DAPO's dynamic sampling as "
                         "the baseline)",
    },
    "ds@hive": {
        "selector.ds.gen_batch_size": f"follows: {_G_DS} (data.train_batch_size=384 for "
                                      "real_train_batch_size=256)",
        "selector.ds.max_num_gen_batches": "follows: GRESO verl/trainer/ppo/ray_trainer.py "
                                           "(the dynamic-sampling loop has no cap)",
    },
    "ds@heapa": {
        "selector.ds.gen_batch_size": f"code: {_H_SH} (gen_prompt_bsz=512; Qwen2.5-7B-Instruct "
                                      "takes its own script's, MODEL_SOURCES)",
        "selector.ds.max_num_gen_batches": f"code: {_H_SH} (max_num_gen_batches=20)",
    },
    "greso": {
        "selector.name": "paper: HIVE Table 1 (GRESO as a baseline)",
        **{f"selector.greso.{k}": f"code: {_G_SEL} and {_G} (GRESO's own settings: {v})"
           for k, v in (("p_easy", "p_easy 0.5"), ("p_hard", "p_hard 0.5"),
                        ("alpha", "target_zero_variance 0.25"), ("delta_p", "step 0.01"),
                        ("p_min", "min_p 0.05"), ("p_max", "max_p 0.95"),
                        ("eps_p", "keep-probability floor 0.01"),
                        ("sampling_ratio", "sampling batch 384 for 256"),
                        ("b_raw", "dataloader batch 32"), ("b_min", "minimum batch 64"),
                        ("eta", "safety factor 1.25"),
                        ("skip_first_epoch", "p updated only when epoch > 0"))},
        "selector.greso.max_rounds": "ours: at most 16 rollout rounds a step; GRESO's loop has "
                                     "no cap, the selector needs one",
    },
    "pcl": {
        "selector.name": "paper: HIVE Table 1 (PCL as a baseline)",
        "selector.pcl.k": "paper: PCL arXiv 2510.01135 (k = 4 candidates per kept prompt, as "
                          "its summaries give it; no code released)",
        "selector.pcl.tau": "paper: PCL arXiv 2510.01135 (target tau = 0.5)",
        **{f"selector.pcl.{k}": "ours: the host-side stand-in for PCL's value model "
                                "(selection/pcl.py); PCL's network is not released"
           for k in ("kappa", "half_life", "prior_lr", "bucket_prior")},
    },
    "prefilter": {
        "selector.name": "paper: HIVE Table 1 (Pre-filter: filtering by the initial policy)",
        **{f"selector.prefilter.{k}": "ours: a reconstruction (selection/prefilter.py); HIVE "
                                      "gives no criterion, sample count or band"
           for k in ("n", "p_low", "p_high", "pool_limit", "chunk")},
    },
    "uniform": {
        "selector.name": "paper: HeaPA Tables 1-2 ('original GRPO': verl's shuffled "
                         "dataloader)",
    },
    "heapa": {
        "selector.name": "paper: HeaPA §3 (the method)",
        "selector.heapa.capacity": f"code: {_H_SH} and recipe/dapo/HEAP-DAPO_*.sh "
                                   "(dynamic_data.max_pool_size=1000000)",
        "selector.heapa.alpha": f"code: {_H_TR} (ThreadSafeQueryPool low_fraction=0.5, "
                                "never overridden)",
        "selector.heapa.recycle_archive_max": "ours: A_max = 8,192, 16 steps of B = 512 (the "
                                              "paper names the trigger but no value; the code "
                                              "has no such trigger)",
        "selector.heapa.refresh": f"code: {_H_SH} (refresh_reward=path_aggregation)",
        "selector.heapa.n_aug": f"code: {_H_SH} (augmentation.num_per_prompt=1)",
        "selector.heapa.d_min": f"code: {_H_TR} (difficulty clamp [0.75, 1.33])",
        "selector.heapa.d_max": f"code: {_H_TR} (difficulty clamp [0.75, 1.33])",
        "selector.heapa.reward_scheme": "paper: HeaPA §3 (r = 1 / 0 / -1; the code's +-1 is "
                                        "reward_scheme='pm1')",
        "selector.heapa.aug_entry": "paper: HeaPA §3 (accepted pairs enter the cold queue)",
        "selector.heapa.teacher_model": f"code: {_H_SH} (dynamic_data.teacher_model="
                                        "gpt-5-nano)",
        "selector.heapa.filter_groups": "code: HeaPA README.md 'GRPO vs DAPO' "
                                        "(algorithm.filter_groups.enable: False for GRPO, True "
                                        "for DAPO)",
        "selector.heapa.max_rounds": f"code: {_H_SH} (max_num_gen_batches=20)",
        "selector.heapa.teacher_url": "ours: a local OpenAI-compatible server, distinct from the "
                                      "rollout server (HeaPA called OpenAI's API)",
    },
}
SELECTOR_SOURCES["ds@numina"] = {k: f"ours: HIVE's DS, configs/math_dapo.py ({v}), {_UNREAD}"
                                 for k, v in SELECTOR_SOURCES["ds@hive"].items()}

# Settings whose source depends on the model (paper.MODELS args): they replace the protocol's.
_HIVE_MODEL = "paper: HIVE App. B.1 ({} among its five models)"
MODEL_SOURCES: dict[str, dict[str, str]] = {
    "deepseek-r1-distill-qwen-1.5b": {
        "model.path": _HIVE_MODEL.format("DeepSeek-R1-Distill-Qwen-1.5B")},
    "qwen3-4b-base": {"model.path": _HIVE_MODEL.format("Qwen3-4B-Base")},
    "llama3.2-3b-instruct": {"model.path": _HIVE_MODEL.format("Llama-3.2-3B-Instruct")},
    "llama3.2-1b-instruct": {
        "model.path": f"{_T1} (Llama-3.2-1B-Instruct)",
        "rollout.max_new_tokens": "ours: HIVE's 2,560 (GRESO's max_response_length=2560): "
                                  "Llama-3.2-1B-Instruct's 128k context does not force it as "
                                  "Qwen2.5-Math's 4,096 does, but HIVE App. B.1 trains "
                                  "Llama-3.2-3B-Instruct at the settings of its Qwen models, "
                                  "and one cap keeps both models' rollouts alike at equal "
                                  f"rollout counts; {_UNREAD}"},
    "qwen3-4b-instruct-2507": {
        "model.path": f"code: {_H_SH} (MODEL_PATH=Qwen/Qwen3-4B-Instruct-2507, non-thinking: "
                      "no enable_thinking is passed to its chat template)"},
    "qwen2.5-7b-instruct": {
        "model.path": f"paper: HeaPA Table 1 (Qwen2.5-7B-Instruct); {_H_7B} "
                      "(MODEL_PATH=Qwen/Qwen2.5-7B-Instruct)",
        "rl.batch_size": f"code: {_H_7B} (train_prompt_bsz=512)",
        "rl.group_size": f"code: {_H_7B} (n_resp_per_prompt=16)",
        "rl.minibatches": f"code: {_H_7B} (train_prompt_mini_bsz=128: 512 / 128 = 4 updates "
                          "per step)",
        "rl.learning_rate": f"code: {_H_7B} (optim.lr=1.5e-6)",
        "rl.warmup_steps": f"code: {_H_7B} (optim.lr_warmup_steps=20 training steps; verl "
                           "steps the lr scheduler once per step, HeaPA "
                           "verl/workers/fsdp_workers.py update_actor, this optimizer once per "
                           "update: 20 x 4 = 80)",
        "rl.weight_decay": f"code: {_H_7B} (optim.weight_decay=0.1)",
        "rl.num_steps": f"code: {_H_7B} (total_training_steps=1000)",
        "rollout.max_new_tokens": f"code: {_H_7B} (max_response_length=20480)",
        "fit.prompt_len": f"code: {_H_7B} (max_prompt_length=2048)",
        "task.path": f"code: {_H_7B} (TRAIN_FILE fullset_14k-dapo-math-refreshReward.parquet, "
                     "a 14k DAPO-Math file; the subset of HeaPA "
                     "data/prepare_DAPO_training_dataset.py is the one built here)",
    },
}
# ...and those that exist only with a selector: (model, selector) -> setting -> source.
MODEL_SELECTOR_SOURCES: dict[tuple[str, str], dict[str, str]] = {
    ("qwen2.5-7b-instruct", "ds"): {
        "selector.ds.gen_batch_size": f"code: {_H_7B} (gen_prompt_bsz=$((train_prompt_bsz * 2)) "
                                      "= 1,024)"},
}

# The corpus args (paper.DATASETS) other than the protocol's default: their source replaces
# task.path's.
DATASET_SOURCES = {
    "dapo_math": "paper: HeaPA §4 (DAPO-Math-17k, every row; BytedTsinghua-SIA/DAPO-Math-17k)",
    "math": "follows: GRESO examples/data_preprocess/lighteval_math.py (MATH train, 7,500 "
            "rows: the MATH half of HIVE's DAPO+MATH)",
    "dapo_math+math": "paper: HIVE App. B.1 (DAPO+MATH)",
    "dapo_math_14k": "code: HeaPA data/prepare_DAPO_training_dataset.py (CJK-free, one row per "
                     "extra_info.index)",
    "openr1_math_30k": "paper: HIVE App. B.1 (a 30k subset of Open-R1 math); drawn as GRESO "
                       "examples/data_preprocess/openr1_math_default.py draws it (the first "
                       "30,000 rows)",
    "openr1_math_heapa": "paper: HeaPA Table 1 (OpenR1-Math); filtered as HeaPA "
                         "data/prepare_OpenR1_training_dataset.py filters it",
    "numina_math": _NUMINA_CORPUS,
}
DEFAULT_DATASET = {"hive": "dapo_math+math", "heapa": "dapo_math_14k",
                   "numina": "numina_math"}  # = paper.DEFAULT_DATASET

# The released scripts' in-run validation (paper.SCRIPT_VAL, flag `script_val`).
_VAL = ("TEST_FILE aime-2024-960.parquet, val_kwargs.n=1: 960 rows are 32 per AIME24 problem "
        "(the file is not in the repository; its row count is read from its name)")
SCRIPT_VAL_SOURCES = {
    "eval.sets": f"code: {_H_SH} ({_VAL})",
    "eval.k": f"code: {_H_SH} ({_VAL})",
    "eval.temperature": f"code: {_H_SH} (val_kwargs.temperature=${{temperature}}=1.0)",
    "eval.top_p": f"code: {_H_SH} (val_kwargs.top_p=${{val_top_p}}=0.7)",
    "eval.top_k": f"code: {_H_SH} (val_kwargs.top_k=${{top_k}}=-1)",
    "eval.greedy": f"code: {_H_SH} (val_kwargs.do_sample=True)",
    "eval.every": f"code: {_H_SH} (test_freq=10)",
}
SCRIPT_VAL_MODEL_SOURCES = {
    "qwen2.5-7b-instruct": {"eval.every": f"code: {_H_7B} (test_freq=1000)",
                            "eval.sets": f"code: {_H_7B} ({_VAL})",
                            "eval.k": f"code: {_H_7B} ({_VAL})"},
}

COMPARE_SOURCES = {
    "compare.methods": "paper: HIVE Table 1 (DS, Pre-filter, GRESO, PCL, HIVE), all at the "
                       "protocol's loss, selection the only difference, as HIVE App. B.1 runs "
                       "them; uniform GRPO and HeaPA added (ours), PCL's second run at its "
                       "own settings (pcl_own) from PCL's summaries",
    "compare.budget": "paper: HIVE App. B.1 (DS, GRESO and HIVE train the same 1,000 steps; "
                      "Table 1 reports the rollouts each spent; Pre-filter and PCL go to "
                      "GRESO's, compare.match_rollouts)",
    "compare.match_rollouts": "paper: HIVE §4.1, App. B.2 and Table 1 (Pre-filter and PCL at a "
                              "matched rollout budget, their #Rollout GRESO's)",
    "compare.best_of": "paper: HIVE App. B.2 (the two-run protocol: PCL at its own and at "
                       "HIVE's common settings, the higher average reported); the choice over "
                       "the mean across seeds of the final average is ours, as the report "
                       "compares final values",
    "compare.steps": "paper: HIVE App. B.1 (1,000 steps)",
    "compare.rollout_budget": "paper: HIVE Table 1 (HIVE's own #Rollout for the model; used "
                              "only with compare.budget='rollouts')",
    "compare.token_budget": "ours: unused at compare.budget='steps' (HIVE matches steps); a "
                            "rerun at matched generated tokens sets it",
    "compare.pflops_budget": "ours: unused at compare.budget='steps' (HIVE matches steps); a "
                             "rerun at matched measured PFLOPs sets it",
    "compare.evals": "paper: HIVE App. B.1 (every 50 steps: 1,000 / 20)",
    "compare.settings_notes": "ours: the baselines' reconstructed parts, with why",
    "compare.metric": "paper: HIVE App. B.1 (six-benchmark average of the best checkpoint)",
    "compare.target": "ours: DS's best, the baseline HIVE compares with",
    "compare.rollout_reference": "ours: rollouts compared with DS's, HIVE's cost baseline",
}
# A protocol's own comparison (configs/compare_numina.py): it replaces COMPARE_SOURCES.
PROTOCOL_COMPARE_SOURCES = {
    "numina": {
        "compare.methods": f"{_T1} (GVM, PCL and GRESO beside its graph-based estimator, at "
                           "equal rollouts); uniform GRPO, DS and this project's selectors "
                           "added (ours), every method at the protocol's loss and batch; GVM "
                           "(arXiv 2505.02391, a per-prompt allocation of samples, not a "
                           "prompt selector of the registry) and the paper's estimator are "
                           "not implemented",
        "compare.budget": f"{_T1} (the methods compared at about the same rollouts)",
        "compare.rollout_budget": f"{_T1} (about 1.5M rollouts per run, pre-sampling "
                                  "included; every generated response counts here)",
        "compare.steps": "ours: unused at compare.budget='rollouts'",
        "compare.token_budget": "ours: unused at compare.budget='rollouts' (Table 1 matches "
                                "rollouts); a rerun at matched generated tokens sets it",
        "compare.pflops_budget": "ours: unused at compare.budget='rollouts' (Table 1 matches "
                                 "rollouts); a rerun at matched measured PFLOPs sets it",
        "compare.evals": "ours: 20 evaluations over the budget (every 75,000 rollouts), as "
                         f"HIVE evaluates 20 times over its 1,000 steps, {_UNREAD}",
        "compare.metric": "ours: the unweighted mean of Table 1's four Avg@8 at the final "
                          f"evaluation (the final or best checkpoint: not known), {_UNREAD}",
        "compare.target": "ours: uniform GRPO, the baseline every selector must beat at "
                          "equal rollouts",
        "compare.rollout_reference": "ours: uniform GRPO's rollouts, the cost of no selection",
        "compare.settings_notes": "ours: the baselines' reconstructed parts, with why",
    },
}


def _paths(tree: Mapping, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        if isinstance(v, Mapping) or hasattr(v, "items"):
            out.update(_paths(v, path + "."))
        else:
            out[path] = v
    return out


def _set(tree: ml_collections.ConfigDict, path: str, value: str) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        if p not in tree:
            tree[p] = ml_collections.ConfigDict()
        tree = tree[p]
    tree[leaf] = value


def _lookup(c, path: str):
    node = c
    for p in path.split("."):
        if not hasattr(node, "keys") or p not in node:
            raise KeyError(path)
        node = node[p]
    return node.to_dict() if hasattr(node, "to_dict") else node


def selectors(c) -> list[str]:
    """The selectors a config runs: its own, or each compared method's."""
    names = [c.selector.name]
    if "compare" in c:
        names += [m.get("selector", {}).get("name", c.selector.name)
                  for m in c.compare.methods.to_dict().values()]
    return list(dict.fromkeys(names))


def attach(c: ml_collections.ConfigDict, protocol: str, model: str = "", dataset: str = "",
           script_val: bool = False, hub: Mapping[str, tuple[str, ...]] | None = None
           ) -> ml_collections.ConfigDict:
    """Sets `c.protocol` for a config of `protocol` (a SOURCES key), its selectors' settings
    included, `model`'s own (MODEL_SOURCES, keyed by paper.MODELS arg), the corpus `dataset`'s
    when it is not the protocol's default (DATASET_SOURCES) and the released scripts' in-run
    validation with `script_val`; `hub` (paper.hub_ids: field -> Hugging Face ids) adds each
    id, at its revision, to the source of model.path, task.path and eval.sets. Call it last,
    once every setting is in place."""
    sources = dict(SOURCES[protocol])
    sources.update(MODEL_SOURCES.get(model, {}))
    if dataset and dataset != DEFAULT_DATASET[protocol]:
        sources["task.path"] = DATASET_SOURCES[dataset]
    if script_val:
        sources.update(SCRIPT_VAL_SOURCES)
        sources.update(SCRIPT_VAL_MODEL_SOURCES.get(model, {}))
    for name in selectors(c):
        own = {k: v for k, v in SELECTOR_SOURCES.get(name, {}).items()
               if k != "selector.name" or "compare" not in c}
        sources.update(own)
        sources.update(SELECTOR_SOURCES.get(f"{name}@{protocol}", {}))
        sources.update(MODEL_SELECTOR_SOURCES.get((model, name), {}))
    if c.rl.loss == "dapo":
        sources["rl.loss"] = f"code: {_H_SH} (loss_agg_mode=token-mean, filter_groups acc)"
        sources["rl.kl_coef"] = ("code: HeaPA recipe/dapo/HEAP-DAPO_14kdapo_*.sh (kl_loss_coef"
                                 "=0.0 in the Qwen2.5-7B DAPO runs; the Qwen3 script's 1e-6 is "
                                 "left out: rl.loss='dapo' has no KL)")
    if c.get("compare"):
        sources.update(PROTOCOL_COMPARE_SOURCES.get(protocol, COMPARE_SOURCES))
    for path, text in hub_references(hub or {}).items():
        if path in sources:
            sources[path] += text
    tree = ml_collections.ConfigDict()
    for path, src in sorted(sources.items()):
        _set(tree, path, src)
    c.protocol = tree
    return c


def hub_references(ids: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """The text each of model.path, task.path and eval.sets gets for its Hugging Face ids."""
    out = {}
    if ids.get("model.path"):
        out["model.path"] = f"; Hugging Face {ids['model.path'][0]}"
    if ids.get("task.path"):
        out["task.path"] = "; built from Hugging Face " + " + ".join(ids["task.path"])
    sets = {k.split(".", 2)[2]: v[0] for k, v in ids.items() if k.startswith("eval.sets.")}
    if sets:
        out["eval.sets"] = "; Hugging Face " + ", ".join(f"{n} {i}" for n, i in sets.items())
    return out


def rows(c) -> list[tuple[str, str, str, str]]:
    """(setting, value, word, reference) for every sourced setting of `c`."""
    out = []
    for path, src in sorted(_paths(c.get("protocol", {})).items()):
        word, _, ref = str(src).partition(":")
        if path in PSEUDO:
            value = "-"
        else:
            try:
                value = repr(_lookup(c, path))
            except KeyError:
                value = "(missing)"
        out.append((path, value, word.strip(), ref.strip()))
    return out


def check(c, required: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with `c`'s sources: a required setting without one, a source that names
    a setting the config lacks, an unknown word, a `code` / `follows` reference without a file,
    an `ours` without a reason."""
    problems = []
    have = _paths(c.get("protocol", {}))
    for path in required:
        if path not in have:
            problems.append(f"{path}: no source")
    for path, value, word, ref in rows(c):
        if value == "(missing)":
            problems.append(f"{path}: sourced, but not a field of this config")
        if word not in WORDS:
            problems.append(f"{path}: source word {word!r} is not one of {list(WORDS)}")
        elif word in ("code", "follows") and not _FILE.search(ref):
            problems.append(f"{path}: {word} names no file ({ref!r})")
        elif not ref:
            problems.append(f"{path}: {word} gives no reference or reason")
    return problems


def table(c) -> str:
    """The rows as an aligned text table."""
    body = [("setting", "value", "source", "reference")] + rows(c)
    w = [max(len(r[i]) for r in body[:]) if i < 2 else 8 for i in range(3)]
    w[1] = min(w[1], 40)
    lines = []
    for s, v, word, ref in body:
        v = v if len(v) <= w[1] else v[: w[1] - 3] + "..."
        lines.append(f"{s:<{w[0]}}  {v:<{w[1]}}  {word:<{w[2]}}  {ref}")
    return "\n".join(lines)


# Sections whose every value that differs from config_lib.default_config() is a protocol
# setting (the selector section: the selectors the config runs), less the fields below, which
# only place the work (memory, devices, files, logging) and leave the update as it is.
SECTIONS = ("model", "task", "warmstart", "rl", "rollout", "eval", "fit", "selector", "compare")
ENGINEERING = (
    "model.preset", "model.dtype", "model.param_dtype", "model.attention", "model.remat",
    "model.scan_layers", "model.logits_chunk", "model.attention_chunk",
    "rl.micro_batch_size", "rollout.rows_per_call", "rollout.entropy_batch",
    # the train step's row layout: the same loss and gradient (tests/test_batch_layouts.py);
    # with several minibatches, "pack" draws them over rows of several responses, where verl
    # splits the minibatches first and packs within each (use_dynamic_bsz)
    "rl.packing",
    "task.name", "task.format", "task.verifier", "task.require_boxed", "task.instruction",
    "task.verify_workers", "task.verify_timeout_s", "task.data_seed", "task.data_dir",
    "compare.run", "compare.seeds",
    "selector.heapa.teacher", "selector.heapa.teacher_workers", "selector.heapa.aug_format",
    "selector.heapa.augment",
)


# where a comparison's runs execute (experiment/launchers.py), not what they compute
WHERE = ("compare.launcher", "compare.slurm.", "compare.workers")


def unsourced(c) -> list[str]:
    """Protocol settings of `c` that differ from the defaults and carry no source (a source
    on a parent covers its children: eval.sets, compare.methods)."""
    from frontier_rl import config_lib

    default = _paths(config_lib.default_config())
    have = _paths(c.get("protocol", {}))
    active = set(selectors(c))
    out = []
    for path, value in sorted(_paths(c).items()):
        section = path.split(".")[0]
        parts = path.split(".")
        if section not in SECTIONS or path in ENGINEERING or path.startswith(WHERE):
            continue
        if section == "selector" and len(parts) > 2 and parts[1] not in active:
            continue
        if path in default and default[path] == value:
            continue
        if any(path == h or path.startswith(h + ".") for h in have):
            continue
        out.append(path)
    return out
