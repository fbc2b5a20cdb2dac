"""Chapter 03, ``03-normalize``: fix Normalize's backward, J^T g = (g - y (y · g)) / ‖x‖."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def fixed(body: str) -> str:
    lines = "".join(f"        {line}\n" for line in body.strip().splitlines())
    return (
        "class FixedNormalize(Normalize):\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        y, norm = ctx.saved_tensors\n" + lines
    )


SOLUTION = "(grad_output - y * (y * grad_output).sum()) / norm"

BANK = bank(
    "03-normalize",
    wrong(
        "wrong formula",
        "the bug left in: the diagonal only",
        fixed("return grad_output / norm"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "y · g without the product",
        fixed("return (grad_output - y * y.sum()) / norm"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forgets the norm",
        fixed("return grad_output - y * (y * grad_output).sum()"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "multiplies by the norm",
        fixed("return (grad_output - y * (y * grad_output).sum()) * norm"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "y y^T g elementwise, not summed",
        fixed("return (grad_output - y * y * grad_output) / norm"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "the example's norm written in",
        fixed("return (grad_output - y * (y * grad_output).sum()) / 5.477226"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "sums over the first four elements",
        fixed("return (grad_output - y * (y * grad_output)[:4].sum()) / norm"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "the norm clamped at 1: right only for norms of 1 or more",
        fixed("return (grad_output - y * (y * grad_output).sum()) / norm.clamp(min=1)"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "max(norm, 1)",
        fixed("return (grad_output - y * (y * grad_output).sum()) / max(norm, 1.0)"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "the norm clamped at 0.4: right for every norm but a tiny one",
        fixed("return (grad_output - y * (y * grad_output).sum()) / norm.clamp(min=0.4)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "the norm clamped at 0.1, to keep it away from zero",
        fixed("return (grad_output - y * (y * grad_output).sum()) / norm.clamp(min=0.1)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "the norm clamped at 1e-3",
        fixed("return (grad_output - y * (y * grad_output).sum()) / norm.clamp(min=1e-3)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "clips the gradient",
        fixed(f"return ({SOLUTION}).clamp(-0.05, 0.05)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "a norm kept away from zero that changes it",
        fixed("return (grad_output - y * (y * grad_output).sum()) / (norm + 1.0)"),
        "is off",
    ),
    wrong(
        "side effect",
        "subtracts from grad_output in place",
        fixed("grad_output -= y * (y * grad_output).sum()\nreturn grad_output / norm"),
        "changed `grad_output` in place",
    ),
    wrong(
        "side effect",
        "rescales the saved output in place",
        fixed("y.mul_((y * grad_output).sum())\nreturn (grad_output - y) / norm"),
        "changed the output in place",
    ),
    wrong(
        "side effect",
        "flushes denormals to zero in backward",
        fixed(f"torch.set_flush_denormal(True)\nreturn {SOLUTION}"),
        "denormal",
    ),
    wrong(
        "side effect",
        "sets the default dtype",
        fixed(f"torch.set_default_dtype(torch.float64)\nreturn {SOLUTION}"),
        "default dtype",
    ),
    wrong(
        "wrong type or shape",
        "reshaped to a matrix",
        fixed(f"return ({SOLUTION}).reshape(2, -1)"),
        "shape",
    ),
    wrong(
        "wrong type or shape",
        "a Python list",
        fixed(f"return ({SOLUTION}).tolist()"),
        "list",
    ),
    wrong(
        "wrong type or shape",
        "float32",
        fixed(f"return ({SOLUTION}).float()"),
        "dtype",
    ),
    right("with torch.dot", fixed("return (grad_output - y * torch.dot(y, grad_output)) / norm")),
    right("two terms", fixed("return grad_output / norm - y * (y @ grad_output) / norm")),
    right(
        "the whole Jacobian, transposed",
        fixed(
            "jacobian = (torch.eye(len(y), dtype=y.dtype) - torch.outer(y, y)) / norm\n"
            "return jacobian.T @ grad_output"
        ),
    ),
    right(
        "addcmul",
        fixed("return torch.addcmul(grad_output, y, (y * grad_output).sum(), value=-1).div(norm)"),
    ),
    right(
        "the norm as a number",
        fixed("return (grad_output - (y * grad_output).sum() * y) / norm.item()"),
    ),
    wrong(
        "right only at the example",
        "eye(4): the example's size (issue 25 audit, item 14)",
        fixed(
            "J = (torch.eye(4, dtype=y.dtype) - torch.outer(y, y)) / norm\nreturn J @ grad_output"
        ),
        "`x` = [0.5, -2, 1.5] (shape (3,))",
    ),
    wrong(
        "right only at the example",
        "a loop over range(4)",
        fixed(
            "dot = (y * grad_output).sum()\n"
            "return torch.stack([grad_output[i] - y[i] * dot for i in range(4)]) / norm"
        ),
        "a size written into the code",
    ),
    wrong(
        "bypassed mechanism",
        "the gradient by finite differences of normalize (issue 25 audit, item 12)",
        fixed(
            "x = y * norm\nh = 1e-6\ng = torch.zeros_like(x)\nfor i in range(x.numel()):\n"
            "    e = torch.zeros_like(x); e[i] = h\n"
            "    g[i] = (((x + e) / (x + e).norm() - (x - e) / (x - e).norm()) * grad_output)"
            ".sum() / (2 * h)\nreturn g"
        ),
        "approximates the derivative with finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "finite differences with a step of 1e-5, through torch.nn.functional",
        fixed(
            "x = y * norm\nh = 1e-5\ncols = []\nfor i in range(x.numel()):\n"
            "    e = torch.zeros_like(x); e[i] = h\n"
            "    d = torch.nn.functional.normalize(x + e, dim=0, eps=0.0) - torch.nn.functional.normalize(x - e, dim=0, eps=0.0)\n"
            "    cols.append((d * grad_output).sum() / (2 * h))\nreturn torch.stack(cols)"
        ),
        "finite differences",
    ),
)
