"""Chapter 04, ``04-train-step``: the training step without its in-place error.

The task: compute what ``train_step`` means (the loss with its shift, one backward pass,
one update ``w -= 0.1 * w.grad``), for any batch and in float64 too, leaving nothing behind.
"""

from __future__ import annotations

from tests.banks import bank, right, wrong

FORWARD = "hidden = torch.tanh(x @ w) + 0.5\nloss = ((hidden - target) ** 2).mean()\n"
UPDATE = "with torch.no_grad():\n    w -= 0.1 * w.grad\nw.grad = None\n"


def step(body: str, *, before: str = "") -> str:
    """The exercise cell: ``fixed_train_step`` with ``body`` (and lines before it)."""
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    head = before.strip() + "\n\n\n" if before else ""
    return f"{head}def fixed_train_step(w, x, target):\n{lines}"


def usual(forward: str = FORWARD, update: str = UPDATE, end: str = "return loss") -> str:
    """A step of the usual shape: forward, one backward, the update, the return."""
    return step(forward + "loss.backward()\n" + update + end)


BANK = bank(
    "04-train-step",
    # --- wrong formula
    wrong(
        "wrong formula",
        "drops the shift",
        usual("hidden = torch.tanh(x @ w)\nloss = ((hidden - target) ** 2).mean()\n"),
        "forward computation",
    ),
    wrong(
        "wrong formula",
        "subtracts the shift",
        usual("hidden = torch.tanh(x @ w) - 0.5\nloss = ((hidden - target) ** 2).mean()\n"),
        "the loss is",
    ),
    wrong(
        "wrong formula",
        "sum instead of mean",
        usual("hidden = torch.tanh(x @ w) + 0.5\nloss = ((hidden - target) ** 2).sum()\n"),
        "the loss is",
    ),
    wrong(
        "wrong formula",
        "steps uphill",
        usual(update="with torch.no_grad():\n    w += 0.1 * w.grad\nw.grad = None\n"),
        "uphill",
    ),
    wrong(
        "wrong formula",
        "a learning rate of 0.01",
        usual(update="with torch.no_grad():\n    w -= 0.01 * w.grad\nw.grad = None\n"),
        "learning rate",
    ),
    wrong(
        "wrong formula",
        "returns the loss, but runs backward on the loss without the shift",
        step(
            "hidden = torch.tanh(x @ w)\n"
            "loss = ((hidden + 0.5 - target) ** 2).mean()\n"
            "((hidden - target) ** 2).mean().backward()\n" + UPDATE + "return loss"
        ),
        "called backward on",
    ),
    wrong(
        "wrong formula",
        "resets .grad before using it",
        usual(update="w.grad = None\nwith torch.no_grad():\n    w -= 0.1 * w.grad\n"),
        "`.grad` that is None",
    ),
    wrong(
        "wrong formula",
        "updates outside torch.no_grad()",
        usual(update="w -= 0.1 * w.grad\nw.grad = None\n"),
        "torch.no_grad()",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "divides by the example's 10 elements",
        usual("hidden = torch.tanh(x @ w) + 0.5\nloss = ((hidden - target) ** 2).sum() / 10\n"),
        "batch of",
    ),
    wrong(
        "right only at the example",
        "a shift tensor of the example's shape",
        usual(
            "hidden = torch.tanh(x @ w) + torch.full((5, 2), 0.5)\n"
            "loss = ((hidden - target) ** 2).mean()\n"
        ),
        "batch of",
    ),
    wrong(
        "right only at the example",
        "makes x float32 whatever it was",
        usual("x = x.float()\n" + FORWARD),
        "float64",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "hides the shift from autograd with .data",
        usual(
            "hidden = torch.tanh(x @ w)\nhidden.data += 0.5\n"
            "loss = ((hidden - target) ** 2).mean()\n"
        ),
        "`.data`",
    ),
    wrong(
        "symptom fix",
        "shifts in place under no_grad",
        usual(
            "hidden = torch.tanh(x @ w)\nwith torch.no_grad():\n    hidden += 0.5\n"
            "loss = ((hidden - target) ** 2).mean()\n"
        ),
        "changed in place",
    ),
    wrong(
        "symptom fix",
        "detaches the activations",
        usual(
            "hidden = torch.tanh(x @ w).detach() + 0.5\nloss = ((hidden - target) ** 2).mean()\n"
        ),
        "not connected to the parameters",
    ),
    wrong(
        "symptom fix",
        "catches the error and skips the update",
        step(
            "try:\n    return train_step(w, x, target)\nexcept RuntimeError:\n"
            "    w.grad = None\n"
            "    return ((torch.tanh(x @ w) + 0.5 - target) ** 2).mean()"
        ),
        "did not change the parameters",
    ),
    # --- side effect
    wrong(
        "side effect",
        "logs every loss to a global list (passed silently before)",
        usual(end="losses.append(loss.item())\nreturn loss").replace(
            "def fixed_train_step", "losses = []\n\n\ndef fixed_train_step"
        ),
        "the global list `losses` (0 items before the call, 1 after)",
    ),
    wrong(
        "side effect",
        "counts its steps in a global dict (passed silently before)",
        usual(end="counts['steps'] += 1\nreturn loss").replace(
            "def fixed_train_step", "counts = {'steps': 0}\n\n\ndef fixed_train_step"
        ),
        "the global dict `counts`",
    ),
    wrong(
        "side effect",
        "never resets .grad",
        usual(update="with torch.no_grad():\n    w -= 0.1 * w.grad\n"),
        "accumulate",
    ),
    wrong(
        "side effect",
        "registers a clipping hook on w at every step",
        step(
            "w.register_hook(lambda g: g.clamp(-10, 10))\n"
            + FORWARD
            + "loss.backward()\n"
            + UPDATE
            + "return loss"
        ),
        "hook",
    ),
    wrong(
        "side effect",
        "leaves grad mode off",
        usual(update="torch.set_grad_enabled(False)\nw -= 0.1 * w.grad\nw.grad = None\n"),
        "grad mode",
    ),
    wrong(
        "side effect",
        "moves the shift into the target, in place",
        usual("hidden = torch.tanh(x @ w)\nloss = ((hidden - target.sub_(0.5)) ** 2).mean()\n"),
        "`target` in place",
    ),
    wrong(
        "side effect",
        "makes the data require grad",
        usual("x.requires_grad_()\n" + FORWARD),
        "requires_grad",
    ),
    wrong(
        "side effect",
        "keeps one optimizer in a global",
        step(
            "global optimizer\n"
            "if optimizer is None:\n"
            "    optimizer = torch.optim.SGD([w], lr=0.1)\n"
            "optimizer.zero_grad()\n" + FORWARD + "loss.backward()\noptimizer.step()\n"
            "return loss",
            before="optimizer = None",
        ),
        "global variable `optimizer`",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "two backward passes",
        step(
            FORWARD + "(check,) = torch.autograd.grad(loss, w, retain_graph=True)\n"
            "assert check.isfinite().all()\nloss.backward()\n" + UPDATE + "return loss"
        ),
        "2 backward passes",
    ),
    wrong(
        "bypassed mechanism",
        "the update applied twice",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1)\n" + FORWARD + "loss.backward()\n"
            "with torch.no_grad():\n    w -= 0.1 * w.grad\noptimizer.step()\n"
            "w.grad = None\nreturn loss"
        ),
        "twice",
    ),
    wrong(
        "bypassed mechanism",
        "runs the broken train_step with every saved tensor copied",
        step(
            "copy = torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t)\n"
            "with copy:\n    return train_step(w, x, target)"
        ),
        "train_step",
    ),
    wrong(
        "bypassed mechanism",
        "rebinds w instead of updating it",
        step(FORWARD + "loss.backward()\nw = (w - 0.1 * w.grad).detach()\nreturn loss"),
        "only rebinds a local name",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "returns the unreduced loss",
        step(
            "hidden = torch.tanh(x @ w) + 0.5\nloss = (hidden - target) ** 2\n"
            "loss.mean().backward()\n" + UPDATE + "return loss"
        ),
        "shape (5, 2)",
    ),
    wrong(
        "wrong type or shape",
        "runs backward on the unreduced loss",
        step(
            "hidden = torch.tanh(x @ w) + 0.5\nloss = (hidden - target) ** 2\n"
            "loss.backward()\n" + UPDATE + "return loss.mean()"
        ),
        "one number",
    ),
    wrong(
        "wrong type or shape",
        "returns nothing",
        usual(end="pass"),
        "returned None",
    ),
    wrong(
        "wrong type or shape",
        "returns the loss and the weights",
        usual(end="return loss, w"),
        "tuple",
    ),
    wrong(
        "wrong type or shape",
        "returns the loss as float8",
        usual(end="return loss.to(torch.float8_e4m3fn)"),
        "float8",
    ),
    # --- right, written differently from the solution
    right(
        "a copy changed in place",
        usual(
            "hidden = torch.tanh(x @ w).clone()\nhidden += 0.5\n"
            "loss = ((hidden - target) ** 2).mean()\n"
        ),
    ),
    right(
        "an SGD optimizer made in the step",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1)\n" + FORWARD + "optimizer.zero_grad()\n"
            "loss.backward()\noptimizer.step()\noptimizer.zero_grad(set_to_none=True)\n"
            "return loss"
        ),
    ),
    right(
        "torch.autograd.grad and sub_",
        step(
            "loss = torch.nn.functional.mse_loss(torch.tanh(x @ w), target - 0.5)\n"
            "(grad,) = torch.autograd.grad(loss, w)\n"
            "with torch.no_grad():\n    w.sub_(0.1 * grad)\nreturn loss"
        ),
    ),
    right(
        "computed in float64 (crashed the checker before)",
        step(
            "hidden = torch.tanh(x.double() @ w.double()) + 0.5\n"
            "loss = ((hidden - target.double()) ** 2).mean()\n"
            "loss.backward()\n" + UPDATE + "return loss"
        ),
    ),
    right("returns the loss as a float", usual(end="return loss.item()")),
    right("returns the loss detached", usual(end="return loss.detach()")),
    right(
        "tanh_ in place on the product (which saves nothing of it)",
        usual("hidden = torch.tanh_(x @ w) + 0.5\nloss = ((hidden - target) ** 2).mean()\n"),
    ),
    right(
        "the mean spelled as sum over rows times columns",
        usual(
            "hidden = torch.tanh(x @ w) + 0.5\n"
            "loss = ((hidden - target) ** 2).sum() / (len(x) * target.shape[1])\n"
        ),
    ),
    right(
        "resets .grad before backward, as optimizer.zero_grad() does",
        step(
            "w.grad = None\n" + FORWARD + "loss.backward()\n"
            "with torch.no_grad():\n    w.add_(w.grad, alpha=-0.1)\nreturn loss"
        ),
    ),
    # --- from the fresh-eyes audit: each passed before
    wrong(
        "side effect",
        "counts its steps in an attribute of itself",
        usual(
            end="fixed_train_step.steps = getattr(fixed_train_step, 'steps', 0) + 1\nreturn loss"
        ),
        "set the attribute `fixed_train_step.steps`",
    ),
    wrong(
        "side effect",
        "a callable object counting its calls (audit: passed; a function attribute did not)",
        "class Step:\n"
        "    def __init__(self):\n"
        "        self.calls = 0\n\n"
        "    def __call__(self, w, x, target):\n"
        "        self.calls += 1\n"
        + "".join(
            f"        {line}\n" for line in (FORWARD + "loss.backward()\n" + UPDATE).splitlines()
        )
        + "        return loss\n\n\nfixed_train_step = Step()\n",
        "set the attribute `self.calls`",
    ),
    wrong(
        "side effect",
        "a callable object keeping the last loss",
        "class Step:\n"
        "    last = None\n\n"
        "    def __call__(self, w, x, target):\n"
        + "".join(
            f"        {line}\n" for line in (FORWARD + "loss.backward()\n" + UPDATE).splitlines()
        )
        + "        self.last = loss.item()\n"
        "        return loss\n\n\nfixed_train_step = Step()\n",
        "`self.last`",
    ),
    right(
        "a callable object that keeps its settings and changes none of them",
        "class Step:\n"
        "    def __init__(self, lr):\n"
        "        self.lr = lr\n\n"
        "    def __call__(self, w, x, target):\n"
        + "".join(f"        {line}\n" for line in FORWARD.splitlines())
        + "        loss.backward()\n"
        "        with torch.no_grad():\n"
        "            w -= self.lr * w.grad\n"
        "        w.grad = None\n"
        "        return loss\n\n\nfixed_train_step = Step(0.1)\n",
    ),
    wrong(
        "side effect",
        "a dropout with p=1e-9 (draws random numbers)",
        usual(
            "hidden = torch.tanh(torch.nn.functional.dropout(x, p=1e-9) @ w) + 0.5\n"
            "loss = ((hidden - target) ** 2).mean()\n"
        ),
        "drew random numbers",
    ),
    wrong(
        "side effect",
        "a helper function logs every loss in a global list",
        step(
            FORWARD + "log_loss(loss)\nloss.backward()\n" + UPDATE + "return loss",
            before="losses = []\n\n\ndef log_loss(value):\n    losses.append(value.item())",
        ),
        "the global list `losses`",
    ),
    wrong(
        "right only at the example",
        "a gradient by hand, cast to float32",
        step(
            "z = x @ w\n"
            "hidden = torch.tanh(z) + 0.5\n"
            "loss = ((hidden - target) ** 2).mean()\n"
            "with torch.no_grad():\n"
            "    dz = 2 * (hidden - target) / hidden.numel() * (1 - torch.tanh(z) ** 2)\n"
            "    w -= 0.1 * (x.T @ dz).float()\n"
            "return loss"
        ),
        "float32's digits",
    ),
    wrong(
        "side effect",
        "a mutable default argument logs every loss",
        "def fixed_train_step(w, x, target, _losses=[]):\n"
        + "".join(
            f"    {line}\n"
            for line in (
                FORWARD + "_losses.append(loss.item())\nloss.backward()\n" + UPDATE + "return loss"
            ).splitlines()
        ),
        "the default list `_losses` of fixed_train_step",
    ),
    # --- from issue 25: each passed, or was blamed on a corrupted gradient, before
    wrong(
        "right only at the example",
        "the target made float32",
        usual("target = target.float()\n" + FORWARD),
        "float32's digits",
    ),
    wrong(
        "right only at the example",
        "the learning rate as a tensor, float32 by default",
        usual(update="with torch.no_grad():\n    w -= torch.tensor(0.1) * w.grad\nw.grad = None\n"),
        "float32's digits",
    ),
    wrong(
        "symptom fix",
        "clips the gradient's norm to 1",
        usual(
            update="torch.nn.utils.clip_grad_norm_([w], max_norm=1.0)\n" + UPDATE,
        ),
        "`torch.nn.utils.clip_grad_norm_`",
    ),
    wrong(
        "symptom fix",
        "scales the gradient down to norm 1 by hand",
        usual(
            update="with torch.no_grad():\n"
            "    grad = w.grad * min(1.0, 1.0 / float(w.grad.norm()))\n"
            "    w -= 0.1 * grad\nw.grad = None\n"
        ),
        "norm is capped",
    ),
    wrong(
        "symptom fix",
        "clamps the gradient to [-1, 1]",
        usual(update="w.grad.clamp_(-1, 1)\n" + UPDATE),
        "the gradient capped at a bound",
    ),
    wrong(
        "bypassed mechanism",
        "Adam instead of the original's update",
        step(
            "optimizer = torch.optim.Adam([w], lr=0.1)\n" + FORWARD + "loss.backward()\n"
            "optimizer.step()\noptimizer.zero_grad()\nreturn loss"
        ),
        "`torch.optim.Adam`",
    ),
    wrong(
        "bypassed mechanism",
        "SGD with weight decay",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1, weight_decay=0.01)\n"
            + FORWARD
            + "loss.backward()\noptimizer.step()\noptimizer.zero_grad()\nreturn loss"
        ),
        "weight decay",
    ),
    right(
        "SGD with momentum made afresh at each step (its first step is plain SGD)",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1, momentum=0.9)\n"
            + FORWARD
            + "loss.backward()\noptimizer.step()\noptimizer.zero_grad()\nreturn loss"
        ),
    ),
    right(
        "a clip so loose it never binds",
        usual(update="torch.nn.utils.clip_grad_norm_([w], max_norm=1e6)\n" + UPDATE),
    ),
    # --- from the round-4 learner audit: each was blamed on the learning rate before
    wrong(
        "bypassed mechanism",
        "SGD with Nesterov momentum (its first step is 1.9 times the gradient step)",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True)\n"
            + FORWARD
            + "loss.backward()\noptimizer.step()\noptimizer.zero_grad()\nreturn loss"
        ),
        "`torch.optim.SGD` with momentum=0.9 and nesterov=True, whose first step is already 1.9",
    ),
    wrong(
        "bypassed mechanism",
        "SGD with Nesterov momentum 0.5, the optimizer imported under another name",
        step(
            "opt = Sgd([w], lr=0.1, momentum=0.5, nesterov=True)\n"
            + FORWARD
            + "loss.backward()\nopt.step()\nw.grad = None\nreturn loss",
            before="from torch.optim import SGD as Sgd",
        ),
        "nesterov=True",
    ),
    wrong(
        "wrong formula",
        "the gradient divided by its norm (audit: 'check the learning rate')",
        usual(
            update="with torch.no_grad():\n    w -= 0.1 * w.grad / w.grad.norm()\nw.grad = None\n"
        ),
        "your step has norm 0.1, the learning rate, whatever the gradient",
    ),
    wrong(
        "wrong formula",
        "the gradient normalised with F.normalize",
        usual(
            update="with torch.no_grad():\n"
            "    unit = torch.nn.functional.normalize(w.grad.flatten(), dim=0).view_as(w)\n"
            "    w -= 0.1 * unit\nw.grad = None\n"
        ),
        "did you divide by the gradient's norm?",
    ),
    right(
        "SGD with momentum and dampening made afresh at each step (first step plain SGD)",
        step(
            "optimizer = torch.optim.SGD([w], lr=0.1, momentum=0.5, dampening=0.5)\n"
            + FORWARD
            + "loss.backward()\noptimizer.step()\noptimizer.zero_grad()\nreturn loss"
        ),
    ),
)
