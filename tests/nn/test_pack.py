import pytest
import torch

from openafm.nn.pack import GROUP, PackedCodes, pack, packed_bytes, unpack


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_round_trip_random_shapes(bits):
    gen = torch.Generator().manual_seed(bits)
    for _ in range(25):
        rows = int(torch.randint(1, 7, (1,), generator=gen))
        n = int(torch.randint(1, 150, (1,), generator=gen))          # many not divisible by 4 or 32
        codes = torch.randint(0, 1 << bits, (rows, n), generator=gen).to(torch.uint8)
        p = pack(codes, bits)
        assert p.in_features == n
        assert p.data.dtype == torch.uint8
        assert p.data.shape == (rows, packed_bytes(n, bits))
        assert torch.equal(unpack(p), codes)


def test_sizes_are_bits_over_eight():
    codes = torch.zeros(3, 4 * GROUP, dtype=torch.uint8)
    assert pack(codes, 2).data.shape[-1] == 32     # 128 codes * 2 bits = 32 bytes
    assert pack(codes, 4).data.shape[-1] == 64
    assert pack(codes, 8).data.shape[-1] == 128


def test_two_bit_layout_matches_the_documented_planes():
    codes = torch.arange(32, dtype=torch.uint8) % 4                  # one group
    data = pack(codes[None], 2).data[0]
    for j in range(8):
        expect = sum(int(codes[j + 8 * p]) << (2 * p) for p in range(4))
        assert int(data[j]) == expect


def test_three_dimensional_codes():
    codes = torch.randint(0, 16, (2, 3, 45)).to(torch.uint8)
    assert torch.equal(unpack(pack(codes, 4)), codes)


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match=r"bits=3 .*\[2, 4, 8\]"):
        pack(torch.zeros(2, 4, dtype=torch.uint8), 3)
    with pytest.raises(ValueError, match="a code is 4, out of range for 2-bit"):
        pack(torch.tensor([[4]], dtype=torch.uint8), 2)
    with pytest.raises(TypeError, match="uint8"):
        pack(torch.zeros(2, 4, dtype=torch.int64), 2)
    with pytest.raises(ValueError, match="bits=5"):
        unpack(PackedCodes(torch.zeros(1, 4, dtype=torch.uint8), 5, 4))
