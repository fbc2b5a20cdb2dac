"""Mechanisms of public libraries the tools met, rebuilt in a few lines of plain torch.

Not the libraries themselves (they are not dependencies): each class keeps only what made a
tool go wrong, as the library does it.

- memcnn's ``InvertibleCheckpointFunction``: its backward refuses ``torch.autograd.grad``
  ("not compatible with .grad(), please use .backward()"), pops what it kept on ``ctx``
  (it runs once per forward), and sets its input's and output's ``.grad`` by hand.
- revtorch's reversible blocks: ``fix_random_seed`` draws a seed from Python's ``random``
  and reseeds torch inside forward (the block is deterministic); backward calls
  ``.backward()`` on a recomputed subgraph, which fills the block's parameters' ``.grad``
  as a side effect, and deletes ``ctx.y`` (it runs once per forward).
- detectron2's ``CycleBatchNormList``: forward moves a cursor, ``self._pos``, a plain
  attribute, and the next call takes the other branch.
- xformers' ``Deterministic.record_rng``: forward creates ``self.cpu_state`` in train mode.
- BinaryNet's ``BinarizeLinear``: forward sets an attribute on a parameter,
  ``self.bias.org``, which its training loop branches on.
- normflows' ``ActNorm``: the first forward initialises the parameters from the batch
  through ``.data`` (autograd sees nothing) and sets a flag buffer.
"""

from __future__ import annotations

import random

import torch
from torch import nn


class InvertibleCheckpoint(torch.autograd.Function):
    """memcnn's InvertibleCheckpointFunction, its input kept (``keep_input=True``)."""

    @staticmethod
    def forward(ctx, fn, fn_inverse, num_inputs, *inputs_and_weights):
        ctx.fn, ctx.fn_inverse = fn, fn_inverse
        ctx.weights = inputs_and_weights[num_inputs:]
        inputs = inputs_and_weights[:num_inputs]
        with torch.no_grad():
            outputs = fn(*(x.detach() for x in inputs))
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        detached = tuple(o.detach_() for o in outputs)
        ctx.inputs, ctx.outputs = [inputs], [detached]
        return detached if len(detached) > 1 else detached[0]

    @staticmethod
    def backward(ctx, *grad_outputs):
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError(
                "InvertibleCheckpointFunction is not compatible with .grad(), please use "
                ".backward() if possible"
            )
        if not ctx.outputs:
            raise RuntimeError(
                "Trying to perform backward on the InvertibleCheckpointFunction "
                "for more than 1 times! Try raising `num_bwd_passes` by one."
            )
        inputs, outputs = ctx.inputs.pop(), ctx.outputs.pop()
        with torch.enable_grad():
            detached = tuple(x.detach().requires_grad_() for x in inputs)
            recomputed = ctx.fn(*detached)
        recomputed = recomputed if isinstance(recomputed, tuple) else (recomputed,)
        grads = torch.autograd.grad(recomputed, detached + ctx.weights, grad_outputs)
        for x, grad in zip(inputs, grads, strict=False):  # "mimic backwards", by hand
            x.grad = grad
        for y, grad in zip(outputs, grad_outputs, strict=True):
            y.grad = grad
        return (None, None, None, *grads)


class AdditiveCoupling(nn.Module):
    """y = (x1 + F(x2), x2): invertible."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.F = nn.Linear(channels // 2, channels // 2)

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        return torch.cat([x1 + self.F(x2), x2], dim=1)

    def inverse(self, y):
        y1, y2 = y.chunk(2, dim=1)
        return torch.cat([y1 - self.F(y2), y2], dim=1)


class InvertibleModuleWrapper(nn.Module):
    """memcnn's wrapper: the coupling's parameters are the Function's inputs."""

    def __init__(self, fn: nn.Module) -> None:
        super().__init__()
        self._fn = fn

    def forward(self, x):
        weights = [p for p in self._fn.parameters() if p.requires_grad]
        return InvertibleCheckpoint.apply(self._fn.forward, self._fn.inverse, 1, x, *weights)


