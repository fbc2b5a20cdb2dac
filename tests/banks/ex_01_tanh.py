"""Chapter 01, ``01-tanh``: write Tanh's forward and backward (save what backward needs)."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def tanh(forward: str, backward: str) -> str:
    """The exercise cell with the given bodies of forward and backward."""

    def body(code: str) -> str:
        return "".join(f"        {line}\n" for line in code.strip().splitlines())

    return (
        "class Tanh(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        + body(forward)
        + "\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        + body(backward)
    )


SAVE_Y = "y = torch.tanh(x)\nctx.save_for_backward(y)\nreturn y"
SAVE_X = "ctx.save_for_backward(x)\nreturn torch.tanh(x)"
FROM_EXP = (
    "ctx.save_for_backward(x)\n"
    "return (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x))"
)

BANK = bank(
    "01-tanh",
    wrong(
        "wrong formula",
        "1 - y instead of 1 - y²",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y)"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "the sigmoid's derivative",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * y * (1 - y)"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "saves x but uses it as if it were y",
        tanh(SAVE_X, "(x,) = ctx.saved_tensors\nreturn grad_output * (1 - x * x)"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "tanh applied twice",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - torch.tanh(y) ** 2)"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forgets grad_output",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn 1 - y * y"),
        "grad_output",
    ),
    wrong(
        "right only at the example",
        "tanh built from exp: nan where exp overflows (at -1000 even in float64)",
        tanh(FROM_EXP, "(x,) = ctx.saved_tensors\nreturn grad_output * (1 - torch.tanh(x) ** 2)"),
        "the output contains nan, first at `x` = -1000",  # the point, not a flat index
    ),
    wrong(
        "right only at the example",
        "a cut-off that holds only near the example",
        tanh(
            "y = torch.where(x.abs() < 3.5, torch.tanh(x), x.sign())\n"
            "ctx.save_for_backward(y)\nreturn y",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "does not match the reference",
    ),
    wrong(
        "symptom fix",
        "keeps the gradient from vanishing",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y).clamp(min=1e-3)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "keeps the derivative above 1e-8",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y).clamp(min=1e-8)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "clamps the output away from ±1",
        tanh(
            "y = torch.tanh(x).clamp(-0.999, 0.999)\nctx.save_for_backward(y)\nreturn y",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "does not match the reference",
    ),
    wrong(
        "side effect",
        "squares the saved output in place",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\ny.mul_(y)\nreturn grad_output * (1 - y)"),
        "changed the output in place",
    ),
    wrong(
        "side effect",
        "tanh_ on the input",
        tanh(
            "y = x.tanh_()\nctx.save_for_backward(y)\nreturn y",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "changed its input `x` in place",
    ),
    wrong(
        "side effect",
        "caches the output on the class",
        tanh(
            "Tanh.saved = torch.tanh(x)\nreturn Tanh.saved.clone()",
            "return grad_output * (1 - Tanh.saved**2)",
        ),
        "`Tanh.saved`",
    ),
    wrong(
        "bypassed mechanism",
        "keeps the output in a global variable",
        tanh(
            "global last_output\nlast_output = torch.tanh(x)\nreturn last_output.clone()",
            "return grad_output * (1 - last_output**2)",
        ),
        "global variable `last_output`",
    ),
    wrong(
        "wrong type or shape",
        "a gradient per element summed",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn (grad_output * (1 - y * y)).sum()"),
        "shape",
    ),
    wrong(
        "wrong type or shape",
        "a tuple from forward",
        tanh(
            "y = torch.tanh(x)\nctx.save_for_backward(y)\nreturn y, x",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "tuple",
    ),
    wrong(
        "wrong type or shape",
        "a NumPy result from forward",
        tanh(
            "y = np.tanh(x.numpy())\nctx.save_for_backward(torch.from_numpy(y))\nreturn y",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "torch.from_numpy",
    ),
    wrong(
        "symptom fix",
        "a floor of 1e-10 on the derivative",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y).clamp(min=1e-10)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "3e-10 added to the derivative",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y + 3e-10)"),
        "is off",
    ),
    wrong(
        "side effect",
        "keeps the output on another class of the notebook",
        "class Store:\n    pass\n\n\n"
        + tanh(
            "y = torch.tanh(x)\nStore.y = y\nctx.save_for_backward(y)\nreturn y",
            "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "`Store.y`",
    ),
    right(
        "the solution's formula, spelled with pow",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y.pow(2))"),
    ),
    right(
        "saves x and recomputes tanh",
        tanh(
            SAVE_X, "(x,) = ctx.saved_tensors\nt = torch.tanh(x)\nreturn grad_output * (1 - t * t)"
        ),
    ),
    right(
        "one over cosh squared",
        tanh(SAVE_X, "(x,) = ctx.saved_tensors\nreturn grad_output / torch.cosh(x) ** 2"),
    ),
    right(
        "grad minus grad y y",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output - grad_output * y * y"),
    ),
    right(
        "the modern form",
        """
        class Tanh(Function):
            @staticmethod
            def forward(x):
                return torch.tanh(x)

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(output)

            @staticmethod
            def backward(ctx, grad_output):
                (y,) = ctx.saved_tensors
                return torch.sub(1, y.square()).mul(grad_output)
        """,
    ),
    wrong(
        "wrong formula",
        "scaled by 1.0009",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y) * 1.0009"),
        "is off",
    ),
    right(
        "the derivative by torch.func.grad of tanh, vmapped (issue 25: torch's own import)",
        tanh(
            SAVE_X,
            "(x,) = ctx.saved_tensors\n"
            "d = torch.func.vmap(torch.func.grad(torch.tanh))(x.reshape(-1))\n"
            "return grad_output * d.reshape(x.shape)",
        ),
        "runs autograd itself",
    ),
    wrong(
        "wrong type or shape",
        "a float64 gradient, cast for a float32 input by autograd (issue 25)",
        tanh(
            SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output.double() * (1 - y.double() ** 2)"
        ),
        "float64 gradient",
    ),
    wrong(
        "wrong formula",
        "off in the 7th digit: the digits that differ are printed (issue 25)",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y) * (1 + 1e-6)"),
        "yours -0.3742749, the reference's gradient -0.3742745",
    ),
    wrong(
        "wrong type or shape",
        "1 - y² alone rounded to float32: linear in grad_output (audit, round B)",
        tanh(SAVE_Y, "(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y).float()"),
        "computes in float32",
    ),
    wrong(
        "symptom fix",
        "1 - y² computed in float32: off by 5e-8 (issue 25)",
        tanh(
            SAVE_Y,
            "(y,) = ctx.saved_tensors\ny = y.float()\nreturn grad_output * (1 - y * y).to(grad_output.dtype)",
        ),
        "computes in float32",
    ),
    right(
        "zero chosen where |y| reaches 1 (no note)",
        tanh(
            SAVE_Y,
            "(y,) = ctx.saved_tensors\n"
            "return torch.where(y.abs() >= 1, torch.zeros_like(y), grad_output * (1 - y * y))",
        ),
    ),
    wrong(
        "symptom fix",
        "output scaled by 1 + 5e-6 (issue 25 audit, item 2)",
        tanh(
            "ctx.save_for_backward(x)\nreturn torch.tanh(x) * (1 + 5e-6)",
            "(x,) = ctx.saved_tensors\nreturn grad_output * (1 - torch.tanh(x) ** 2)",
        ),
        "the output does not match the reference",
    ),
    wrong(
        "right only at the example",
        "e written 2.71828 in forward (issue 25 audit, item 2)",
        tanh(
            "ctx.save_for_backward(x)\ne = torch.pow(2.71828, 2 * x)\nreturn 1 - 2 / (e + 1)",
            "(x,) = ctx.saved_tensors\nreturn grad_output * (1 - torch.tanh(x) ** 2)",
        ),
        "the output does not match the reference",
    ),
    wrong(
        "wrong type or shape",
        "a sparse output (issue 25 audit, item 6)",
        tanh(
            "y = torch.tanh(x)\nctx.save_for_backward(y)\nreturn y.to_sparse()",
            "(y,) = ctx.saved_tensors\nreturn grad_output.to_dense() * (1 - y * y)",
        ),
        "is a sparse tensor",
    ),
    wrong(
        "wrong type or shape",
        "a complex output (issue 25 audit, item 9)",
        tanh(
            "y = torch.tanh(x)\nctx.save_for_backward(y)\nreturn y.to(torch.complex128)",
            "(y,) = ctx.saved_tensors\nreturn (grad_output * (1 - y * y)).real",
        ),
        "a complex tensor (torch.complex128)",
    ),
    wrong(
        "wrong type or shape",
        "a complex gradient",
        tanh(
            SAVE_Y, "(y,) = ctx.saved_tensors\nreturn (grad_output * (1 - y * y)).to(torch.cfloat)"
        ),
        "a complex tensor (torch.complex64)",
    ),
    wrong(
        "side effect",
        "a guard that raises on a second backward (issue 25 audit, item 7)",
        tanh(
            SAVE_Y,
            "if getattr(ctx, 'done', False):\n    raise RuntimeError('Tanh: backward twice')\n"
            "ctx.done = True\n(y,) = ctx.saved_tensors\nreturn grad_output * (1 - y * y)",
        ),
        "backward can run only once on a graph: its first pass sets `ctx.done`",
    ),
    wrong(
        "bypassed mechanism",
        "forward's own graph differentiated without retain_graph (issue 25 audit, item 7)",
        tanh(
            "with torch.enable_grad():\n    leaf = x.detach().requires_grad_()\n"
            "    out = torch.tanh(leaf)\nctx.save_for_backward(leaf, out)\nreturn out.detach()",
            "leaf, out = ctx.saved_tensors\nreturn torch.autograd.grad(out, leaf, grad_output)[0]",
        ),
        "a graph of its own that its first pass freed",
    ),
    right(
        "torch.func.vjp in backward, noted by its name (issue 25 audit, lesser)",
        tanh(
            SAVE_X,
            "(x,) = ctx.saved_tensors\n_, pull = torch.func.vjp(torch.tanh, x)\n"
            "return pull(grad_output)[0]",
        ),
        "runs autograd itself (`torch.func.vjp`)",
    ),
)
