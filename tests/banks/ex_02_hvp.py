"""Chapter 02, ``02-hvp``: a Hessian-vector product by double backward, without the Hessian."""

from __future__ import annotations

from textwrap import dedent, indent

from tests.banks import bank, right, wrong


def answer(body: str, before: str = "") -> str:
    """The exercise cell: ``def hvp_by_double_backward(f, x, v):`` with ``body``."""
    head = dedent(before).strip()
    return (head + "\n\n\n" if head else "") + (
        "def hvp_by_double_backward(f, x, v):\n" + indent(dedent(body).strip(), "    ") + "\n"
    )


GRADIENT = """
x = x.detach().requires_grad_()
(g,) = torch.autograd.grad(f(x), x, create_graph=True)
"""


def with_gradient(rest: str) -> str:
    """The lines that compute g with ``create_graph=True``, then ``rest``."""
    return GRADIENT + dedent(rest)


BANK = bank(
    "02-hvp",
    # --- wrong formula
    wrong(
        "wrong formula",
        "returns the gradient",
        answer("x = x.detach().requires_grad_()\nreturn torch.autograd.grad(f(x), x)[0]"),
        "the gradient g itself",
    ),
    wrong(
        "wrong formula",
        "g * v, elementwise",
        answer("x = x.detach().requires_grad_()\nreturn torch.autograd.grad(f(x), x)[0] * v"),
        "that is g * v",
    ),
    wrong(
        "wrong formula",
        "x.grad still holds g in the second backward",
        answer("""
            x = x.detach().requires_grad_()
            f(x).backward(create_graph=True)
            (x.grad * v).sum().backward()
            return x.grad.detach()
        """),
        "that is g + H v",
    ),
    wrong(
        "wrong formula",
        "the gradient of g.sum(), times v",
        answer(GRADIENT + "return torch.autograd.grad(g.sum(), x)[0] * v"),
        "the values are off",
    ),
    wrong(
        "wrong formula",
        "no create_graph on the first pass",
        answer("""
            x = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(f(x), x)
            return torch.autograd.grad((g * v).sum(), x)[0]
        """),
        "create_graph=True",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "torch.dot: vectors only",
        answer(GRADIENT + "return torch.autograd.grad(torch.dot(g, v), x)[0]"),
        "`x` may be a matrix",
    ),
    wrong(
        "right only at the example",
        "g @ v: vectors only",
        answer(GRADIENT + "return torch.autograd.grad(g @ v, x)[0]"),
        "`x` may be a matrix",
    ),
    wrong(
        "right only at the example",
        "a normalised v: nan at v = 0",
        answer(
            GRADIENT
            + "u = v / v.norm()\nreturn torch.autograd.grad((g * u).sum(), x)[0] * v.norm()"
        ),
        "v is 0 or tiny",
    ),
    wrong(
        "right only at the example",
        "flattens x",
        answer(GRADIENT + "return torch.autograd.grad((g * v).sum(), x)[0].reshape(-1)"),
        "reshape to `x.shape`",
    ),
    wrong(
        "right only at the example",
        "zeros for a small v, a special case",
        answer(
            "if v.abs().max() < 1e-12:\n    return torch.zeros_like(x)\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "a special case for a small v is wrong",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "an eps in the norm to dodge the division by zero",
        answer(
            GRADIENT
            + "norm = v.norm()\nu = v / (norm + 1e-12)\n"
            + "return torch.autograd.grad((g * u).sum(), x)[0] * norm"
        ),
        "v is 0 or tiny",
    ),
    wrong(
        "symptom fix",
        "makes g require grad to silence the error",
        answer("""
            x = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(f(x), x)
            g.requires_grad_()
            return torch.autograd.grad((g * v).sum(), x, allow_unused=True)[0]
        """),
        "allow_unused=True",
    ),
    wrong(
        "symptom fix",
        "detaches g to silence the second-pass error",
        answer(GRADIENT + "return torch.autograd.grad((g.detach() * v).sum(), x)[0]"),
        "create_graph=True",
    ),
    # --- side effect
    wrong(
        "side effect",
        "x.requires_grad_() on the caller's x",
        answer("""
            x.requires_grad_()
            (g,) = torch.autograd.grad(f(x), x, create_graph=True)
            return torch.autograd.grad((g * v).sum(), x)[0]
        """),
        "changed the `x` it was given",
    ),
    wrong(
        "side effect",
        "normalises the caller's v in place",
        answer(
            GRADIENT
            + "norm = v.norm()\nv /= norm\nreturn torch.autograd.grad((g * v).sum(), x)[0] * norm"
        ),
        "changed the `v` it was given",
    ),
    wrong(
        "side effect",
        "switches anomaly mode on for good",
        answer(
            "torch.autograd.set_detect_anomaly(True)\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "anomaly mode",
    ),
    wrong(
        "side effect",
        "leaves grad mode off",
        answer(
            GRADIENT
            + "hv = torch.autograd.grad((g * v).sum(), x)[0]\ntorch.set_grad_enabled(False)\nreturn hv"
        ),
        "grad mode off",
    ),
    wrong(
        "side effect",
        "keeps the gradients in a global dict",
        answer(
            GRADIENT + "cache[len(cache)] = g\nreturn torch.autograd.grad((g * v).sum(), x)[0]",
            before="cache = {}",
        ),
        "global dict `cache`",
    ),
    wrong(
        "side effect",
        "flushes denormals to zero for good",
        answer(
            "torch.set_flush_denormal(True)\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "denormal",
    ),
    wrong(
        "side effect",
        "deterministic algorithms switched on for good",
        answer(
            "torch.use_deterministic_algorithms(True)\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "deterministic algorithms on",
    ),
    wrong(
        "side effect",
        "saved-tensor hooks disabled for good",
        answer(
            "torch._C._autograd._saved_tensors_hooks_disable('no')\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "saved-tensor hooks disabled",
    ),
    wrong(
        "side effect",
        "reseeds torch's generator",
        answer(
            "torch.manual_seed(0)\n" + GRADIENT + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "reseeded torch's random generator",
    ),
    wrong(
        "side effect",
        "draws a random number",
        answer("torch.rand(1)\n" + GRADIENT + "return torch.autograd.grad((g * v).sum(), x)[0]"),
        "drew random numbers",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "the library's hvp",
        answer("return torch.autograd.functional.hvp(f, x, v)[1]"),
        "calls `torch.autograd.functional.hvp`",
    ),
    wrong(
        "bypassed mechanism",
        "the notebook's imported vhp (H is symmetric)",
        answer("return vhp(f, x, v)[1]"),
        "calls `torch.autograd.functional.vhp`",
    ),
    wrong(
        "bypassed mechanism",
        "the Hessian, then a matrix product",
        answer("""
            H = hessian(f, x).reshape(x.numel(), x.numel())
            return (H @ v.reshape(-1)).reshape(x.shape)
        """),
        "calls `torch.autograd.functional.hessian`",
    ),
    wrong(
        "bypassed mechanism",
        "torch.func.hessian",
        answer("""
            H = torch.func.hessian(f)(x).reshape(x.numel(), x.numel())
            return (H @ v.reshape(-1)).reshape(x.shape)
        """),
        "calls `torch.func.hessian`",
    ),
    wrong(
        "bypassed mechanism",
        "jacrev of the gradient",
        answer("""
            H = torch.func.jacrev(torch.func.grad(f))(x).reshape(x.numel(), x.numel())
            return (H @ v.reshape(-1)).reshape(x.shape)
        """),
        "Jacobian (of the gradient",
    ),
    wrong(
        "bypassed mechanism",
        "the Hessian in two batched passes",
        answer(
            with_gradient("""
            n = x.numel()
            units = torch.eye(n, dtype=x.dtype).reshape(n, *x.shape)
            (H,) = torch.autograd.grad(g, x, units, is_grads_batched=True)
            return (H.reshape(n, n) @ v.reshape(-1)).reshape(x.shape)
        """)
        ),
        "as many as the Hessian",
    ),
    wrong(
        "bypassed mechanism",
        "the Hessian from vmap over the gradient's vjp",
        answer("""
            n = x.numel()
            _, pullback = torch.func.vjp(torch.func.grad(f), x)
            (H,) = torch.func.vmap(pullback)(torch.eye(n, dtype=x.dtype).reshape(n, *x.shape))
            return (H.reshape(n, n) @ v.reshape(-1)).reshape(x.shape)
        """),
        "as many as the Hessian",
    ),
    wrong(
        "bypassed mechanism",
        "the Hessian a row at a time",
        answer(
            with_gradient("""
            flat = g.reshape(-1)
            rows = [torch.autograd.grad(flat[i], x, retain_graph=True)[0].reshape(-1) for i in range(flat.numel())]
            return (torch.stack(rows) @ v.reshape(-1)).reshape(x.shape)
        """)
        ),
        "3 are enough",
    ),
    wrong(
        "bypassed mechanism",
        "finite differences of the gradient",
        answer("""
            eps = 1e-6

            def gradient(point):
                point = point.detach().requires_grad_()
                return torch.autograd.grad(f(point), point)[0]

            return (gradient(x + eps * v) - gradient(x - eps * v)) / (2 * eps)
        """),
        "finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "a forward difference of the gradient",
        answer("""
            x = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(f(x), x)
            step = x + 1e-7 * v
            (g_step,) = torch.autograd.grad(f(step), step)
            return (g_step - g) / 1e-7
        """),
        "a small step away from x",
    ),
    wrong(
        "bypassed mechanism",
        "the second pass by the chapter's replay of backward()",
        answer(GRADIENT + "return ah.engine.replay_backward((g * v).sum(), x)[0]"),
        "replay of `backward()` in Python",
    ),
    wrong(
        "bypassed mechanism",
        "finite differences of the gradient inside vmap",
        answer("""
            x64 = x.detach().double()
            size = v.double().norm()
            if size == 0:
                return torch.zeros_like(x)
            u, h = v.double() / size, 1e-5
            g = torch.func.vmap(torch.func.grad(f))(torch.stack([x64 + h * u, x64 - h * u]))
            return ((g[0] - g[1]) / (2 * h) * size).to(x.dtype)
        """),
        "finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "the Hessian in two chunks of a vmapped pullback",
        answer("""
            n = x.numel()
            _, pullback = torch.func.vjp(torch.func.grad(f), x)
            units = torch.nn.functional.one_hot(torch.arange(n), n).to(x.dtype).reshape(n, *x.shape)
            half = n // 2
            top = torch.func.vmap(pullback)(units[:half])[0].reshape(half, n)
            bottom = torch.func.vmap(pullback)(units[half:])[0].reshape(n - half, n)
            return (torch.cat([top, bottom]) @ v.reshape(-1)).reshape(x.shape)
        """),
        "its batched passes compute",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "squeezed: a size-1 dimension lost",
        answer(GRADIENT + "return torch.autograd.grad((g * v).sum(), x)[0].squeeze()"),
        "expected (3, 1)",
    ),
    wrong(
        "wrong type or shape",
        "in float32, converted back to x's dtype",
        answer("""
            xf = x.detach().float().requires_grad_()
            (g,) = torch.autograd.grad(f(xf), xf, create_graph=True)
            return torch.autograd.grad((g * v.float()).sum(), xf)[0].to(x.dtype)
        """),
        "a lower precision than x's float64",
    ),
    wrong(
        "wrong type or shape",
        "returns the scalar g · v",
        answer(GRADIENT + "return (g * v).sum()"),
        "not that scalar",
    ),
    wrong(
        "wrong type or shape",
        "returns autograd.grad's tuple",
        answer(GRADIENT + "return torch.autograd.grad((g * v).sum(), x)"),
        "returns a tuple",
    ),
    wrong(
        "wrong type or shape",
        "in float64, returned in float64",
        answer("""
            x = x.detach().double().requires_grad_()
            (g,) = torch.autograd.grad(f(x), x, create_graph=True)
            return torch.autograd.grad((g * v.double()).sum(), x)[0]
        """),
        "silently become float64",
    ),
    # --- from issue 25: each passed before (float64 results with float32's digits)
    wrong(
        "right only at the example",
        "v converted to float32 in the dot product",
        answer(GRADIENT + "return torch.autograd.grad((g * v.float()).sum(), x)[0]"),
        "rounded to float32",
    ),
    wrong(
        "right only at the example",
        "v copied with torch.tensor, which makes float32",
        answer(
            GRADIENT + "weights = torch.tensor(v.tolist())\n"
            "return torch.autograd.grad((g * weights).sum(), x)[0]"
        ),
        "rounded to float32",
    ),
    # --- from issue 25's learner audit: each passed before
    wrong(
        "symptom fix",
        "H v clipped to ±50 (the largest |H v| of the other problems is 23.6)",
        answer(GRADIENT + "(h,) = torch.autograd.grad((g * v).sum(), x)\nreturn h.clamp(-50, 50)"),
        "H v is linear in v",
    ),
    wrong(
        "symptom fix",
        "H v scaled down to a norm of at most 30 (norm clipping)",
        answer(
            GRADIENT
            + "(h,) = torch.autograd.grad((g * v).sum(), x)\n"
            + "return h * torch.clamp(30 / (h.norm() + 1e-12), max=1.0)"
        ),
        "H v is linear in v",
    ),
    wrong(
        "symptom fix",
        "v clamped to ±10 before the product, 'for stability'",
        answer(GRADIENT + "return torch.autograd.grad((g * v.clamp(-10, 10)).sum(), x)[0]"),
        "H v is linear in v",
    ),
    wrong(
        "right only at the example",
        "dot product by index, matrices flattened, a 0-d x forgotten (torch says `.item()`)",
        answer(
            GRADIENT
            + "gs, vs = (g.reshape(-1), v.reshape(-1)) if x.dim() > 1 else (g, v)\n"
            + "dot = sum(gs[i] * vs[i] for i in range(x.numel()))\n"
            + "return torch.autograd.grad(dot, x)[0]"
        ),
        "A 0-d tensor has no index",
    ),
    wrong(
        "wrong formula",
        "off by one part in a million",
        answer(GRADIENT + "(h,) = torch.autograd.grad((g * v).sum(), x)\nreturn h * (1 + 1e-6)"),
        "the values are off",
    ),
    wrong(
        "wrong formula",
        "off by five parts in ten million: a factor 0.9999995 kept from a test",
        answer(GRADIENT + "return 0.9999995 * torch.autograd.grad((g * v).sum(), x)[0]"),
        "the values are off",
    ),
    right(
        "nan_to_num over a normalised v (a note)",
        answer("""
            x = x.detach().requires_grad_()
            u = v / v.norm()
            (g,) = torch.autograd.grad(f(x), x, create_graph=True)
            (h,) = torch.autograd.grad((g * u).sum(), x)
            return torch.nan_to_num(h * v.norm())
        """),
        "calls `nan_to_num`",
    ),
    right(
        "NaN replaced by torch.where on isnan, over a normalised v (a note)",
        answer(
            GRADIENT
            + "hv = torch.autograd.grad((g * (v / v.norm())).sum(), x)[0] * v.norm()\n"
            + "return torch.where(hv.isnan(), torch.zeros_like(hv), hv)"
        ),
        "replaces NaN (`isnan`)",
    ),
    right(
        "functional.jvp of the gradient: the double-backward trick, other last bits",
        answer("""
            def gradient(t):
                return torch.autograd.grad(f(t), t, create_graph=True)[0]

            return torch.autograd.functional.jvp(gradient, x.detach(), v)[1]
        """),
    ),
    # --- right, written differently
    right(
        "v as grad_outputs",
        answer(GRADIENT + "return torch.autograd.grad(g, x, grad_outputs=v)[0]"),
    ),
    right(
        ".backward() twice, x.grad reset in between",
        answer("""
            x = x.detach().requires_grad_()
            f(x).backward(create_graph=True)
            g, x.grad = x.grad, None
            torch.sum(g * v).backward()
            return x.grad
        """),
    ),
    right(
        "forward-over-reverse (a note)",
        answer("return torch.func.jvp(torch.func.grad(f), (x,), (v,))[1]"),
        "forward-over-reverse",
    ),
    right(
        "torch.func.linearize of the gradient (a note)",
        answer("""
            _, jvp_of_gradient = torch.func.linearize(torch.func.grad(f), x)
            return jvp_of_gradient(v)
        """),
        "forward-mode Jacobian-vector product of the gradient",
    ),
    right(
        "v = 0 special-cased, then double backward (a note: not needed)",
        answer(
            "if not v.any():\n    return torch.zeros_like(x)\n"
            + GRADIENT
            + "return torch.autograd.grad((g * v).sum(), x)[0]"
        ),
        "the special case is not needed",
    ),
    right(
        "the trace of outer(g, v): an n × n intermediate (a note)",
        answer(
            GRADIENT
            + "return torch.autograd.grad(torch.outer(g.reshape(-1), v.reshape(-1)).trace(), x)[0]"
        ),
        "not the Hessian",
    ),
    right(
        "torch.func.vjp of the gradient",
        answer("""
            _, pullback = torch.func.vjp(torch.func.grad(f), x)
            (hv,) = pullback(v)
            return hv
        """),
    ),
    right(
        "a flattened dot product, reshaped back",
        answer(
            GRADIENT
            + "dot = g.reshape(-1) @ v.reshape(-1)\n(hv,) = torch.autograd.grad(dot, x)\nreturn hv.reshape(x.shape)"
        ),
    ),
    right(
        "in float64, converted back to x's dtype",
        answer("""
            x64 = x.detach().double().requires_grad_()
            (g,) = torch.autograd.grad(f(x64), x64, create_graph=True)
            (hv,) = torch.autograd.grad((g * v.double()).sum(), x64)
            return hv.to(x.dtype)
        """),
    ),
)
