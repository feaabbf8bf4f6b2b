"""Tests of ttgnn.seeding: one derivation for every random stream."""
import pytest
import torch

from ttgnn.seeding import derive_seed, generator, seed_everything


def test_derived_seeds_are_distinct_reproducible_and_31_bit():
    seeds = {derive_seed(s, rank, epoch) for s in range(3) for rank in range(4) for epoch in range(50)}
    seeds |= {derive_seed(s, "init") for s in range(3)} | {derive_seed(s, "known-labels", 1) for s in range(3)}
    assert len(seeds) == 3 * 4 * 50 + 3 + 3
    assert all(0 <= s < 2**31 for s in seeds)
    assert derive_seed(5, 1, 2) == derive_seed(5, 1, 2)
    # a trailing zero key is a different stream (SeedSequence alone would pad (s, a) to (s, a, 0))
    assert derive_seed(7, 3) != derive_seed(7, 3, 0)


def test_bad_keys():
    with pytest.raises(ValueError, match=">= 0"):
        derive_seed(0, -1)
    with pytest.raises(TypeError, match="int or str"):
        derive_seed(0, 1.5)


def test_seed_everything_and_generator_repeat_their_draws():
    seed_everything(derive_seed(1, 0, 0))
    a = torch.rand(3)
    seed_everything(derive_seed(1, 0, 0))
    assert torch.equal(a, torch.rand(3))
    assert torch.equal(torch.rand(4, generator=generator(2, "x")), torch.rand(4, generator=generator(2, "x")))
    assert not torch.equal(torch.rand(4, generator=generator(2, "x")), torch.rand(4, generator=generator(2, "y")))
