"""Chapter 04, ``04-safe-sinc``: a backward of sinc that is finite at 0 and near it."""

from __future__ import annotations

from tests.banks import bank, right, wrong

FORMULA = "(x * torch.cos(x) - torch.sin(x)) / x**2"


def safe(body: str) -> str:
    lines = "".join(f"        {line}\n" for line in body.strip().splitlines())
    return (
        "class SafeSinc(Sinc):\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        (x,) = ctx.saved_tensors\n" + lines
    )


GUARD_ZERO_ONLY = """
safe = torch.where(x == 0, torch.ones_like(x), x)
derivative = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2
return grad_output * torch.where(x == 0, torch.zeros_like(x), derivative)
"""

BANK = bank(
    "04-safe-sinc",
    wrong(
        "wrong formula",
        "the formula alone: nan at 0",
        safe(f"return grad_output * {FORMULA}"),
        "nan",
    ),
    wrong(
        "wrong formula",
        "the sign flipped",
        safe(GUARD_ZERO_ONLY.replace("grad_output * torch.where", "-grad_output * torch.where")),
        "is off",
    ),
    wrong(
        "wrong formula",
        "cos(x) / x",
        safe(
            "safe = torch.where(x == 0, torch.ones_like(x), x)\nreturn grad_output * torch.where(x == 0, 0.0, torch.cos(safe) / safe)"
        ),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forgets grad_output",
        safe(GUARD_ZERO_ONLY.replace("return grad_output * ", "return ")),
        "grad_output",
    ),
    wrong(
        "right only at the example",
        "a guard at exactly 0: nan where float32's x² underflows",
        safe(GUARD_ZERO_ONLY),
        "float32",
    ),
    wrong(
        "right only at the example",
        "x + 1e-8 before the formula: off near 0",
        safe(f"x = x + 1e-8\nreturn grad_output * {FORMULA}"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "zero below a threshold far too wide",
        safe(
            "safe = torch.where(x.abs() < 0.1, torch.ones_like(x), x)\n"
            "derivative = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2\n"
            "return grad_output * torch.where(x.abs() < 0.1, torch.zeros_like(x), derivative)"
        ),
        "is off",
    ),
    wrong(
        "symptom fix",
        "x kept positive",
        safe(f"x = x.clamp(min=1e-6)\nreturn grad_output * {FORMULA}"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "the gradient clipped",
        safe(
            "safe = torch.where(x == 0, torch.ones_like(x), x)\nd = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2\nreturn (grad_output * torch.where(x == 0, 0.0, d)).clamp(-0.1, 0.1)"
        ),
        "is off",
    ),
    wrong(
        "symptom fix",
        "nan_to_num over the formula (passed before: 0 is right at 0)",
        safe(f"return grad_output * torch.nan_to_num({FORMULA})"),
        "replaces NaN with `nan_to_num` (in its backward)",
    ),
    wrong(
        "symptom fix",
        "nan_to_num on the whole gradient (passed before)",
        safe(f"return (grad_output * {FORMULA}).nan_to_num(nan=0.0)"),
        "`nan_to_num` hides a NaN instead of removing its cause",
    ),
    wrong(
        "side effect",
        "keeps every x in a global list (passed, and left it changed, before)",
        "seen = []\n\n\n"
        + safe("seen.append(x)\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "the global list `seen` (0 items before the call, 1 after)",
    ),
    wrong(
        "side effect",
        "counts backward calls in a global dict",
        "calls = {'backward': 0}\n\n\n"
        + safe("calls['backward'] += 1\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "the global dict `calls`",
    ),
    wrong(
        "side effect",
        "nudges the saved input in place",
        safe(f"x.add_(1e-6)\nreturn grad_output * {FORMULA}"),
        "in place",
    ),
    wrong(
        "side effect",
        "anomaly mode left on",
        safe(
            "torch.autograd.set_detect_anomaly(True)\n"
            + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")
        ),
        "anomaly mode",
    ),
    wrong(
        "wrong type or shape",
        "summed",
        safe(
            "return (grad_output * torch.where(x.abs() < 1e-4, -x / 3, torch.cos(x) / torch.where(x == 0, 1.0, x) - torch.sin(x) / torch.where(x == 0, 1.0, x) ** 2)).sum()"
        ),
        "shape",
    ),
    wrong(
        "wrong type or shape",
        "float32",
        safe(
            "small = x.abs() < 1e-4\ns = torch.where(small, torch.ones_like(x), x)\nd = (s * torch.cos(s) - torch.sin(s)) / s**2\nreturn (grad_output * torch.where(small, -x / 3, d)).float()"
        ),
        "dtype",
    ),
    right(
        "two Taylor terms below 0.01",
        safe(
            "small = x.abs() < 1e-2\n"
            "safe = torch.where(small, torch.ones_like(x), x)\n"
            "formula = torch.cos(safe) / safe - torch.sin(safe) / safe**2\n"
            "return grad_output * torch.where(small, -x / 3 + x**3 / 30, formula)"
        ),
    ),
    right(
        "masked assignment of the formula into the Taylor expansion",
        safe(
            "derivative = -x / 3 + x**3 / 30\n"
            "big = x.abs() >= 0.05\n"
            "xb = x[big]\n"
            "derivative[big] = (xb * torch.cos(xb) - torch.sin(xb)) / xb**2\n"
            "return grad_output * derivative"
        ),
    ),
    right(
        "from sinc itself, (cos x - sinc x) / x, with two Taylor terms below 0.05",
        safe(
            "small = x.abs() < 0.05\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3 + x**3 / 30, "
            "(torch.cos(s) - torch.sin(s) / s) / s)"
        ),
    ),
    # --- from the fresh-eyes audit: each passed before
    wrong(
        "symptom fix",
        "torch.where on isnan of the formula",
        safe(f"d = {FORMULA}\nreturn grad_output * torch.where(d.isnan(), torch.zeros_like(d), d)"),
        "by selecting on a NaN test (`isnan`, `isfinite`) (in its backward)",
    ),
    wrong(
        "symptom fix",
        "torch.where on isfinite, 0 elsewhere",
        safe(f"d = {FORMULA}\nreturn grad_output * torch.where(torch.isfinite(d), d, 0)"),
        "`nan_to_num` hides a NaN instead of removing its cause, and so does selecting",
    ),
    wrong(
        "symptom fix",
        "masked_fill of what is not finite",
        safe(f"g = grad_output * {FORMULA}\nreturn g.masked_fill(~torch.isfinite(g), 0.0)"),
        "selecting on a NaN test",
    ),
    wrong(
        "symptom fix",
        "g[g != g] = 0",
        safe(f"g = grad_output * {FORMULA}\ng[g != g] = 0\nreturn g"),
        "selecting on a NaN test",
    ),
    wrong(
        "right only at the example",
        "a guard at exactly 0, computed in float64: nan where float64's x² underflows",
        safe(
            "xd = x.double()\n"
            "s = torch.where(xd == 0, torch.ones_like(xd), xd)\n"
            "d = (s * torch.cos(s) - torch.sin(s)) / s**2\n"
            "return (grad_output * torch.where(xd == 0, 0.0, d)).to(x.dtype)"
        ),
        "where x² underflows to 0",
    ),
    wrong(
        "side effect",
        "draws a random number in backward",
        safe("jitter = torch.rand(1) * 0\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "drew random numbers",
    ),
    wrong(
        "side effect",
        "a helper function appends to a global list",
        "log = []\n\n\ndef note(t):\n    log.append(t)\n\n\n"
        + safe("note(x)\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "the global list `log`",
    ),
    wrong(
        "side effect",
        "appends through an alias kept in a global dict",
        "seen = []\nstore = {'seen': seen}\n\n\n"
        + safe("store['seen'].append(x)\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "the global list `seen`",
    ),
    wrong(
        "bypassed mechanism",
        "autograd inside backward (passed with a note before)",
        safe(
            "with torch.enable_grad():\n"
            "    t = x.detach().requires_grad_()\n"
            "    (d,) = torch.autograd.grad(torch.sinc(t / torch.pi), t, grad_output)\n"
            "return d"
        ),
        "write the derivative",
    ),
    wrong(
        "side effect",
        "appends to a list kept inside a global dict",
        "state = {'seen': []}\n\n\n"
        + safe("state['seen'].append(x)\n" + GUARD_ZERO_ONLY.replace("x == 0", "x.abs() < 1e-4")),
        "`state['seen']`",
    ),
    # --- from the round-4 learner audit: the float32 cancellation and a check near 0 relative
    # to the gradient's size (an absolute tolerance let 0 pass there)
    wrong(
        "right only at the example",
        "Taylor's -x/3 below 1e-4 (the course's answer before: 223% off at 3e-4 in float32)",
        safe(
            "small = x.abs() < 1e-4\n"
            "safe = torch.where(small, torch.ones_like(x), x)\n"
            "derivative = (safe * torch.cos(safe) - torch.sin(safe)) / safe**2\n"
            "return grad_output * torch.where(small, -x / 3, derivative)"
        ),
        "in float32, its gradient at x = -0.0003 is 0.0003234, where the derivative is 0.0001",
    ),
    wrong(
        "right only at the example",
        "(cos x - sinc x) / x with -x/3 below 1e-4: cancels in float32 too",
        safe(
            "small = x.abs() < 1e-4\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (torch.cos(s) - torch.sin(s) / s) / s)"
        ),
        "is the difference of two nearly equal numbers and cancels",
    ),
    wrong(
        "right only at the example",
        "zero below 1e-6 (passed before: 0 is within an absolute tolerance of -x/3)",
        safe(
            "tiny = x.abs() < 1e-6\n"
            "s = torch.where(tiny, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(tiny, 0.0, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "in float64, its gradient at x = 1e-08 is 0, where the derivative is -3.333e-09 (100% off",
    ),
    wrong(
        "right only at the example",
        "zeros, the formula assigned where |x| >= 1e-5",
        safe(
            "derivative = torch.zeros_like(x)\n"
            "big = x.abs() >= 1e-5\n"
            "xb = x[big]\n"
            "derivative[big] = (xb * torch.cos(xb) - torch.sin(xb)) / xb**2\n"
            "return grad_output * derivative"
        ),
        "compared with its own size",
    ),
    wrong(
        "symptom fix",
        "an epsilon in the denominator, no guard (audit: passed)",
        safe("return grad_output * (x * torch.cos(x) - torch.sin(x)) / (x**2 + 1e-30)"),
        "An epsilon in the denominator, or a guard at 0 or at `finfo.eps`, does not reach",
    ),
    wrong(
        "symptom fix",
        "the denominator clamped at finfo.tiny",
        safe(
            "return grad_output * (x * torch.cos(x) - torch.sin(x)) "
            "/ (x**2).clamp(min=torch.finfo(x.dtype).tiny)"
        ),
        "where the derivative is -3.333e-09 (100% off",
    ),
    wrong(
        "right only at the example",
        "-x/3 below finfo(dtype).eps (audit: passed; the formula cancels above it)",
        safe(
            "small = x.abs() < torch.finfo(x.dtype).eps\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "in float64, its gradient at x = 1e-08 is 0",
    ),
    wrong(
        "right only at the example",
        "-x/3 below the square root of finfo.tiny",
        safe(
            "small = x.abs() < torch.finfo(x.dtype).tiny ** 0.5\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "100% off",
    ),
    wrong(
        "right only at the example",
        "-x/3 for |x| <= 1e-3 (audit: passed; 4% off at 2e-3 in float32)",
        safe(
            "small = x.abs() <= 1e-3\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "in float32, its gradient at x = -0.002 is 0.0006403, where the derivative is 0.0006667",
    ),
    wrong(
        "right only at the example",
        "two Taylor terms, but only below 1e-3",
        safe(
            "small = x.abs() < 1e-3\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3 + x**3 / 30, "
            "(s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "in float32, its gradient at x = 0.001 is -0.0003492",
    ),
    wrong(
        "wrong formula",
        "-x/3 alone below 0.05: one Taylor term, off by x²/10",
        safe(
            "small = x.abs() < 0.05\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "the Taylor expansion's first term alone",
    ),
    wrong(
        "wrong formula",
        "-x/3 alone below 0.01",
        safe(
            "small = x.abs() < 0.01\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, torch.cos(s) / s - torch.sin(s) / s**2)"
        ),
        "Add the next term",
    ),
    wrong(
        "right only at the example",
        "torch.isclose to 0 with atol=1e-4 (audit: was blamed as a NaN test)",
        safe(
            "small = torch.isclose(x, torch.zeros_like(x), atol=1e-4, rtol=0)\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s*torch.cos(s) - torch.sin(s)) / s**2)"
        ),
        "223% off",
    ),
    right(
        "torch.isclose to 0 with atol=0.05 (not a NaN test), two Taylor terms",
        safe(
            "small = torch.isclose(x, torch.zeros_like(x), atol=0.05, rtol=0)\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3 + x**3 / 30, "
            "(s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
    ),
    right(
        "Tensor.isclose with the default rtol and a single where (fine in a backward)",
        safe(
            "small = x.isclose(torch.zeros_like(x), atol=0.05)\n"
            "return grad_output * torch.where(small, -x / 3 + x**3 / 30, "
            "(x * torch.cos(x) - torch.sin(x)) / x**2)"
        ),
    ),
    right(
        "-x/3 below cbrt(finfo(dtype).eps): a threshold for each dtype",
        safe(
            "small = x.abs() < torch.finfo(x.dtype).eps ** (1 / 3)\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "return grad_output * torch.where(small, -x / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
    ),
    right(
        "computed in float64 inside, -x/3 below 1e-4, cast back",
        safe(
            "xd = x.double()\n"
            "small = xd.abs() < 1e-4\n"
            "s = torch.where(small, 1.0, xd)\n"
            "d = torch.where(small, -xd / 3, (s * torch.cos(s) - torch.sin(s)) / s**2)\n"
            "return grad_output * d.to(x.dtype)"
        ),
    ),
    right(
        "the series to x^5 below 0.1",
        safe(
            "small = x.abs() < 0.1\n"
            "s = torch.where(small, torch.ones_like(x), x)\n"
            "x2 = x * x\n"
            "series = -x / 3 + x * x2 / 30 - x * x2 * x2 / 840\n"
            "return grad_output * torch.where(small, series, (s * torch.cos(s) - torch.sin(s)) / s**2)"
        ),
    ),
    right(
        "the parent's backward, replaced near 0 by a threshold (not a NaN test)",
        safe(
            "g = Sinc.backward(ctx, grad_output)\n"
            "return torch.where(x.abs() < 0.05, grad_output * (-x / 3 + x**3 / 30), g)"
        ),
    ),
    wrong(
        "right only at the example",
        "the parent's backward, replaced by -x/3 below 1e-4 (audit)",
        safe(
            "g = Sinc.backward(ctx, grad_output)\n"
            "return torch.where(x.abs() < 1e-4, -grad_output * x / 3, g)"
        ),
        "in float32, its gradient at x = -0.0003",
    ),
)
