"""Chapter 04, ``04-safe-mean-radius``: the mean distance from the origin, without a NaN.

The task: the same value (up to a rounding error), a finite gradient everywhere, and the
original gradient wherever that one is finite, also near the origin (an epsilon under the
root, a clamp or a threshold changes it there).
"""

from __future__ import annotations

from tests.banks import bank, right, wrong


def radius(body: str, *, before: str = "") -> str:
    """The exercise cell: ``safe_mean_radius`` with ``body`` (and lines before it)."""
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    head = before.strip() + "\n\n\n" if before else ""
    return f"{head}def safe_mean_radius(points):\n{lines}"


SQUARED = "squared = (points**2).sum(dim=1)\n"

BANK = bank(
    "04-safe-mean-radius",
    # --- wrong formula
    wrong(
        "wrong formula",
        "the original, unchanged",
        radius("return torch.sqrt((points**2).sum(dim=1)).mean()"),
        "still contains NaN",
    ),
    wrong(
        "wrong formula",
        "sum instead of mean",
        radius("return torch.linalg.vector_norm(points, dim=1).sum()"),
        "its value is",
    ),
    wrong(
        "wrong formula",
        "the norm over the wrong dimension",
        radius("return torch.linalg.vector_norm(points, dim=0).mean()"),
        "its value is",
    ),
    wrong(
        "wrong formula",
        "the squared length, no root",
        radius("return (points**2).sum(dim=1).mean()"),
        "its value is",
    ),
    wrong(
        "wrong formula",
        "the length of the whole batch",
        radius("return torch.linalg.vector_norm(points) / len(points)"),
        "its value is",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "an epsilon under the root (the old hint)",
        radius("return torch.sqrt((points**2).sum(dim=1) + 1e-12).mean()"),
        "An epsilon",
    ),
    wrong(
        "right only at the example",
        "a clamp under the root",
        radius("return torch.sqrt((points**2).sum(dim=1).clamp(min=1e-12)).mean()"),
        "near the singular point",
    ),
    wrong(
        "right only at the example",
        "the points shifted off the origin",
        radius("return torch.sqrt(((points + 1e-6) ** 2).sum(1)).mean()"),
        "near the singular point",
    ),
    wrong(
        "right only at the example",
        "a threshold that changes values near 0",
        radius(
            SQUARED + "big = squared > 1e-6\n"
            "safe = torch.where(big, squared, torch.ones_like(squared))\n"
            "return torch.where(big, torch.sqrt(safe), torch.zeros_like(squared)).mean()"
        ),
        "near the singular point",
    ),
    wrong(
        "right only at the example",
        "a tiny epsilon: wrong at 1e-20 in float32 (and in float64)",
        radius("return torch.sqrt((points**2).sum(dim=1) + 1e-30).mean()"),
        "at [[1e-20, 0]",
    ),
    wrong(
        "right only at the example",
        "masks each zero coordinate",
        radius(
            "safe = torch.where(points == 0, torch.ones_like(points), points)\n"
            + SQUARED
            + "return torch.where(squared > 0, torch.sqrt((safe**2).sum(dim=1)), "
            "torch.zeros_like(squared)).mean()"
        ),
        "treat too much as the singular point",
    ),
    wrong(
        "right only at the example",
        "hard-codes the example's three points",
        radius("return torch.linalg.vector_norm(points, dim=1).sum() / 3"),
        "its value is",
    ),
    wrong(
        "right only at the example",
        "skips the first point, the one at the origin in the example",
        radius("return torch.sqrt((points[1:] ** 2).sum(dim=1)).sum() / len(points)"),
        "its value is",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "nan_to_num on the loss",
        radius("return torch.nan_to_num(torch.sqrt((points**2).sum(dim=1)).mean())"),
        "replaces NaN with `nan_to_num` (in its forward)",
    ),
    wrong(
        "symptom fix",
        "one torch.where, the trap",
        radius(
            SQUARED + "return torch.where(squared > 0, torch.sqrt(squared), "
            "torch.zeros_like(squared)).mean()"
        ),
        "still contains NaN",
    ),
    wrong(
        "symptom fix",
        "a nan_to_num hook on the caller's points",
        radius(
            "points.register_hook(torch.nan_to_num)\n"
            "return torch.sqrt((points**2).sum(dim=1)).mean()"
        ),
        "replaces NaN with `nan_to_num` (in a gradient hook)",
    ),
    wrong(
        "symptom fix",
        "a hook that cleans the gradient of the squared length",
        radius(
            SQUARED + "squared.register_hook(lambda g: torch.nan_to_num(g))\n"
            "return torch.sqrt(squared).mean()"
        ),
        "`nan_to_num` hides a NaN instead of removing its cause",
    ),
    wrong(
        "symptom fix",
        "nan_to_num on each radius, in place",
        radius("radii = torch.sqrt((points**2).sum(dim=1))\nreturn radii.nan_to_num_(0.0).mean()"),
        "replaces NaN with `nan_to_num`",
    ),
    # --- side effect
    wrong(
        "side effect",
        "keeps every batch in a global list (passed silently before)",
        radius(
            "seen.append(points)\nreturn torch.linalg.vector_norm(points, dim=1).mean()",
            before="seen = []",
        ),
        "the global list `seen` (0 items before the call, 1 after)",
    ),
    wrong(
        "side effect",
        "caches the last radius in a global dict (passed silently before)",
        radius(
            "radius = torch.linalg.vector_norm(points, dim=1).mean()\n"
            "cache['last'] = radius\nreturn radius",
            before="cache = {}",
        ),
        "the global dict `cache`",
    ),
    wrong(
        "side effect",
        "switches anomaly mode on for good",
        radius(
            "torch.autograd.set_detect_anomaly(True)\n"
            "return torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "anomaly mode",
    ),
    wrong(
        "side effect",
        "sets the default dtype to float64",
        radius(
            "torch.set_default_dtype(torch.float64)\n"
            "return torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "default dtype",
    ),
    wrong(
        "side effect",
        "nudges zeros in place",
        radius(
            "with torch.no_grad():\n"
            "    points[points == 0] = 1e-12\n"
            "return torch.sqrt((points**2).sum(dim=1)).mean()"
        ),
        "in place",
    ),
    wrong(
        "side effect",
        "keeps the last points in a global",
        radius(
            "global last_points\n"
            "last_points = points\n"
            "return torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "global variable `last_points`",
    ),
    wrong(
        "side effect",
        "moves the notebook's own at_origin off the origin",
        radius("at_origin.add_(1e-3)\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "at_origin",
    ),
    wrong(
        "right only at the example",
        "a clamp at finfo.tiny: exact only where the square is normal (passed before)",
        radius(
            SQUARED + "return torch.sqrt(squared.clamp(min=torch.finfo(squared.dtype).tiny)).mean()"
        ),
        "[[1e-20, 0]",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "detaches the result",
        radius("return torch.sqrt((points**2).sum(dim=1)).detach().mean()"),
        "does not require grad",
    ),
    wrong(
        "bypassed mechanism",
        "computes the gradient itself inside the loss",
        radius(
            "value = torch.linalg.vector_norm(points, dim=1).mean()\n"
            "value.backward(retain_graph=True)\n"
            "return value"
        ),
        "backward",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "no mean: one radius per point",
        radius("return torch.linalg.vector_norm(points, dim=1)"),
        "shape (3,)",
    ),
    wrong(
        "wrong type or shape",
        "a Python float",
        radius("return torch.linalg.vector_norm(points, dim=1).mean().item()"),
        "Python float",
    ),
    wrong(
        "wrong type or shape",
        "a NumPy number",
        radius(
            "import numpy as np\n\nreturn np.linalg.norm(points.detach().numpy(), axis=1).mean()"
        ),
        "not a tensor",
    ),
    wrong(
        "wrong type or shape",
        "computed in half precision",
        radius("return torch.linalg.vector_norm(points.half(), dim=1).mean()"),
        "float16",
    ),
    wrong(
        "wrong type or shape",
        "a list of radii",
        radius("return [torch.linalg.vector_norm(p) for p in points]"),
        "list",
    ),
    # --- right, written differently from the solution
    right("Tensor.norm", radius("return points.norm(dim=1).mean()")),
    right(
        "computed in float64 (crashed the checker before)",
        radius("return torch.linalg.vector_norm(points.double(), dim=1).mean()"),
    ),
    right(
        "the double where",
        radius(
            SQUARED + "origin = squared == 0\n"
            "safe = torch.where(origin, torch.ones_like(squared), squared)\n"
            "return torch.where(origin, torch.zeros_like(squared), torch.sqrt(safe)).mean()"
        ),
    ),
    right(
        "the double where, with Tensor.where",
        radius(
            "r2 = (points * points).sum(-1)\n"
            "return torch.where(r2 == 0, 0.0, r2.where(r2 != 0, 1.0).sqrt()).mean()"
        ),
    ),
    right(
        "the origin found by its coordinates",
        radius(
            "nonzero = (points != 0).any(dim=1)\n"
            "safe = torch.where(nonzero[:, None], points, torch.ones_like(points))\n"
            "radii = torch.sqrt((safe**2).sum(dim=1))\n"
            "return torch.where(nonzero, radii, torch.zeros_like(radii)).mean()"
        ),
    ),
    right("torch.linalg.norm", radius("return torch.linalg.norm(points, dim=-1).mean()")),
    right(
        "a custom Function with a safe backward (passes with a note)",
        radius(
            "return Radius.apply(points).mean()",
            before="""
class Radius(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points):
        r = torch.sqrt((points**2).sum(dim=1))
        ctx.save_for_backward(points, r)
        return r

    @staticmethod
    def backward(ctx, grad_output):
        points, r = ctx.saved_tensors
        safe = torch.where(r == 0, torch.ones_like(r), r)[:, None]
        direction = torch.where(r[:, None] == 0, 0.0, points / safe)
        return grad_output[:, None] * direction
""",
        ),
        "custom Function",
    ),
    right(
        "the mean spelled as a sum over the count",
        radius("return torch.linalg.vector_norm(points, dim=1).sum() / points.shape[0]"),
    ),
    # --- from the fresh-eyes audit: each passed before
    wrong(
        "symptom fix",
        "a custom Function whose backward keeps only the finite entries",
        radius(
            "return Radius.apply(points).mean()",
            before=(
                "class Radius(torch.autograd.Function):\n"
                "    @staticmethod\n"
                "    def forward(ctx, p):\n"
                "        r = torch.sqrt((p**2).sum(dim=1))\n"
                "        ctx.save_for_backward(p, r)\n"
                "        return r\n\n"
                "    @staticmethod\n"
                "    def backward(ctx, g):\n"
                "        p, r = ctx.saved_tensors\n"
                "        d = p / r[:, None]\n"
                "        return g[:, None] * torch.where(torch.isfinite(d), d, 0)"
            ),
        ),
        "by selecting on a NaN test (`isnan`, `isfinite`) (in its backward)",
    ),
    wrong(
        "side effect",
        "draws a random number it does not use",
        radius("noise = torch.randn(1)\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "drew random numbers",
    ),
    wrong(
        "side effect",
        "reseeds torch's generator",
        radius("torch.manual_seed(0)\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "reseeded torch's random generator",
    ),
    wrong(
        "side effect",
        "sets the thread count the notebook already has",
        radius("torch.set_num_threads(1)\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "`torch.set_num_threads`",
    ),
    wrong(
        "side effect",
        "switches flush-denormal on",
        radius(
            "torch.set_flush_denormal(True)\nreturn torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "set_flush_denormal",
    ),
    wrong(
        "side effect",
        "a helper function appends to a global list",
        radius(
            "remember(points)\nreturn torch.linalg.vector_norm(points, dim=1).mean()",
            before="batches = []\n\n\ndef remember(p):\n    batches.append(p)",
        ),
        "the global list `batches`",
    ),
    wrong(
        "wrong type or shape",
        "one number of shape (1,)",
        radius("return torch.linalg.vector_norm(points, dim=1).mean().reshape(1)"),
        "0-dim tensor, shape ()",
    ),
    wrong(
        "side effect",
        "a mutable default argument keeps every batch",
        "def safe_mean_radius(points, _seen=[]):\n"
        "    _seen.append(points)\n"
        "    return torch.linalg.vector_norm(points, dim=1).mean()\n",
        "the default list `_seen` of safe_mean_radius",
    ),
    # --- from issue 25: each was blamed on an epsilon, with vector_norm as the fix
    wrong(
        "wrong type or shape",
        "vector_norm of the points in float32",
        radius("return torch.linalg.vector_norm(points.float(), dim=1).mean()"),
        "computes in float32 for float64 input",
    ),
    wrong(
        "wrong type or shape",
        "vector_norm in float32, the loss converted back",
        radius("return torch.linalg.vector_norm(points.float(), dim=1).mean().to(points.dtype)"),
        "computes in float32 for float64 input",
    ),
    # --- from the round-4 learner audit (each passed, or was told the wrong cause, before)
    wrong(
        "right only at the example",
        "torch.isclose to the origin (atol 1e-8) in a double where: was blamed as a NaN test",
        radius(
            "near = torch.isclose(points, torch.zeros_like(points)).all(dim=1)\n"
            "safe = torch.where(near[:, None], torch.ones_like(points), points)\n"
            "r = torch.sqrt((safe**2).sum(dim=1))\n"
            "return torch.where(near, 0.0, r).mean()"
        ),
        "near the singular point, at [[-1e-08, 1e-08]",
    ),
    wrong(
        "right only at the example",
        "Tensor.isclose of the squared length to 0",
        radius(
            SQUARED + "origin = squared.isclose(torch.zeros_like(squared))\n"
            "safe = torch.where(origin, 1.0, squared)\n"
            "return torch.where(origin, 0.0, safe.sqrt()).mean()"
        ),
        "a threshold changes the loss wherever the input is small but not zero",
    ),
    wrong(
        "right only at the example",
        "the origin rows moved to (1e-8, 1e-8)",
        radius(
            "p = torch.where((points == 0).all(dim=1, keepdim=True), "
            "torch.full_like(points, 1e-8), points)\n"
            "return torch.sqrt((p**2).sum(dim=1)).mean()"
        ),
        "at the singular point alone, at [[0, 0]] its value is 1.414e-08, the original loss's 0",
    ),
    wrong(
        "right only at the example",
        "the origin rows moved to (1e-6, 1e-6)",
        radius(
            "p = torch.where((points == 0).all(dim=1, keepdim=True), "
            "torch.full_like(points, 1e-6), points)\n"
            "return torch.sqrt((p**2).sum(dim=1)).mean()"
        ),
        "its value is 1.414e-06, the original loss's 0",
    ),
    wrong(
        "right only at the example",
        "the origin rows shifted by a mask times 1e-8",
        radius(
            "at_zero = (points == 0).all(dim=1, keepdim=True)\n"
            "return torch.linalg.vector_norm(points + 1e-8 * at_zero, dim=1).mean()"
        ),
        "Moving the point off it",
    ),
    wrong(
        "right only at the example",
        "the value times (1 + 1e-5) (passed before: the tolerance was 1e-5 in float64 too)",
        radius("return torch.linalg.vector_norm(points, dim=1).mean() * (1 + 1e-5)"),
        "its value is 2.13809, the original loss's 2.13807",
    ),
    wrong(
        "right only at the example",
        "the value times (1 + 1e-7): inside float32's rounding, not float64's",
        radius("return torch.linalg.vector_norm(points, dim=1).mean() * (1 + 1e-7)"),
        "in float64",
    ),
    wrong(
        "right only at the example",
        "two coordinates assumed: torch.hypot in a double where",
        radius(
            "a, b = points[:, 0], points[:, 1]\n"
            "z = (a == 0) & (b == 0)\n"
            "return torch.where(z, 0.0, torch.hypot(torch.where(z, 1.0, a), b)).mean()"
        ),
        "with 3 coordinates, at [[0, 0, 0], [3, 4, 4], [1, -1, 6]] its value is 2.138",
    ),
    wrong(
        "right only at the example",
        "two coordinates assumed: x² + y² written out",
        radius(
            "squared = points[:, 0] ** 2 + points[:, 1] ** 2\n"
            "origin = squared == 0\n"
            "safe = torch.where(origin, 1.0, squared)\n"
            "return torch.where(origin, 0.0, safe.sqrt()).mean()"
        ),
        "does your function assume two",
    ),
    wrong(
        "symptom fix",
        "radii[squared == 0] = 0 after the root: sqrt's saved output changed in place",
        radius(
            SQUARED + "radii = torch.sqrt(squared)\nradii[squared == 0] = 0\nreturn radii.mean()"
        ),
        "the output of `Sqrt` was saved for backward, then changed",
    ),
    wrong(
        "symptom fix",
        "masked_fill_ on the radii",
        radius(
            SQUARED + "radii = torch.sqrt(squared)\n"
            "radii.masked_fill_(squared == 0, 0.0)\n"
            "return radii.mean()"
        ),
        "A `torch.where` after the root is no fix either",
    ),
    wrong(
        "side effect",
        "sets the caller's points.grad to None",
        radius("points.grad = None\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "it changed the `.grad` of its input",
    ),
    wrong(
        "side effect",
        "zeroes the caller's gradient first, as zero_grad would",
        radius(
            "if points.grad is not None:\n"
            "    points.grad.zero_()\n"
            "return torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "the caller's `.grad` holds what earlier backward passes accumulated",
    ),
    wrong(
        "side effect",
        "makes the caller's points require grad",
        radius("points.requires_grad_()\nreturn torch.linalg.vector_norm(points, dim=1).mean()"),
        "it switches `requires_grad` on for its input",
    ),
    wrong(
        "side effect",
        "sets points.requires_grad = True",
        radius(
            "points.requires_grad = True\nreturn torch.linalg.vector_norm(points, dim=1).mean()"
        ),
        "Drop the `requires_grad_()`",
    ),
    wrong(
        "side effect",
        "functools.lru_cache on the function: state kept between calls",
        "import functools\n\n\n@functools.lru_cache(maxsize=None)\n"
        "def safe_mean_radius(points):\n"
        "    return torch.linalg.vector_norm(points, dim=1).mean()\n",
        "It changed the functools.lru_cache of `safe_mean_radius` (its items)",
    ),
    wrong(
        "side effect",
        "functools.cache on the function",
        "import functools\n\n\n@functools.cache\n"
        "def safe_mean_radius(points):\n"
        "    return points.norm(dim=1).mean()\n",
        "lru_cache",
    ),
    right(
        "cdist to a zero point of the points' dtype (audit)",
        radius(
            "origin = points.new_zeros(1, points.shape[1])\nreturn torch.cdist(points, origin).mean()"
        ),
    ),
    right(
        "sqrt(s + mask) - mask: the mask shifts only the exact zeros (audit)",
        radius(
            SQUARED + "m = (squared == 0).to(squared.dtype)\n"
            "return (torch.sqrt(squared + m) - m).mean()"
        ),
    ),
)
