import math

import pytest
import torch
from torch.nn import functional as F

from openafm.errors import ConfigError
from openafm.nn.mlp import SwiGLU
from openafm.nn.moe import MoE, MoEKernel, grouped_mm_unsupported

DIM, HIDDEN = 8, 12  # multiples of 4: grouped_mm can run them in float32

KERNELS = [
    pytest.param(MoEKernel.SEGMENT_LOOP),
    pytest.param(MoEKernel.GROUPED_MM, marks=pytest.mark.skipif(
        grouped_mm_unsupported(torch.device("cpu"), torch.float32, DIM, HIDDEN) is not None,
        reason=str(grouped_mm_unsupported(torch.device("cpu"), torch.float32, DIM, HIDDEN)))),
]


def make_moe(n_experts=4, top_k=2, kernel=None, seed=0) -> MoE:
    torch.manual_seed(seed)
    return MoE(DIM, HIDDEN, n_experts, top_k, kernel=kernel)


def naive_moe(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    """Token by token: softmax over all experts, the k best renormalised, a weighted sum of SwiGLUs."""
    out = torch.zeros_like(x.reshape(-1, DIM))
    for t, row in enumerate(x.reshape(-1, DIM).double()):
        probs = (moe.router.weight.double() @ row).softmax(-1)
        best = sorted(range(moe.n_experts), key=lambda e: -probs[e].item())[:moe.top_k]
        total = sum(probs[e] for e in best)
        for e in best:
            h = moe.gate_up[e].double() @ row
            y = moe.down[e].double() @ (F.silu(h[:HIDDEN]) * h[HIDDEN:])
            out[t] += (probs[e] / total * y).float()
    return out.view(x.shape)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_experts,top_k", [(4, 1), (4, 2), (5, 3)])
def test_matches_naive_per_token_loop(kernel, n_experts, top_k):
    moe = make_moe(n_experts, top_k, kernel)
    assert moe.kernel == kernel
    x = torch.randn(2, 7, DIM)
    out = moe(x)
    assert out.shape == (2, 7, DIM)
    assert (out - naive_moe(moe, x)).abs().max().item() < 1e-5
    assert moe.last_stats.tokens_per_expert.sum().item() == 2 * 7 * top_k


def test_kernels_agree():
    moe = make_moe(6, 2)
    x = torch.randn(3, 5, DIM)
    moe.kernel = MoEKernel.SEGMENT_LOOP
    a = moe(x)
    if grouped_mm_unsupported(torch.device("cpu"), torch.float32, DIM, HIDDEN) is None:
        moe.kernel = "grouped_mm"
        assert (moe(x) - a).abs().max().item() < 1e-6


@pytest.mark.parametrize("kernel", KERNELS)
def test_adversarial_routing_drops_no_token(kernel):
    moe = make_moe(n_experts=4, top_k=2, kernel=kernel)
    with torch.no_grad():  # a router that sends every token to experts 2 (first) and 0 (second)
        moe.router.weight.zero_()
        moe.router.weight[2, 0] = 50.0
        moe.router.weight[0, 0] = 20.0
    x = torch.randn(1, 16, DIM)
    x[..., 0] = x[..., 0].abs() + 1.0  # feature 0 positive: experts 2 > 0 > the rest for every token
    out = moe(x)
    assert moe.last_stats.tokens_per_expert.tolist() == [16, 0, 16, 0]
    assert (out - naive_moe(moe, x)).abs().max().item() < 1e-5
    assert out.abs().sum(-1).min().item() > 0  # every token got its experts' output


@pytest.mark.parametrize("kernel", KERNELS)
def test_all_tokens_one_expert_top1(kernel):
    moe = make_moe(n_experts=3, top_k=1, kernel=kernel)
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[1, 0] = 50.0
    x = torch.randn(2, 5, DIM)
    x[..., 0] = x[..., 0].abs() + 1.0
    out = moe(x)
    assert moe.last_stats.tokens_per_expert.tolist() == [0, 10, 0]
    dense = SwiGLU(DIM, HIDDEN)
    with torch.no_grad():
        dense.gate_up.weight.copy_(moe.gate_up[1])
        dense.down.weight.copy_(moe.down[1])
    assert (out - dense(x)).abs().max().item() < 1e-5


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradients_reach_router_and_experts(kernel):
    moe = make_moe(n_experts=4, top_k=2, kernel=kernel)
    x = torch.randn(2, 6, DIM, requires_grad=True)
    moe(x).sum().backward()
    for p in (moe.router.weight, moe.gate_up, moe.down, x):
        assert p.grad is not None and p.grad.abs().sum().item() > 0
    # gradients equal those of the same computation written per token
    ref = make_moe(n_experts=4, top_k=2, kernel=MoEKernel.SEGMENT_LOOP)
    x2 = x.detach().clone().requires_grad_()
    logits = F.linear(x2.reshape(-1, DIM), ref.router.weight)
    probs = logits.softmax(-1)
    top_p, top_e = probs.topk(2, -1)
    w = top_p / top_p.sum(-1, keepdim=True)
    rows = []
    for t in range(x2.shape[0] * x2.shape[1]):
        acc = 0
        for j in range(2):
            e = top_e[t, j].item()
            h = ref.gate_up[e] @ x2.reshape(-1, DIM)[t]
            acc = acc + w[t, j] * (ref.down[e] @ (F.silu(h[:HIDDEN]) * h[HIDDEN:]))
        rows.append(acc)
    torch.stack(rows).sum().backward()
    for a, b in ((moe.router.weight, ref.router.weight), (moe.gate_up, ref.gate_up), (moe.down, ref.down), (x, x2)):
        assert (a.grad - b.grad).abs().max().item() < 1e-5


def test_router_gradient_from_losses_alone():
    moe = make_moe(n_experts=4, top_k=2)
    moe(torch.randn(2, 6, DIM))
    aux_grad, = torch.autograd.grad(moe.last_stats.aux_loss, moe.router.weight, retain_graph=True)
    z_grad, = torch.autograd.grad(moe.last_stats.z_loss, moe.router.weight)
    assert aux_grad.abs().sum().item() > 0 and z_grad.abs().sum().item() > 0


def test_aux_loss_hand_computed():
    """E=2, k=1, D=2, router = identity, tokens (ln 3, 0) and (0, ln 3): probs (3/4, 1/4) and (1/4, 3/4).
    Each token picks a different expert: f = (1/2, 1/2); P = (1/2, 1/2); aux = 2 * (1/4 + 1/4) = 1.
    Three tokens (ln 3, 0), (ln 3, 0), (0, ln 3): f = (2/3, 1/3), P = (7/12, 5/12),
    aux = 2 * (14/36 + 5/36) = 19/18."""
    moe = MoE(2, 4, 2, 1)
    with torch.no_grad():
        moe.router.weight.copy_(torch.eye(2))
    a, b = [math.log(3), 0.0], [0.0, math.log(3)]
    moe(torch.tensor([[a, b]]))
    assert moe.last_stats.tokens_per_expert.tolist() == [1, 1]
    assert abs(moe.last_stats.aux_loss.item() - 1.0) < 1e-6
    moe(torch.tensor([[a, a, b]]))
    assert moe.last_stats.tokens_per_expert.tolist() == [2, 1]
    assert abs(moe.last_stats.aux_loss.item() - 19 / 18) < 1e-6
    # z-loss: logsumexp(ln 3, 0) = ln 4 for every token
    assert abs(moe.last_stats.z_loss.item() - math.log(4) ** 2) < 1e-6


def test_aux_and_z_loss_equal_their_formulas():
    moe = make_moe(n_experts=5, top_k=2)
    x = torch.randn(3, 4, DIM)
    moe(x)
    logits = (x.reshape(-1, DIM).double() @ moe.router.weight.double().t())  # [12, 5]
    probs = logits.softmax(-1)
    chosen = probs.topk(2, -1).indices
    f = torch.stack([(chosen == e).sum() for e in range(5)]).double() / (12 * 2)
    aux = 5 * (f * probs.mean(0)).sum()
    z = (torch.logsumexp(logits, -1) ** 2).mean()
    stats = moe.last_stats
    assert stats.tokens_per_expert.dtype == torch.int64
    assert stats.tokens_per_expert.tolist() == (f * 24).round().long().tolist()
    assert abs(stats.aux_loss.item() - aux.item()) < 1e-5
    assert abs(stats.z_loss.item() - z.item()) < 1e-5


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("top_k", [1, 2, 4])
def test_upcycled_copies_compute_the_dense_swiglu(kernel, top_k):
    torch.manual_seed(1)
    dense = SwiGLU(DIM, HIDDEN)
    moe = MoE(DIM, HIDDEN, 4, top_k, kernel=kernel)
    with torch.no_grad():
        moe.gate_up.copy_(dense.gate_up.weight.expand(4, -1, -1))
        moe.down.copy_(dense.down.weight.expand(4, -1, -1))
    x = torch.randn(2, 9, DIM)
    assert (moe(x) - dense(x)).abs().max().item() < 1e-5


@pytest.mark.parametrize("args,named", [
    ((DIM, HIDDEN, 2, 3), "top_k=3 n_experts=2"),
    ((DIM, HIDDEN, 4, 0), "top_k=0"),
    ((DIM, HIDDEN, 0, 1), "n_experts=0"),
    ((0, HIDDEN, 4, 2), "dim=0"),
    ((DIM, -5, 4, 2), "hidden=-5"),
])
def test_bad_config_raises_naming_values(args, named):
    with pytest.raises(ConfigError, match=named):
        MoE(*args)


def test_forcing_unsupported_kernel_raises():
    with pytest.raises(ConfigError, match="grouped_mm.*dim=6"):
        MoE(6, HIDDEN, 4, 2, kernel="grouped_mm")  # 6 floats = 24 bytes: not 16-byte aligned
    assert MoE(6, HIDDEN, 4, 2).kernel == MoEKernel.SEGMENT_LOOP  # automatic choice: the loop
    with pytest.raises(ConfigError, match="kernel='warp'"):
        MoE(DIM, HIDDEN, 4, 2, kernel="warp")
    moe = make_moe(kernel=MoEKernel.SEGMENT_LOOP).double()
    with pytest.raises(ConfigError, match="float64"):
        moe.kernel = "grouped_mm"
    moe.kernel = None
    assert moe.kernel == MoEKernel.SEGMENT_LOOP
    if grouped_mm_unsupported(torch.device("cpu"), torch.float32, DIM, HIDDEN) is None:
        forced = make_moe(kernel="grouped_mm")
        forced.double()  # moved after forcing: the forward refuses instead of falling back
        with pytest.raises(ConfigError, match="float64"):
            forced(torch.randn(1, 2, DIM, dtype=torch.float64))


def test_bfloat16_grouped_mm_runs_forward_and_backward():
    moe = MoE(16, 16, 4, 2).to(torch.bfloat16)
    if moe.kernel != MoEKernel.GROUPED_MM:
        pytest.skip(grouped_mm_unsupported(torch.device("cpu"), torch.bfloat16, 16, 16))
    x = torch.randn(2, 5, 16, dtype=torch.bfloat16)
    out = moe(x)
    out.float().square().sum().backward()
    moe.kernel = MoEKernel.SEGMENT_LOOP
    assert (moe(x).float() - out.float()).abs().max().item() < 1e-2
    assert moe.gate_up.grad is not None and moe.down.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("kernel", KERNELS)
def test_empty_input(kernel):
    moe = make_moe(kernel=kernel)
    out = moe(torch.randn(2, 0, DIM))
    assert out.shape == (2, 0, DIM)
    assert moe.last_stats.tokens_per_expert.tolist() == [0, 0, 0, 0]
    assert moe.last_stats.aux_loss.item() == 0 and moe.last_stats.z_loss.item() == 0
