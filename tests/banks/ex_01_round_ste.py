"""Chapter 01, ``01-round-ste``: rounding with a straight-through gradient."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def ste(forward: str, backward: str) -> str:
    def body(code: str) -> str:
        return "".join(f"        {line}\n" for line in code.strip().splitlines())

    return (
        "class RoundSTE(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        + body(forward)
        + "\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        + body(backward)
    )


BANK = bank(
    "01-round-ste",
    wrong(
        "wrong formula",
        "the true derivative, zero",
        ste("return torch.round(x)", "return torch.zeros_like(grad_output)"),
        "zero everywhere",
    ),
    wrong(
        "wrong formula",
        "a gradient of ones",
        ste("return torch.round(x)", "return torch.ones_like(grad_output)"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "floor instead of round",
        ste("return torch.floor(x)", "return grad_output"),
        "does not match the reference",
    ),
    wrong(
        "wrong formula",
        "rounds the gradient too",
        ste("return torch.round(x)", "return torch.round(grad_output)"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "floor(x + 0.5): ties go up, not to even",
        ste("return torch.floor(x + 0.5)", "return grad_output"),
        "probes",
    ),
    wrong(
        "right only at the example",
        "truncation of x + 0.5 sign-aware",
        ste("return torch.trunc(x + 0.5 * x.sign())", "return grad_output"),
        "probes",
    ),
    wrong(
        "symptom fix",
        "the identity going forward too",
        ste("return x.clone()", "return grad_output"),
        "does not match the reference",
    ),
    wrong(
        "symptom fix",
        "gradient clipped like a hard tanh",
        ste(
            "ctx.save_for_backward(x)\nreturn torch.round(x)",
            "(x,) = ctx.saved_tensors\nreturn grad_output * (x.abs() <= 1)",
        ),
        "is off",
    ),
    wrong(
        "side effect",
        "rounds the input in place",
        ste("return x.round_()", "return grad_output"),
        "changed its input `x` in place",
    ),
    wrong(
        "side effect",
        "sets the default dtype",
        ste("torch.set_default_dtype(torch.float64)\nreturn torch.round(x)", "return grad_output"),
        "default dtype",
    ),
    wrong(
        "bypassed mechanism",
        "x + (round(x) - x).detach() inside forward, nothing in backward",
        ste("return x + (torch.round(x) - x)", "return grad_output * 0"),
        "is off",
    ),
    wrong(
        "wrong type or shape",
        "a Python float from backward",
        ste("return torch.round(x)", "return 1.0"),
        "not a tensor",
    ),
    wrong(
        "wrong type or shape",
        "an integer tensor from forward",
        ste("return torch.round(x).long()", "return grad_output"),
        "dtype",
    ),
    wrong(
        "wrong type or shape",
        "the gradient summed",
        ste("return torch.round(x)", "return grad_output.sum()"),
        "shape",
    ),
    wrong(
        "symptom fix",
        "clips the gradient at ±10",
        ste("return torch.round(x)", "return grad_output.clamp(-10, 10)"),
        "1000 times the `grad_output`",
    ),
    right("the solution, with a clone", ste("return torch.round(x)", "return grad_output.clone()")),
    right("round as a method", ste("return x.round()", "return grad_output * 1")),
    right(
        "round with decimals=0",
        ste("return torch.round(x, decimals=0)", "return grad_output.view_as(grad_output)"),
    ),
    right("a one-tuple from backward", ste("return torch.round(x)", "return (grad_output,)")),
    right(
        "the modern form",
        """
        class RoundSTE(Function):
            @staticmethod
            def forward(x):
                return torch.round(x)

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output
        """,
    ),
    wrong(
        "wrong formula",
        "grad_output scaled by 0.9995",
        ste("return torch.round(x)", "return grad_output * 0.9995"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "rounds in float32 and casts back (issue 25 audit, item 3)",
        ste("return torch.round(x.float()).to(x.dtype)", "return grad_output"),
        "computes in float32",
    ),
    wrong(
        "right only at the example",
        "rounds in float16 and casts back",
        ste("return torch.round(x.half()).double()", "return grad_output"),
        "computes in float16",
    ),
    wrong(
        "wrong type or shape",
        "a sparse output (issue 25 audit, item 6)",
        ste("return torch.round(x).to_sparse()", "return grad_output.to_dense()"),
        "is a sparse tensor",
    ),
    wrong(
        "wrong type or shape",
        "a sparse output built from the nonzero entries",
        ste(
            "r = torch.round(x)\nreturn torch.sparse_coo_tensor(r.nonzero().T, r[r != 0], r.shape)",
            "return grad_output",
        ),
        "return a dense (strided) one",
    ),
)
