import torch

from openafm.nn.linear import Linear
from openafm.nn.rope import RotaryTable, apply_rope


def test_single_row_bf16_path_equals_linear():
    torch.manual_seed(0)
    lin = Linear(64, 96, bias=False).to(torch.bfloat16)
    x = torch.randn(1, 1, 64, dtype=torch.bfloat16)
    ref = x.float() @ lin.weight.float().t()
    assert lin(x).shape == (1, 1, 96)
    assert (lin(x).float() - ref).abs().max().item() < 0.05
    xs = torch.randn(2, 3, 64, dtype=torch.bfloat16)                # several rows: the ordinary kernel
    assert torch.equal(lin(xs), torch.nn.functional.linear(xs, lin.weight))


def test_rope_equals_rotate_half_formula():
    table = RotaryTable(16, 10000.0, 64)
    pos = torch.tensor([[0, 5, 63]])
    cos, sin = table.lookup(pos, torch.float32)                       # [1, 3, 1, 16]
    x = torch.randn(1, 3, 2, 16)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 16, 2).double() / 16)
    ang = pos[0, :, None].double() * inv                              # [3, 8]
    c, s = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x.double().chunk(2, -1)
    ref = x.double() * c[None, :, None] + torch.cat([-x2, x1], -1) * s[None, :, None]
    assert (apply_rope(x, cos, sin).double() - ref).abs().max().item() < 1e-5
