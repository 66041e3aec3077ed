"""A paper config's mesh on a TPU slice of another device count (`sharding.scaled_mesh`,
`fit.target_mesh`)."""

import importlib.util
import os

import pytest

from frontier_rl.fit import command as fit
from frontier_rl.fit import targets
from frontier_rl.rl import sharding


def test_a_mesh_that_fits_is_kept():
    assert sharding.scaled_mesh(1, 8, 1, 8, 8) == ({"data": 1, "fsdp": 8, "model": 1}, 8)
    assert sharding.scaled_mesh(-1, 4, 1, 8, 8) == ({"data": 2, "fsdp": 4, "model": 1}, 8)


@pytest.mark.parametrize("mesh,n,micro,want", [
    ((1, 8, 1), 16, 8, ({"data": 1, "fsdp": 16, "model": 1}, 16)),   # v5p-32
    ((1, 8, 1), 4, 8, ({"data": 1, "fsdp": 4, "model": 1}, 8)),      # v5p-8
    ((1, 8, 2), 32, 4, ({"data": 1, "fsdp": 16, "model": 2}, 16)),   # tensor axis kept
    ((1, 4, 8), 12, 0, ({"data": 1, "fsdp": 3, "model": 4}, 0)),     # gcd of the tensor axis
    ((8, 1, 1), 16, 8, ({"data": 16, "fsdp": 1, "model": 1}, 16)),   # data parallel stays so
])
def test_a_paper_mesh_is_scaled_to_the_slice(mesh, n, micro, want):
    got = sharding.scaled_mesh(*mesh, n, micro)
    assert got == want
    spec, mb = got
    sharding.mesh_shape(spec["data"], spec["fsdp"], spec["model"], n)  # a valid mesh
    assert mb % (spec["data"] * spec["fsdp"]) == 0


def test_fit_scales_the_paper_mesh_to_a_multi_host_slice_and_says_so():
    """A paper config (data=1, fsdp=8) on v5p-32 (16 devices, 4 hosts) used to stop at once;
    `fit` now sizes it on fsdp=16 and prints the overrides the run there needs."""
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs", "math_heapa.py")
    spec = importlib.util.spec_from_file_location("cfg", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    config = mod.get_config("qwen3-8b")
    said = []
    target = targets.parse("v5p-32")
    assert target.hosts == 4 and target.devices == 16
    mb = config.rl.micro_batch_size
    spec = fit.target_mesh(config, target, say=said.append)
    assert spec == {"data": 1, "fsdp": 16, "model": config.mesh.model}
    assert config.mesh.fsdp == 16 and config.rl.micro_batch_size % 16 == 0
    assert config.rl.micro_batch_size >= mb
    assert "--config.mesh.fsdp=16" in said[0] and "v5p-32" in said[0], said
