"""Chapter 02, ``02-jacobian-loop``: a Jacobian built row by row from ``torch.autograd.grad``."""

from __future__ import annotations

from textwrap import dedent, indent

from tests.banks import bank, right, wrong


def answer(body: str, before: str = "") -> str:
    """The exercise cell: ``def jacobian_loop(f, x):`` with ``body`` (after ``before``)."""
    head = dedent(before).strip()
    return (head + "\n\n\n" if head else "") + (
        "def jacobian_loop(f, x):\n" + indent(dedent(body).strip(), "    ") + "\n"
    )


ROWS = """
x = x.detach().requires_grad_()
y = f(x)
flat = y.reshape(-1)
rows = [torch.autograd.grad(flat[i], x, retain_graph=True)[0] for i in range(flat.numel())]
"""

BANK = bank(
    "02-jacobian-loop",
    # --- wrong formula
    wrong(
        "wrong formula",
        "the gradient of y.sum(): one pass for all rows",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            return torch.autograd.grad(y.sum(), x)[0]
        """),
        "the sum of all rows",
    ),
    wrong(
        "wrong formula",
        ".backward() without resetting x.grad",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = []
            for element in y.reshape(-1):
                element.backward(retain_graph=True)
                rows.append(x.grad.clone())
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "sum of the rows before it",
    ),
    wrong(
        "wrong formula",
        "stores x.grad itself, one tensor updated in place",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = []
            for element in y.reshape(-1):
                element.backward(retain_graph=True)
                rows.append(x.grad)
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "every row is the same tensor",
    ),
    wrong(
        "wrong formula",
        "all of y with a ones vector in every pass",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = [
                torch.autograd.grad(y, x, torch.ones_like(y), retain_graph=True)[0]
                for _ in range(y.numel())
            ]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "each pass went through all of y",
    ),
    wrong(
        "wrong formula",
        "the rows stacked as columns",
        answer(ROWS + "return torch.stack(rows, dim=-1).reshape(x.shape + y.shape)"),
        "transposed",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "loops over y.shape[0]: vectors only",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(y.shape[0])]
            return torch.stack(rows)
        """),
        "your code assumes a shape",
    ),
    wrong(
        "right only at the example",
        "torch.zeros(len(y), len(x)): vectors only",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            J = torch.zeros(len(y), len(x), dtype=x.dtype)
            for i in range(len(y)):
                J[i] = torch.autograd.grad(y[i], x, retain_graph=True)[0]
            return J
        """),
        "your code assumes a shape",
    ),
    wrong(
        "right only at the example",
        "squeeze() drops the size-1 dimensions",
        answer(ROWS + "return torch.stack(rows).reshape(y.shape + x.shape).squeeze()"),
        "drops every size-1 dimension",
    ),
    wrong(
        "right only at the example",
        "reshape(*y.shape, *x.shape): nothing to unpack when both are 0-d",
        answer(ROWS + "return torch.stack(rows).reshape(*y.shape, *x.shape)"),
        "unpacks nothing",
    ),
    wrong(
        "right only at the example",
        "one output element taken for a scalar: its size-1 dimensions dropped",
        answer(
            ROWS
            + "if len(rows) == 1:\n"
            + "    return rows[0]  # one output: that is the gradient\n"
            + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "its size-1 dimensions stay",
    ),
    wrong(
        "right only at the example",
        "squeezes the stacked rows, then puts back the dimensions it expects",
        answer(
            ROWS
            + "J = torch.stack(rows).squeeze()\nreturn J.reshape(*y.shape, *x.shape) if y.dim() > 1 else J"
        ),
        "`squeeze()` drops every size-1 dimension",
    ),
    wrong(
        "right only at the example",
        "indexes y[i] without flattening: a 0-d y has no index",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = [torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(y.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "`y` is 0-d here",
    ),
    wrong(
        "right only at the example",
        "y.squeeze() taken for a flat y: a 0-d y has no index",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            flat = y.squeeze()
            rows = [torch.autograd.grad(flat[i], x, retain_graph=True)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "`y` is 0-d here",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "NaN replaced and large entries clamped",
        answer(
            ROWS
            + "return torch.nan_to_num(torch.stack(rows).reshape(y.shape + x.shape)).clamp(-1e4, 1e4)"
        ),
        "x.exp() * 100",
    ),
    wrong(
        "symptom fix",
        "swallows the retain_graph error and fills zeros",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x).reshape(-1)
            rows = []
            for i in range(y.numel()):
                try:
                    rows.append(torch.autograd.grad(y[i], x)[0])
                except RuntimeError:
                    rows.append(torch.zeros_like(x))
            return torch.stack(rows).reshape(f(x).shape + x.shape)
        """),
        "are all zero",
    ),
    wrong(
        "symptom fix",
        "expands the gradient of y.sum() to the Jacobian's shape",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            g = torch.autograd.grad(y.sum(), x)[0]
            return g.expand(y.shape + x.shape).clone()
        """),
        "each pass went through all of y",
    ),
    wrong(
        "symptom fix",
        "detaches y to silence the second-pass error",
        answer("""
            x = x.detach().requires_grad_()
            flat = f(x).reshape(-1).detach()
            rows = [torch.autograd.grad(flat[i], x)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(f(x).shape + x.shape)
        """),
        "does not require grad",
    ),
    # --- side effect
    wrong(
        "side effect",
        "x.requires_grad_() on the caller's x",
        answer("""
            x.requires_grad_()
            y = f(x)
            flat = y.reshape(-1)
            rows = [torch.autograd.grad(flat[i], x, retain_graph=True)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "changed the `x` it was given",
    ),
    wrong(
        "side effect",
        "keeps every Jacobian in a global list",
        answer(
            ROWS
            + "J = torch.stack(rows).reshape(y.shape + x.shape)\njacobians.append(J)\nreturn J",
            before="jacobians = []",
        ),
        "global list `jacobians`",
    ),
    wrong(
        "side effect",
        "leaves grad mode off after the loop",
        answer(
            ROWS
            + "torch.set_grad_enabled(False)\nreturn torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "grad mode off",
    ),
    wrong(
        "side effect",
        "sets the default dtype to float64 for good",
        answer(
            "torch.set_default_dtype(torch.float64)\n"
            + ROWS
            + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "default dtype",
    ),
    wrong(
        "side effect",
        "rebinds a global cache",
        answer(
            "global last\n"
            + ROWS
            + "last = torch.stack(rows).reshape(y.shape + x.shape)\nreturn last",
            before="last = None",
        ),
        "the global variable `last`",
    ),
    wrong(
        "side effect",
        "reseeds torch's generator, then draws",
        answer(
            "torch.manual_seed(0)\n_ = torch.rand(3)\n"
            + ROWS
            + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "reseeded torch's random generator",
    ),
    wrong(
        "side effect",
        "draws random numbers it does not use",
        answer(
            "_ = torch.rand(3)\n" + ROWS + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "drew random numbers",
    ),
    wrong(
        "side effect",
        "flushes denormals to zero for good",
        answer(
            "torch.set_flush_denormal(True)\n"
            + ROWS
            + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "denormal",
    ),
    wrong(
        "side effect",
        "keeps the last Jacobian on the caller's f",
        answer(ROWS + "f.last = torch.stack(rows).reshape(y.shape + x.shape)\nreturn f.last"),
        "it set the attribute `f.last`",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "finite differences inside vmap, after a throwaway backward pass",
        answer("""
            xx = x.detach().requires_grad_()
            torch.autograd.grad(f(xx).sum(), xx)
            x64 = x.detach().double()
            n = x64.numel()
            E = (torch.eye(n, dtype=torch.float64) * 1e-6).reshape(n, *x.shape)
            cols = (torch.func.vmap(f)(x64 + E) - torch.func.vmap(f)(x64 - E)) / 2e-6
            y = f(x)
            return cols.reshape(n, -1).T.reshape(y.shape + x.shape).to(x.dtype)
        """),
        "finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "torch.autograd.functional.jacobian",
        answer("return torch.autograd.functional.jacobian(f, x)"),
        "calls `torch.autograd.functional.jacobian`",
    ),
    wrong(
        "bypassed mechanism",
        "the notebook's imported jacobian, vectorized",
        answer("return jacobian(f, x, vectorize=True)"),
        "calls `torch.autograd.functional.jacobian`",
    ),
    wrong(
        "bypassed mechanism",
        "torch.func.jacrev",
        answer("return torch.func.jacrev(f)(x)"),
        "calls `torch.func.jacrev`",
    ),
    wrong(
        "bypassed mechanism",
        "the course's jacobian_by_rows",
        answer("return ah.jacobians.jacobian_by_rows(f, x)"),
        "the course's own answer",
    ),
    wrong(
        "bypassed mechanism",
        "central differences by hand",
        answer("""
            eps = 1e-6
            y = f(x)
            flat_x = x.reshape(-1)
            columns = []
            for j in range(flat_x.numel()):
                step = torch.zeros_like(flat_x)
                step[j] = eps
                plus, minus = f((flat_x + step).reshape(x.shape)), f((flat_x - step).reshape(x.shape))
                columns.append(((plus - minus) / (2 * eps)).reshape(-1))
            return torch.stack(columns, dim=1).reshape(y.shape + x.shape)
        """),
        "finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "the course's central_difference",
        answer("return ah.finite_differences.central_difference(f, x)"),
        "finite differences",
    ),
    wrong(
        "bypassed mechanism",
        "rows from the chapter's replay of backward()",
        answer(
            ROWS.replace(
                "torch.autograd.grad(flat[i], x, retain_graph=True)[0]",
                "ah.engine.replay_backward(flat[i], x)",
            )
            + "return torch.stack(rows).reshape(y.shape + x.shape)"
        ),
        "replay of `backward()` in Python",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "rows in float32, converted back to x's dtype",
        answer("""
            xf = x.detach().float().requires_grad_()
            y = f(xf)
            flat = y.reshape(-1)
            rows = [torch.autograd.grad(flat[i], xf, retain_graph=True)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape).to(x.dtype)
        """),
        "a lower precision than x's float64",
    ),
    wrong(
        "wrong type or shape",
        "a list of rows",
        answer(ROWS + "return rows"),
        "torch.stack(rows)",
    ),
    wrong(
        "wrong type or shape",
        "the rows flat, never reshaped",
        answer(ROWS + "return torch.stack(rows).reshape(flat.numel(), x.numel())"),
        "reshape the stacked rows",
    ),
    wrong(
        "wrong type or shape",
        "torch.zeros with the default dtype",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            flat = y.reshape(-1)
            J = torch.zeros(flat.numel(), x.numel())
            for i in range(flat.numel()):
                J[i] = torch.autograd.grad(flat[i], x, retain_graph=True)[0].reshape(-1)
            return J.reshape(y.shape + x.shape)
        """),
        "take the default dtype",
    ),
    wrong(
        "wrong type or shape",
        "computes in float64 and returns float64",
        answer("""
            x = x.detach().double().requires_grad_()
            y = f(x)
            flat = y.reshape(-1)
            rows = [torch.autograd.grad(flat[i], x, retain_graph=True)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
        "silently become float64",
    ),
    wrong(
        "wrong type or shape",
        "a NumPy array",
        answer(ROWS + "return torch.stack(rows).reshape(y.shape + x.shape).numpy()"),
        "a NumPy value, not a tensor",
    ),
    # --- right, written differently
    right(
        "unit vectors as grad_outputs",
        answer("""
            x = x.clone().requires_grad_(True)
            y = f(x)
            J = x.new_zeros(y.numel(), x.numel())
            for i in range(y.numel()):
                unit = torch.zeros(y.numel(), dtype=y.dtype)
                unit[i] = 1
                (row,) = torch.autograd.grad(y, x, unit.reshape(y.shape), retain_graph=True)
                J[i] = row.reshape(-1)
            return J.reshape(y.shape + x.shape)
        """),
    ),
    right(
        ".backward() with x.grad reset and copied",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            rows = []
            for element in y.flatten():
                x.grad = None
                element.backward(retain_graph=True)
                rows.append(x.grad.clone())
            return torch.stack(rows).view(y.shape + x.shape)
        """),
    ),
    right(
        "f evaluated again for every row (a note)",
        answer("""
            x = x.detach().requires_grad_()
            n = f(x).numel()
            rows = [torch.autograd.grad(f(x).reshape(-1)[i], x)[0] for i in range(n)]
            return torch.stack(rows).reshape(f(x).shape + x.shape)
        """),
        "evaluates f",
    ),
    right(
        "vmap over torch.func.vjp (a note)",
        answer("""
            y, pullback = torch.func.vjp(f, x)
            units = torch.eye(y.numel(), dtype=y.dtype).reshape(-1, *y.shape)
            (J,) = torch.func.vmap(pullback)(units)
            return J.reshape(y.shape + x.shape)
        """),
        "one batched pass",
    ),
    right(
        "is_grads_batched=True (a note)",
        answer("""
            x = x.detach().requires_grad_()
            y = f(x)
            units = torch.eye(y.numel(), dtype=y.dtype).reshape(-1, *y.shape)
            (J,) = torch.autograd.grad(y, x, units, is_grads_batched=True)
            return J.reshape(y.shape + x.shape)
        """),
        "batches with the legacy vmap",
    ),
    right(
        "columns from forward mode (a note)",
        answer("""
            y = f(x)
            columns = []
            for j in range(x.numel()):
                tangent = torch.zeros(x.numel(), dtype=x.dtype)
                tangent[j] = 1
                columns.append(torch.func.jvp(f, (x,), (tangent.reshape(x.shape),))[1].reshape(-1))
            return torch.stack(columns, dim=1).reshape(y.shape + x.shape)
        """),
        "forward mode",
    ),
    right(
        "columns from torch.autograd.functional.jvp (a note: not forward mode)",
        answer("""
            y = f(x)
            columns = []
            for j in range(x.numel()):
                tangent = torch.zeros(x.numel(), dtype=x.dtype).index_fill(0, torch.tensor(j), 1.0)
                columns.append(jvp(f, x, tangent.reshape(x.shape))[1].reshape(-1))
            return torch.stack(columns, dim=1).reshape(y.shape + x.shape)
        """),
        "not forward mode; it is the double-backward trick",
    ),
    right(
        "the output's size learned from f at zeros first",
        answer("""
            m = f(torch.zeros_like(x)).numel()
            x = x.detach().requires_grad_()
            y = f(x)
            rows = [torch.autograd.grad(y.reshape(-1)[i], x, retain_graph=True)[0] for i in range(m)]
            return torch.stack(rows).reshape(y.shape + x.shape)
        """),
    ),
    right(
        "in float64, converted back to x's dtype",
        answer("""
            x64 = x.detach().double().requires_grad_()
            y = f(x64)
            flat = y.reshape(-1)
            rows = [torch.autograd.grad(flat[i], x64, retain_graph=True)[0] for i in range(flat.numel())]
            return torch.stack(rows).reshape(y.shape + x.shape).to(x.dtype)
        """),
    ),
)
