"""Chapter 01, ``01-matmul``: fix MatMul's backward (Y = X W)."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def fixed(body: str) -> str:
    lines = "".join(f"        {line}\n" for line in body.strip().splitlines())
    return (
        "class FixedMatMul(MatMul):\n    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        x, weight = ctx.saved_tensors\n" + lines
    )


BANK = bank(
    "01-matmul",
    wrong(
        "wrong formula",
        "the bug left in",
        fixed("return grad_output @ weight.T, grad_output.T @ x"),
        "shape",
    ),
    wrong(
        "wrong formula",
        "no transposes",
        fixed("return grad_output @ weight, x @ grad_output"),
        "raised",
    ),
    wrong(
        "wrong formula",
        "gradients swapped",
        fixed("return x.T @ grad_output, grad_output @ weight.T"),
        "shape",
    ),
    wrong(
        "wrong formula",
        "the weight's gradient as an outer product of sums",
        fixed("return grad_output @ weight.T, torch.outer(x.sum(0), grad_output.sum(0))"),
        "is off",
    ),
    wrong(
        "wrong formula",
        "forgets grad_output for x",
        fixed("return torch.ones_like(grad_output) @ weight.T, x.T @ grad_output"),
        "is off",
    ),
    wrong(
        "right only at the example",
        "shapes hard-coded for the example",
        fixed("return grad_output.reshape(5, 2) @ weight.T, x.T.reshape(3, 5) @ grad_output"),
        "probes beyond your example, with other shapes",
    ),
    wrong(
        "right only at the example",
        "einsum with the example's sizes",
        fixed(
            "return torch.einsum('nm,km->nk', grad_output, weight), x[:, :3].T @ grad_output[:, :2]"
        ),
        "probes",
    ),
    wrong(
        "symptom fix",
        "transposes whatever shape comes out",
        fixed("gw = grad_output.T @ x\nreturn grad_output @ weight.T, gw.reshape(weight.shape)"),
        "is off",
    ),
    wrong(
        "symptom fix",
        "sums the weight's gradient to fit",
        fixed(
            "return grad_output @ weight.T, (x.sum(0, keepdim=True).T @ grad_output.sum(0, keepdim=True))"
        ),
        "is off",
    ),
    wrong(
        "right only at the example",
        "transposes only when the shape does not fit",
        fixed(
            "grad_w = grad_output.T @ x\n"
            "if grad_w.shape != weight.shape:\n    grad_w = grad_w.T\n"
            "return grad_output @ weight.T, grad_w"
        ),
        "is off",
    ),
    wrong(
        "bypassed mechanism",
        "returns only the gradients needs_input_grad asks for",
        fixed(
            "grads = []\n"
            "if ctx.needs_input_grad[0]:\n    grads.append(grad_output @ weight.T)\n"
            "if ctx.needs_input_grad[1]:\n    grads.append(x.T @ grad_output)\n"
            "return tuple(grads)"
        ),
        "needs_input_grad",
    ),
    wrong(
        "bypassed mechanism",
        "needs_input_grad read the wrong way round",
        fixed(
            "grad_x = grad_output @ weight.T if ctx.needs_input_grad[1] else None\n"
            "grad_w = x.T @ grad_output if ctx.needs_input_grad[0] else None\n"
            "return grad_x, grad_w"
        ),
        "needs_input_grad",
    ),
    wrong(
        "side effect",
        "keeps the weight's gradients in a global list",
        (
            "history = []\n\n\n"
            + fixed("history.append(x.T @ grad_output)\nreturn grad_output @ weight.T, history[-1]")
        ),
        "the global list `history`",
    ),
    wrong(
        "side effect",
        "transposes the saved weight in place",
        fixed("weight.t_()\nreturn grad_output @ weight, x.T @ grad_output"),
        "in place",
    ),
    wrong(
        "side effect",
        "scales grad_output in place",
        fixed("g = grad_output.mul_(2)\nreturn g @ weight.T / 2, x.T @ g / 2"),
        "changed `grad_output` in place",
    ),
    wrong(
        "wrong type or shape",
        "a list of gradients",
        fixed("return [grad_output @ weight.T, x.T @ grad_output]"),
        "list",
    ),
    wrong(
        "wrong type or shape",
        "only one gradient",
        fixed("return grad_output @ weight.T"),
        "backward returned 1 gradient",
    ),
    wrong(
        "wrong type or shape",
        "float32 gradients",
        fixed("return (grad_output @ weight.T).float(), (x.T @ grad_output).float()"),
        "dtype",
    ),
    right(
        "matmul spelled out",
        fixed("return torch.matmul(grad_output, weight.t()), torch.matmul(x.t(), grad_output)"),
    ),
    right(
        "einsum",
        fixed(
            "return torch.einsum('nm,km->nk', grad_output, weight), torch.einsum('nk,nm->km', x, grad_output)"
        ),
    ),
    right("mT", fixed("return grad_output @ weight.mT, x.mT @ grad_output")),
    right(
        "needs_input_grad honoured",
        fixed(
            "grad_x = grad_w = None\n"
            "if ctx.needs_input_grad[0]:\n    grad_x = grad_output @ weight.T\n"
            "if ctx.needs_input_grad[1]:\n    grad_w = x.T @ grad_output\n"
            "return grad_x, grad_w"
        ),
    ),
    right(
        "transpose of a product", fixed("return (weight @ grad_output.T).T, (grad_output.T @ x).T")
    ),
    wrong(
        "wrong formula",
        "the input's gradient scaled by 1.0003",
        fixed("return grad_output @ weight.T * 1.0003, x.T @ grad_output"),
        "is off",
    ),
    wrong(
        "side effect",
        "adds weight.grad when there is one (issue 25 audit, item 1)",
        fixed(
            "gw = x.T @ grad_output\nif weight.grad is not None:\n    gw = gw + weight.grad\n"
            "return grad_output @ weight.T, gw"
        ),
        "read `.grad` of its input `weight`",
    ),
    wrong(
        "side effect",
        "adds x.grad to the input's gradient",
        fixed(
            "gx = grad_output @ weight.T\nif x.grad is not None:\n    gx += x.grad\n"
            "return gx, x.T @ grad_output"
        ),
        "read `.grad` of its input `x`",
    ),
    wrong(
        "side effect",
        "a guard that refuses a second backward (issue 25 audit, item 7)",
        fixed(
            "if getattr(ctx, 'done', False):\n    raise RuntimeError('backward called twice')\n"
            "ctx.done = True\nreturn grad_output @ weight.T, x.T @ grad_output"
        ),
        "backward can run only once on a graph",
    ),
)
