"""Chapter 03, ``03-softsign``: a Softsign whose backward gradgradcheck can differentiate."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def softsign(forward: str, backward: str, *, before: str = "", decorator: str = "") -> str:
    """The exercise cell, with ``forward``'s and ``backward``'s bodies (and lines before it)."""

    def body(lines: str) -> str:
        return "".join(f"        {line}\n" for line in lines.strip().splitlines())

    return (
        before.strip()
        + "\n\n\nclass Softsign(Function):\n"
        + "    @staticmethod\n    def forward(ctx, x):\n"
        + body(forward)
        + "\n    @staticmethod\n"
        + (f"    {decorator}\n" if decorator else "")
        + "    def backward(ctx, grad_output):\n"
        + body(backward)
    )


SAVE_X = "ctx.save_for_backward(x)\nreturn x / (1 + x.abs())"
SAVE_Y = "y = x / (1 + x.abs())\nctx.save_for_backward(y)\nreturn y"


def from_x(line: str) -> str:
    """A backward that unpacks the saved input, then returns ``line``."""
    return f"(x,) = ctx.saved_tensors\nreturn {line}"


def from_y(line: str) -> str:
    """A backward that unpacks the saved output, then returns ``line``."""
    return f"(y,) = ctx.saved_tensors\nreturn {line}"


RIGHT = from_x("grad_output / (1 + x.abs()) ** 2")

BANK = bank(
    "03-softsign",
    # --- wrong formula
    wrong(
        "wrong formula",
        "forgets the square",
        softsign(SAVE_X, from_x("grad_output / (1 + x.abs())")),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forgets the abs in the derivative",
        softsign(SAVE_X, from_x("grad_output / (1 + x) ** 2")),
        "is off",
    ),
    wrong(
        "wrong formula",
        "saves y, forgets the abs",
        softsign(SAVE_Y, from_y("grad_output * (1 - y) ** 2")),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forward squares the input",
        softsign(
            "ctx.save_for_backward(x)\nreturn x / (1 + x * x)",
            from_x("grad_output / (1 + x.abs()) ** 2"),
        ),
        "output",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "(y / x)**2: NaN at 0",
        softsign(
            "y = x / (1 + x.abs())\nctx.save_for_backward(x, y)\nreturn y",
            "x, y = ctx.saved_tensors\nreturn grad_output * (y / x) ** 2",
        ),
        "nan",
    ),
    wrong(
        "right only at the example",
        "y * x / x in forward: the output is NaN at 0, told at the point",
        softsign(
            "y = x / (1 + x.abs())\nctx.save_for_backward(x)\nreturn y * x / x",
            from_x("grad_output / (1 + x.abs()) ** 2"),
        ),
        "the output contains nan, first at `x` = 0",
    ),
    wrong(
        "right only at the example",
        "sqrt(x*x) for |x|: the second derivative is NaN at 0",
        softsign(SAVE_X, from_x("grad_output / (1 + (x * x).sqrt()) ** 2")),
        "second derivative",
    ),
    wrong(
        "right only at the example",
        "torch.where over two divisions: nan at ±1",
        softsign(
            SAVE_X,
            from_x("torch.where(x >= 0, grad_output / (1 + x) ** 2, grad_output / (1 - x) ** 2)"),
        ),
        "torch.where",
    ),
    wrong(
        "right only at the example",
        "NumPy's abs of a 0-d array is a scalar: from_numpy fails",
        softsign(
            SAVE_X,
            "(x,) = ctx.saved_tensors\n"
            "d = 1 / (1 + np.abs(x.detach().numpy())) ** 2\n"
            "return grad_output * torch.from_numpy(d)",
            before="import numpy as np",
        ),
        "probes",
    ),
    wrong(
        "right only at the example",
        "a cut-off beyond the example's range",
        softsign(
            SAVE_X, from_x("torch.where(x.abs() < 2.5, grad_output / (1 + x.abs()) ** 2, 0.0)")
        ),
        "probes",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "a smoothed |x| to dodge the kink",
        softsign(SAVE_X, from_x("grad_output / (1 + (x * x + 1e-12).sqrt()) ** 2")),
        "is off",
    ),
    wrong(
        "symptom fix",
        "nan_to_num over a 0/0",
        softsign(
            "y = x / (1 + x.abs())\nctx.save_for_backward(x, y)\nreturn y",
            "x, y = ctx.saved_tensors\nreturn grad_output * (y / x).nan_to_num(1.0) ** 2",
        ),
        "nan",
    ),
    wrong(
        "symptom fix",
        "the saved denominator marked requires_grad",
        softsign(
            "denominator = 1 + x.abs()\nctx.save_for_backward(denominator.requires_grad_())\n"
            "return x / denominator",
            "(denominator,) = ctx.saved_tensors\nreturn grad_output / denominator**2",
        ),
        "cannot trace back to `x`",
    ),
    wrong(
        "symptom fix",
        "adds 0 * x to the saved denominator",
        softsign(
            "denominator = 1 + x.abs()\nctx.save_for_backward(denominator, x)\n"
            "return x / denominator",
            "denominator, x = ctx.saved_tensors\nreturn grad_output / (denominator + 0 * x) ** 2",
        ),
        "saved_tensors[0]",
    ),
    # --- side effect
    wrong(
        "side effect",
        "forward sets the default dtype",
        softsign("torch.set_default_dtype(torch.float64)\n" + SAVE_X, RIGHT),
        "default dtype",
    ),
    wrong(
        "side effect",
        "forward changes torch's thread count",
        softsign("torch.set_num_threads(2)\n" + SAVE_X, RIGHT),
        "threads",
    ),
    wrong(
        "bypassed mechanism",
        "backward switches grad mode off",
        softsign(SAVE_X, "torch.set_grad_enabled(False)\n" + RIGHT),
        "grad mode",
    ),
    wrong(
        "side effect",
        "forward switches anomaly mode on",
        softsign("torch.autograd.set_detect_anomaly(True)\n" + SAVE_X, RIGHT),
        "anomaly mode",
    ),
    wrong(
        "side effect",
        "x kept in a global",
        softsign(
            "global saved_x\nsaved_x = x\nreturn x / (1 + x.abs())",
            "return grad_output / (1 + saved_x.abs()) ** 2",
            before="saved_x = None",
        ),
        "global variable `saved_x`",
    ),
    wrong(
        "side effect",
        "x kept on the class",
        softsign(
            "Softsign.x = x\nreturn x / (1 + x.abs())",
            "return grad_output / (1 + Softsign.x.abs()) ** 2",
        ),
        "`Softsign.x`",
    ),
    wrong(
        "side effect",
        "x kept in a global list",
        softsign(
            "stash.append(x)\nreturn x / (1 + x.abs())",
            "return grad_output / (1 + stash[-1].abs()) ** 2",
            before="stash = []",
        ),
        "global list `stash`",
    ),
    wrong(
        "side effect",
        "abs_ on the saved input",
        softsign(SAVE_X, "(x,) = ctx.saved_tensors\nreturn grad_output / (1 + x.abs_()) ** 2"),
        "in place",
    ),
    wrong(
        "side effect",
        "divides grad_output in place",
        softsign(SAVE_X, from_x("grad_output.div_((1 + x.abs()) ** 2)")),
        "changed `grad_output` in place",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "saves the denominator (the section's mistake)",
        softsign(
            "denominator = 1 + x.abs()\nctx.save_for_backward(denominator)\nreturn x / denominator",
            "(denominator,) = ctx.saved_tensors\nreturn grad_output / denominator**2",
        ),
        "cannot trace back to `x`",
    ),
    wrong(
        "bypassed mechanism",
        "saves x.detach()",
        softsign(
            "ctx.save_for_backward(x.detach())\nreturn x / (1 + x.abs())",
            RIGHT,
        ),
        "detach",
    ),
    wrong(
        "bypassed mechanism",
        "saves a clone of x",
        softsign("ctx.save_for_backward(x.clone())\nreturn x / (1 + x.abs())", RIGHT),
        "cannot trace back to `x`",
    ),
    wrong(
        "bypassed mechanism",
        "the denominator as a ctx attribute",
        softsign(
            "ctx.denominator = 1 + x.abs()\nreturn x / ctx.denominator",
            "return grad_output / ctx.denominator**2",
        ),
        "`ctx.denominator`",
    ),
    wrong(
        "bypassed mechanism",
        "@once_differentiable",
        softsign(
            SAVE_X,
            RIGHT,
            before="from torch.autograd.function import once_differentiable",
            decorator="@once_differentiable",
        ),
        "once_differentiable",
    ),
    wrong(
        "bypassed mechanism",
        "backward under no_grad",
        softsign(
            SAVE_X,
            "(x,) = ctx.saved_tensors\nwith torch.no_grad():\n"
            "    return grad_output / (1 + x.abs()) ** 2",
        ),
        "no_grad",
    ),
    wrong(
        "bypassed mechanism",
        "backward through NumPy",
        softsign(
            SAVE_X,
            "(x,) = ctx.saved_tensors\n"
            "d = 1 / (1 + np.abs(x.detach().numpy())) ** 2\n"
            "return grad_output * torch.as_tensor(d)",
            before="import numpy as np",
        ),
        "NumPy",
    ),
    wrong(
        "bypassed mechanism",
        "backward through NumPy without detach",
        softsign(
            SAVE_X,
            from_x("grad_output * torch.from_numpy((1 / (1 + x.abs()) ** 2).numpy())"),
        ),
        "raised while differentiating",
    ),
    wrong(
        "bypassed mechanism",
        "backward differentiates a detached copy",
        softsign(
            SAVE_X,
            "(x,) = ctx.saved_tensors\nwith torch.enable_grad():\n"
            "    leaf = x.detach().requires_grad_()\n"
            "    (g,) = torch.autograd.grad(leaf / (1 + leaf.abs()), leaf, grad_output)\n"
            "return g",
        ),
        "autograd sees no dependence",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "a list",
        softsign(SAVE_X, from_x("[grad_output / (1 + x.abs()) ** 2]")),
        "list",
    ),
    wrong(
        "wrong type or shape",
        "two gradients for one input",
        softsign(SAVE_X, from_x("grad_output / (1 + x.abs()) ** 2, grad_output")),
        "2",
    ),
    wrong(
        "wrong type or shape",
        "float32 gradient",
        softsign(SAVE_X, from_x("(grad_output / (1 + x.abs()) ** 2).float()")),
        "dtype",
    ),
    wrong(
        "wrong type or shape",
        "summed to a scalar",
        softsign(SAVE_X, from_x("(grad_output / (1 + x.abs()) ** 2).sum()")),
        "shape",
    ),
    # --- right, written differently
    right("saves the output", softsign(SAVE_Y, from_y("grad_output * (1 - y.abs()) ** 2"))),
    right("x.sign() form", softsign(SAVE_X, from_x("grad_output / (1 + x * x.sign()) ** 2"))),
    right(
        "torch.where form",
        softsign(
            "ctx.save_for_backward(x)\nreturn torch.where(x >= 0, x / (1 + x), x / (1 - x))",
            from_x("grad_output / torch.where(x >= 0, 1 + x, 1 - x) ** 2"),
        ),
    ),
    right(
        "saves x and y, mixes them",
        softsign(
            "y = x / (1 + x.abs())\nctx.save_for_backward(x, y)\nreturn y",
            "x, y = ctx.saved_tensors\nreturn grad_output * (1 - y.abs()) / (1 + x.abs())",
        ),
    ),
    right(
        "reciprocal().square() and F.softsign",
        softsign(
            "ctx.save_for_backward(x)\nreturn torch.nn.functional.softsign(x)",
            from_x("grad_output * (1 + x.abs()).reciprocal().square()"),
        ),
    ),
    right(
        "a helper function for the derivative",
        softsign(
            SAVE_X,
            from_x("grad_output * softsign_derivative(x)"),
            before=("def softsign_derivative(x):\n    return 1 / (1 + x.abs()) ** 2"),
        ),
    ),
    right(
        "setup_context form",
        """
        class Softsign(Function):
            @staticmethod
            def forward(x):
                return x / (1 + x.abs())

            @staticmethod
            def setup_context(ctx, inputs, output):
                (x,) = inputs
                ctx.save_for_backward(x)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output / (1 + x.abs()) ** 2
        """,
    ),
    right(
        "an intermediate built under enable_grad",
        softsign(
            "with torch.enable_grad():\n    denominator = 1 + x.abs()\n"
            "ctx.save_for_backward(denominator)\nreturn x / denominator",
            "(denominator,) = ctx.saved_tensors\nreturn grad_output / denominator**2",
        ),
        "Note",
    ),
    right(
        "float64 spelled out",
        softsign(
            SAVE_X, from_x("(grad_output.double() / (1 + x.double().abs()) ** 2).to(x.dtype)")
        ),
    ),
    wrong(
        "wrong type or shape",
        "a sparse output (issue 25 audit, item 6)",
        softsign(
            "ctx.save_for_backward(x)\nreturn (x / (1 + x.abs())).to_sparse()",
            from_x("grad_output.to_dense() / (1 + x.abs()) ** 2"),
        ),
        "is a sparse tensor",
    ),
    wrong(
        "wrong type or shape",
        "a complex output (issue 25 audit, item 9)",
        softsign(
            "ctx.save_for_backward(x)\nreturn (x / (1 + x.abs())).to(torch.complex128)",
            from_x("(grad_output / (1 + x.abs()) ** 2).real"),
        ),
        "a complex tensor (torch.complex128)",
    ),
    wrong(
        "side effect",
        "adds x.grad when there is one (issue 25 audit, item 1)",
        softsign(
            SAVE_X,
            from_x("grad_output / (1 + x.abs()) ** 2 + (x.grad if x.grad is not None else 0)"),
        ),
        "read `.grad` of its input `x`",
    ),
)
