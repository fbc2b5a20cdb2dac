"""Chapter 00, ``00-cube``: complete Cube's backward (the warm-up exercise)."""

from __future__ import annotations

from tests.banks import bank, right, wrong

HEAD = """
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
"""


def answer(body: str) -> str:
    """The exercise cell with ``body`` (indented for backward) after the given lines."""
    return HEAD + "".join(f"        {line}\n" for line in body.strip().splitlines())


BANK = bank(
    "00-cube",
    wrong("wrong formula", "forgets the chain rule", answer("return 3 * x**2"), "grad_output"),
    wrong("wrong formula", "derivative 3x", answer("return grad_output * 3 * x"), "is off"),
    wrong("wrong formula", "x squared only", answer("return grad_output * x**2"), "is off"),
    wrong("wrong formula", "the power rule twice", answer("return grad_output * 6 * x"), "is off"),
    wrong("wrong formula", "the forward again", answer("return grad_output * x**3"), "is off"),
    wrong(
        "right only at the example",
        "x**3 / x: NaN at 0",
        answer("return grad_output * 3 * x**3 / x"),
        "nan",
    ),
    wrong(
        "right only at the example",
        "a cut-off beyond the example's range",
        answer("return torch.where(x.abs() < 2.5, grad_output * 3 * x**2, 0.0)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "clips the gradient",
        answer("return (grad_output * 3 * x**2).clamp(-5, 5)"),
        "is off",
    ),
    wrong(
        "side effect",
        "changes grad_output in place",
        answer("return grad_output.mul_(3 * x**2)"),
        "changed `grad_output` in place",
    ),
    wrong(
        "side effect",
        "sets the default dtype to float64 for good",
        answer("torch.set_default_dtype(torch.float64)\nreturn grad_output * 3 * x**2"),
        "default dtype",
    ),
    wrong(
        "side effect",
        "switches anomaly mode on for good",
        answer("torch.autograd.set_detect_anomaly(True)\nreturn grad_output * 3 * x**2"),
        "anomaly mode",
    ),
    wrong(
        "side effect",
        "writes into the saved input",
        answer("x.pow_(2).mul_(3)\nreturn grad_output * x"),
        "in place",
    ),
    wrong(
        "right only at the example",
        "a clamp that holds up to 200",
        answer("return grad_output * 3 * x.clamp(-200, 200) ** 2"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "a small constant added to keep the gradient from vanishing",
        answer("return grad_output * 3 * x**2 + 1e-9"),
        "for a zero `grad_output`",
    ),
    wrong(
        "side effect",
        "keeps every saved input in a global list",
        "seen = []\n" + answer("seen.append(x)\nreturn grad_output * 3 * x**2"),
        "the global list `seen`",
    ),
    wrong(
        "side effect",
        "sets the input's .grad itself",
        answer("x.grad = grad_output * 3 * x**2\nreturn x.grad"),
        "`.grad`",
    ),
    wrong(
        "side effect",
        "reseeds the random number generator",
        answer("torch.manual_seed(0)\nreturn grad_output * 3 * x**2"),
        "reseeds",
    ),
    wrong(
        "side effect",
        "counts its calls in a notebook tensor",
        "calls = torch.zeros(())\n" + answer("calls.add_(1)\nreturn grad_output * 3 * x**2"),
        "the notebook's tensor `calls`",
    ),
    wrong(
        "wrong type or shape",
        "a list",
        answer("return [grad_output * 3 * x**2]"),
        "list",
    ),
    wrong(
        "wrong type or shape",
        "summed to a scalar",
        answer("return (grad_output * 3 * x**2).sum()"),
        "shape",
    ),
    wrong(
        "wrong type or shape",
        "float32 gradient",
        answer("return (grad_output * 3 * x**2).float()"),
        "dtype",
    ),
    wrong(
        "wrong type or shape",
        "a NumPy array",
        answer("return (grad_output * 3 * x**2).numpy()"),
        "numpy",
    ),
    wrong(
        "side effect",
        "counts its calls in a defaultdict",
        "from collections import defaultdict\n\ncounts = defaultdict(int)\n"
        + answer("counts['backward'] += 1\nreturn grad_output * 3 * x**2"),
        "changed the global dict `counts`",
    ),
    wrong(
        "symptom fix",
        "1e-10 added inside the derivative",
        answer("return grad_output * (3 * x**2 + 1e-10)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "a floor of 1e-10 on the derivative",
        answer("return grad_output * (3 * x**2).clamp(min=1e-10)"),
        "is off",
    ),
    wrong(
        "side effect",
        "reseeds NumPy",
        "import numpy as np\n" + answer("np.random.seed(0)\nreturn grad_output * 3 * x**2"),
        "reseeds NumPy's global random number generator",
    ),
    wrong(
        "side effect",
        "reseeds Python's random",
        "import random\n" + answer("random.seed(0)\nreturn grad_output * 3 * x**2"),
        "reseeds Python's global random number generator",
    ),
    wrong(
        "side effect",
        "puts back a saved random state",
        "STATE0 = torch.get_rng_state()\n"
        + answer("torch.set_rng_state(STATE0)\nreturn grad_output * 3 * x**2"),
        "`torch.set_rng_state`",
    ),
    wrong(
        "side effect",
        "sets torch's print options",
        answer("torch.set_printoptions(precision=2)\nreturn grad_output * 3 * x**2"),
        "print options",
    ),
    wrong(
        "side effect",
        "flushes denormals",
        answer("torch.set_flush_denormal(True)\nreturn grad_output * 3 * x**2"),
        "denormal",
    ),
    wrong(
        "side effect",
        "silences every warning",
        "import warnings\n"
        + answer("warnings.simplefilter('ignore')\nreturn grad_output * 3 * x**2"),
        "warnings filters",
    ),
    wrong(
        "side effect",
        "lowers the float32 matmul precision",
        answer("torch.set_float32_matmul_precision('medium')\nreturn grad_output * 3 * x**2"),
        "matmul precision",
    ),
    wrong(
        "side effect",
        "counts calls on a class of the notebook",
        "class Stats:\n    calls = 0\n\n\n"
        + answer("Stats.calls += 1\nreturn grad_output * 3 * x**2"),
        "`Stats.calls`",
    ),
    wrong(
        "side effect",
        "keeps x on a plain object",
        "from types import SimpleNamespace\n\nbox = SimpleNamespace()\n"
        + answer("box.last = x\nreturn grad_output * 3 * x**2"),
        "`box.last`",
    ),
    wrong(
        "side effect",
        "appends to a deque",
        "from collections import deque\n\nrecent = deque(maxlen=3)\n"
        + answer("recent.append(x)\nreturn grad_output * 3 * x**2"),
        "the global deque `recent`",
    ),
    wrong(
        "side effect",
        "appends to a list inside a global dict",
        "memo = {'xs': []}\n" + answer("memo['xs'].append(x)\nreturn grad_output * 3 * x**2"),
        "memo['xs']",
    ),
    wrong(
        "side effect",
        "keeps x in a default argument",
        HEAD.replace("grad_output):", "grad_output, _cache=[]):")
        + "        _cache.append(x)\n        return grad_output * 3 * x**2\n",
        "the default list `_cache` of backward",
    ),
    wrong(
        "side effect",
        "sets an attribute on torch",
        answer("torch._last_x = x\nreturn grad_output * 3 * x**2"),
        "`torch._last_x`",
    ),
    wrong(
        "side effect",
        "a helper keeps x",
        "seen2 = []\n\n\ndef remember(t):\n    seen2.append(t)\n\n\n"
        + answer("remember(x)\nreturn grad_output * 3 * x**2"),
        "the global list `seen2`",
    ),
    wrong(
        "side effect",
        "writes into a global NumPy array",
        "import numpy as np\n\nbuf = np.zeros(3)\n"
        + answer("buf[0] = float(x.sum())\nreturn grad_output * 3 * x**2"),
        "the global NumPy array `buf`",
    ),
    right("the solution's factors reordered", answer("return 3 * x * x * grad_output")),
    right("with torch.pow", answer("return grad_output.mul(torch.pow(x, 2)).mul(3)")),
    right(
        "x*x*3 on separate lines",
        answer("square = x * x\nreturn grad_output * (square + square + square)"),
    ),
    right("a one-tuple", answer("return (grad_output * 3 * x**2,)")),
    right(
        "x**3 / x with its NaN hidden (passes, with a note)",
        answer("return torch.nan_to_num(grad_output * 3 * x**3 / x)"),
        "nan_to_num",
    ),
    right(
        "x**3 / x with its NaN replaced by torch.where (passes, with a note)",
        answer(
            "d = grad_output * 3 * x**3 / x\n"
            "return torch.where(torch.isnan(d), torch.zeros_like(d), d)"
        ),
        "isnan",
    ),
    right(
        "autograd on a copy (passes, with a note)",
        answer(
            "with torch.enable_grad():\n"
            "    leaf = x.detach().requires_grad_()\n"
            "    (grad,) = torch.autograd.grad(leaf**3, leaf, grad_output)\n"
            "return grad"
        ),
        "runs autograd itself",
    ),
    right(
        "float64 spelled out",
        answer("return (grad_output.double() * 3 * x.double() ** 2).to(x.dtype)"),
    ),
    wrong(
        "wrong formula",
        "2.999 for 3: off by a thirtieth of a percent",
        answer("return grad_output * 2.999 * x**2"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "scaled by 1.0009",
        answer("return grad_output * 3 * x**2 * 1.0009"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "5e-4 too large beyond 100",
        answer("return grad_output * 3 * x**2 * torch.where(x.abs() > 100, 1.0005, 1.0)"),
        "is off",
    ),
    right(
        "draws in a fork_rng block after reseeding there",
        answer(
            "with torch.random.fork_rng():\n"
            "    torch.manual_seed(0)\n"
            "    _ = torch.rand(1)\n"
            "return grad_output * 3 * x**2"
        ),
    ),
    right(
        "reseeds and sets the saved state back",
        answer(
            "s = torch.get_rng_state()\n"
            "torch.manual_seed(0)\n"
            "_ = torch.rand(1)\n"
            "torch.set_rng_state(s)\n"
            "return grad_output * 3 * x**2"
        ),
    ),
    right(
        "zero chosen at x == 0 by torch.where (no note)",
        answer("return torch.where(x == 0, torch.zeros_like(x), grad_output * 3 * x**2)"),
    ),
    right(
        "zero filled at x == 0 by masked_fill",
        answer("g = grad_output * 3 * x**2\nreturn g.masked_fill(x == 0, 0.0)"),
    ),
    right("a sparse gradient", answer("return (grad_output * 3 * x**2).to_sparse()")),
    wrong(
        "side effect",
        "sets the default device for good",
        answer("torch.set_default_device('cpu')\nreturn grad_output * 3 * x**2"),
        "default device",
    ),
    wrong(
        "side effect",
        "raises the recursion limit",
        "import sys\n" + answer("sys.setrecursionlimit(5000)\nreturn grad_output * 3 * x**2"),
        "recursion limit",
    ),
    wrong(
        "side effect",
        "silences NumPy's warnings for good",
        "import numpy as np\n" + answer("np.seterr(all='ignore')\nreturn grad_output * 3 * x**2"),
        "np.seterr",
    ),
    wrong(
        "side effect",
        "counts calls on a nested class",
        "class Outer:\n    class Inner:\n        calls = 0\n\n\n"
        + answer("Outer.Inner.calls += 1\nreturn grad_output * 3 * x**2"),
        "`Outer.Inner.calls`",
    ),
    wrong(
        "side effect",
        "keeps x on torch.Tensor",
        answer("torch.Tensor._last = x\nreturn grad_output * 3 * x**2"),
        "`torch.Tensor._last`",
    ),
    wrong(
        "side effect",
        "appends through a bound-method alias",
        "cache = []\npush = cache.append\n" + answer("push(x)\nreturn grad_output * 3 * x**2"),
        "the list behind `push`",
    ),
    right(
        "the derivative by torch.func.vmap(torch.func.grad(...)) (issue 25: torch's own import)",
        answer(
            "d = torch.func.vmap(torch.func.grad(lambda t: t**3))(x.reshape(-1))\n"
            "return grad_output * d.reshape(x.shape)"
        ),
        "runs autograd itself",
    ),
    wrong(
        "wrong type or shape",
        "a float64 gradient, cast for a float32 input by autograd (issue 25)",
        answer("return (grad_output * 3 * x**2).double()"),
        "float64 gradient",
    ),
    wrong(
        "wrong formula",
        "off in the 7th digit: the digits that differ are printed (issue 25)",
        answer("return grad_output * 3 * x**2 * (1 + 1e-6)"),
        "yours 9.38950, the reference's gradient 9.38949",
    ),
    wrong(
        "symptom fix",
        "computed in float32 and cast back (issue 25)",
        answer("return (grad_output.float() * 3 * x.float() ** 2).to(x.dtype)"),
        "computes in float32",
    ),
    wrong(
        "side effect",
        "reseeds NumPy through an imported seed",
        "from numpy.random import seed\n" + answer("seed(0)\nreturn grad_output * 3 * x**2"),
        "NumPy's global random number generator",
    ),
    wrong(
        "side effect",
        "adds x.grad when there is one (issue 25 audit, item 1)",
        answer("g = grad_output * 3 * x**2\nif x.grad is not None:\n    g = g + x.grad\nreturn g"),
        "read `.grad` of its input `x`",
    ),
    wrong(
        "side effect",
        "adds x.grad, zero when empty",
        answer("return grad_output * 3 * x**2 + (0 if x.grad is None else x.grad)"),
        "autograd adds gradients into `.grad` itself",
    ),
    wrong(
        "wrong type or shape",
        "the derivative alone rounded to float32: linear in grad_output (audit, round B)",
        answer("return grad_output * (3 * x**2).float()"),
        "computes in float32",
    ),
    wrong(
        "wrong type or shape",
        "the derivative from Python floats: torch.tensor makes float32 by default",
        answer(
            "d = torch.tensor([3 * v * v for v in x.reshape(-1).tolist()])\n"
            "return grad_output * d.reshape(x.shape)"
        ),
        "a tensor made without `dtype=`",
    ),
    wrong(
        "wrong type or shape",
        "grad_output rounded to float32: float32 leads (issue 25 audit, item 11)",
        answer("return grad_output.float() * 3 * x**2"),
        "your code computes in float32",
    ),
    wrong(
        "wrong type or shape",
        "grad_output converted with .to(torch.float32)",
        answer("g = grad_output.to(torch.float32)\nreturn g * 3 * x**2"),
        "your code computes in float32: for 1000 times the `grad_output`",
    ),
    wrong(
        "symptom fix",
        "x squared in float16 (issue 25 audit, item 10)",
        answer("return grad_output * 3 * (x.half() ** 2).double()"),
        "computes in float16 (`.half()`",
    ),
    wrong(
        "symptom fix",
        "computes in bfloat16 and casts back",
        answer("return (grad_output.bfloat16() * 3 * x.bfloat16() ** 2).to(x.dtype)"),
        "computes in bfloat16 (`.bfloat16()`",
    ),
    wrong(
        "side effect",
        "a running sum on ctx (issue 25 audit, item 8)",
        answer("ctx.acc = getattr(ctx, 'acc', 0) + grad_output * 3 * x**2\nreturn ctx.acc"),
        "it keeps `ctx.acc` from its first pass",
    ),
    wrong(
        "side effect",
        "a pass counter on ctx that scales the gradient",
        answer(
            "ctx.passes = getattr(ctx, 'passes', 0) + 1\nreturn grad_output * 3 * x**2 * ctx.passes"
        ),
        "it keeps `ctx.passes` from its first pass",
    ),
    wrong(
        "bypassed mechanism",
        "central differences of the forward (issue 25 audit, item 12)",
        answer("h = 1e-6\nreturn grad_output * ((x + h)**3 - (x - h)**3) / (2 * h)"),
        "approximates the derivative with finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "central differences with a coarser step",
        answer(
            "f = lambda t: t**3\nh = 1e-3\nreturn grad_output * (f(x + h) - f(x - h)) / (2 * h)"
        ),
        "with h = 0.001",
    ),
    right(
        "torch.func.jvp: forward mode, noted (issue 25 audit, lesser)",
        answer("return torch.func.jvp(lambda t: t**3, (x,), (grad_output,))[1]"),
        "runs autograd itself (`torch.func.jvp`)",
    ),
    right(
        "torch.func.linearize: forward mode, noted",
        answer("_, jvp_fn = torch.func.linearize(lambda t: t**3, x)\nreturn jvp_fn(grad_output)"),
        "runs autograd itself (`torch.func.linearize`)",
    ),
)