class ReversibleBlock(nn.Module):
    """revtorch's block: y = (x1 + f(x2), x2), recomputed in backward from y."""

    def __init__(self, channels: int = 4, fix_random_seed: bool = True) -> None:
        super().__init__()
        self.f_block = nn.Linear(channels // 2, channels // 2)
        self.fix_random_seed = fix_random_seed
        self.random_seeds: dict[str, int] = {}

    def set_random_seed(self, namespace, new=False):
        if not self.fix_random_seed:
            return
        if new:
            self.random_seeds[namespace] = random.randint(0, 2147483647)
        torch.manual_seed(self.random_seeds[namespace])

    def forward(self, x):
        x1, x2 = torch.chunk(x, 2, dim=1)
        with torch.no_grad():
            self.set_random_seed("f", new=True)
            y1 = x1 + self.f_block(x2)
        return torch.cat([y1, x2], dim=1)

    def backward_pass(self, y, dy):
        y1, y2 = torch.chunk(y, 2, dim=1)
        dy1, dy2 = torch.chunk(dy, 2, dim=1)
        with torch.enable_grad():
            x2 = y2.detach().requires_grad_()
            self.set_random_seed("f")
            fx2 = self.f_block(x2)
            fx2.backward(dy1)  # fills f_block's parameters' .grad, as a side effect
        with torch.no_grad():
            x1 = y1 - fx2
            dx2 = dy2 + x2.grad
            return torch.cat([x1, x2.detach()], dim=1), torch.cat([dy1, dx2], dim=1)


class ReversibleModuleFunction(torch.autograd.Function):
    """revtorch's _ReversibleModuleFunction: keeps y on ctx, and deletes it in backward."""

    @staticmethod
    def forward(ctx, x, reversible_blocks):
        for block in reversible_blocks:
            x = block(x)
        ctx.y = x.detach()  # not save_for_backward: freed earlier, in backward
        ctx.reversible_blocks = reversible_blocks
        return x

    @staticmethod
    def backward(ctx, dy):
        y = ctx.y
        del ctx.y
        for i in range(len(ctx.reversible_blocks) - 1, -1, -1):
            y, dy = ctx.reversible_blocks[i].backward_pass(y, dy)
        return dy, None


class ReversibleSequence(nn.Module):
    def __init__(self, blocks: int = 2, channels: int = 4) -> None:
        super().__init__()
        self.reversible_blocks = nn.ModuleList(ReversibleBlock(channels) for _ in range(blocks))

    def forward(self, x):
        return ReversibleModuleFunction.apply(x, self.reversible_blocks)


class Cycle(nn.Module):
    """detectron2's CycleBatchNormList, to its cursor: two domains, taken in turn."""

    def __init__(self, features: int = 3) -> None:
        super().__init__()
        self.lin = nn.Linear(features, features)
        self._pos = 0

    def forward(self, x):
        y = self.lin(x) * (1.0 + self._pos)
        self._pos = (self._pos + 1) % 2
        return y


class Deterministic(nn.Module):
    """xformers' Deterministic: records the random state it ran with, in train mode."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.cpu_state: torch.Tensor  # annotated only: created by forward

    def forward(self, x):
        if self.training:
            self.cpu_state = torch.get_rng_state()
        return self.net(x)


class BinarizeLinear(nn.Linear):
    """BinaryNet's BinarizeLinear: binary weights, and the bias's real value kept on it."""

    def forward(self, x):
        out = nn.functional.linear(x, self.weight.sign())
        if self.bias is not None:
            self.bias.org = self.bias.data.clone()
            out = out + self.bias.view(1, -1).expand_as(out)
        return out


class ActNorm(nn.Module):
    """normflows' ActNorm: scale and shift initialised from the first batch, through .data."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.s = nn.Parameter(torch.zeros(1, features))
        self.t = nn.Parameter(torch.zeros(1, features))
        self.register_buffer("data_dep_init_done", torch.tensor(0.0))

    def forward(self, z):
        if not self.data_dep_init_done > 0.0:
            self.s.data = -torch.log(z.std(dim=0, keepdim=True) + 1e-6).data
            self.t.data = (-z.mean(dim=0, keepdim=True) * torch.exp(self.s)).data
            self.data_dep_init_done = torch.tensor(1.0)
        return z * torch.exp(self.s) + self.t, self.s.sum()
