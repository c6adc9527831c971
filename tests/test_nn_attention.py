"""Shared attention: bias and masks per head, MCAN's LayerNorm."""

import math

import pytest
import torch

from repro.nn.attention import MASK_VALUE, LayerNorm, MultiHeadAttention, unbiased_std


def _manual(att: MultiHeadAttention, x, y, bias, mask, scale):
    b, n, d = x.shape
    h, dh = att.heads, att.d_head
    q = att.q(x).view(b, n, h, dh).transpose(1, 2)
    k = att.k(y).view(b, -1, h, dh).transpose(1, 2)
    v = att.v(y).view(b, -1, h, dh).transpose(1, 2)
    logits = q @ k.transpose(-1, -2) * scale + bias
    logits = logits.masked_fill(mask[:, None, None, :], MASK_VALUE)
    out = torch.softmax(logits, -1) @ v
    return att.out(out.transpose(1, 2).reshape(b, n, d))


def test_bias_and_mask_per_head_match_the_formula():
    torch.manual_seed(0)
    att = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x, y = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    bias = torch.randn(2, 2, 3, 4)
    mask = torch.tensor([[False, False, True, True], [False, False, False, False]])
    got = att(x, y, y, bias=bias, key_padding_mask=mask, scale=0.3)
    assert torch.allclose(got, _manual(att, x, y, bias, mask, 0.3), atol=1e-5)
    # default scale is 1/sqrt(d_head)
    got = att(x, y, y, bias=bias, key_padding_mask=mask)
    assert torch.allclose(got, _manual(att, x, y, bias, mask, 1 / math.sqrt(4)), atol=1e-5)


def test_masked_keys_do_not_matter():
    torch.manual_seed(1)
    att = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x, y = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    mask = torch.tensor([[False, True, False, True]])
    y2 = y.clone()
    y2[0, 1] += 5.0
    y2[0, 3] -= 7.0
    assert torch.allclose(att(x, y, y, key_padding_mask=mask), att(x, y2, y2, key_padding_mask=mask), atol=1e-6)
    assert not torch.allclose(att(x, y, y), att(x, y2, y2), atol=1e-3)


def test_all_keys_masked_gives_finite_output():
    att = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(1, 2, 8)
    out = att(x, x, x, key_padding_mask=torch.ones(1, 2, dtype=torch.bool))
    assert torch.isfinite(out).all()


def test_mcan_layer_norm_uses_unbiased_std_plus_eps():
    ln = LayerNorm(4, eps=0.5)
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
    std = math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (6 - 3) ** 2) / 3)  # unbiased: /(n-1)
    expected = (x - 3.0) / (std + 0.5)
    assert torch.allclose(ln(x), expected, atol=1e-6)


def test_padding_masks_hold_in_every_training_precision():
    """fp16 holds no -1e9 (its largest magnitude is 65,504): the key mask and MCAN's attended pooling use half the
    dtype's most negative value there, so fp16 autocast trains (found on a GPU: 'value cannot be converted to type
    c10::Half without overflow'); fp32 and bf16 keep the official -1e9."""
    from repro.families.mcan_pa.model import AttFlat
    from repro.nn.attention import attention_bias, mask_value

    assert mask_value(torch.float32) == mask_value(torch.bfloat16) == MASK_VALUE
    assert mask_value(torch.float16) == torch.finfo(torch.float16).min / 2
    mask = torch.tensor([[False, False, True, True]])
    bias = torch.full((1, 1, 3, 4), -20.0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        added = attention_bias(bias, mask, dtype)
        assert added.dtype == dtype and torch.isfinite(added).all()
        weights = torch.softmax(added.float(), -1)
        assert torch.equal(weights[..., 2:], torch.zeros_like(weights[..., 2:]))
        pooled = AttFlat(4, 8, 6, dropout=0.0).to(dtype)(torch.randn(1, 4, 4, dtype=dtype), mask)
        assert torch.isfinite(pooled).all()


@pytest.mark.parametrize("shape", [(2, 7, 64), (3, 5, 1, 96), (4, 512)])
def test_unbiased_std_is_torch_std_to_rounding_values_and_gradients(shape):
    torch.manual_seed(0)
    x = (torch.randn(shape, dtype=torch.float64) * 3 + 1).requires_grad_()
    y = x.detach().clone().requires_grad_()
    ours = unbiased_std(x - x.mean(-1, keepdim=True))
    theirs = y.std(-1, keepdim=True)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=0)
    weights = torch.randn_like(theirs)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-10, atol=1e-12)
