import pytest
import torch

from openafm.compress.levels import Levels, level_set


def test_two_bit_grids():
    bal, unb = level_set(Levels.BALANCED, 2), level_set("unbalanced", 2)
    assert bal.values().tolist() == [-1.5, -0.5, 0.5, 1.5]
    assert unb.values().tolist() == [-2.0, -1.0, 0.0, 1.0]
    assert (bal.q_min, bal.q_max, bal.zero, bal.level_max) == (0, 3, 1.5, 1.5)
    assert (unb.q_min, unb.q_max, unb.zero, unb.level_max, unb.level_min) == (0, 3, 2.0, 1.0, -2.0)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_balanced_is_symmetric_half_integer_grid(bits):
    v = level_set(Levels.BALANCED, bits).values()
    assert len(v) == 2 ** bits
    assert torch.equal(v, -v.flip(0))
    assert torch.equal(v - v.floor(), torch.full_like(v, 0.5))
    assert torch.equal(v.diff(), torch.ones(len(v) - 1))


def test_unbalanced_three_bit():
    assert level_set(Levels.UNBALANCED, 3).values().tolist() == [-4, -3, -2, -1, 0, 1, 2, 3]


def test_rounding_noise_is_step_squared_over_twelve():
    ls = level_set(Levels.BALANCED, 2)
    c = 3.0
    step = c / ls.level_max
    assert ls.rounding_noise() * c ** 2 == pytest.approx(step ** 2 / 12)


@pytest.mark.parametrize("bits", [1, 5, 16, 2.0])
def test_bad_bits_raise_naming_value(bits):
    with pytest.raises(ValueError, match=rf"bits={bits!r}.*\[2, 3, 4, 8\]"):
        level_set(Levels.BALANCED, bits)


def test_bad_kind_raises():
    with pytest.raises(ValueError, match="'ternary'.*balanced"):
        level_set("ternary", 2)
