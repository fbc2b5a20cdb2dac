"""Chapter 05, ``05-evaluate``: an evaluation loop that restores the mode (also on an error)."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def evaluate(body: str, head: str = "") -> str:
    """The exercise cell: ``head`` before the function, ``body`` as evaluate_model's body."""
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    return f"{head}def evaluate_model(model, loader):\n{lines}"


# The right loop's pieces, for wrong answers that change one of them.
RESTORED = """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
finally:
    model.train(was_training)
return {result}
"""
MEAN = "sum(losses) / len(losses)"

BANK = bank(
    "05-evaluate",
    # --- wrong formula --------------------------------------------------------------------
    wrong(
        "wrong formula",
        "the mean over samples, not over batches",
        evaluate(
            """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        total = sum(float(F.mse_loss(model(x), y, reduction="sum")) for x, y in loader)
        count = sum(y.numel() for _, y in loader)
finally:
    model.train(was_training)
return total / count
"""
        ),
        "mean over samples",
    ),
    wrong(
        "wrong formula",
        "the sum of the batch losses",
        evaluate(RESTORED.format(result="sum(losses)")),
        "sum of the batch losses",
    ),
    wrong(
        "wrong formula",
        "keeps only the latest batch's loss",
        evaluate(
            """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        for x, y in loader:
            loss = float(F.mse_loss(model(x), y))
finally:
    model.train(was_training)
return loss
"""
        ),
        "last batch's loss alone",
    ),
    wrong(
        "wrong formula",
        "returns inside the loop",
        evaluate(
            """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        for x, y in loader:
            return float(F.mse_loss(model(x), y))
finally:
    model.train(was_training)
"""
        ),
        "first batch's loss alone",
    ),
    wrong(
        "wrong formula",
        "the L1 loss",
        evaluate(RESTORED.replace("F.mse_loss", "F.l1_loss").format(result=MEAN)),
        "the value is off",
    ),
    # --- right only at the example --------------------------------------------------------
    wrong(
        "right only at the example",
        "divides by 3, the example's number of batches",
        evaluate(RESTORED.format(result="sum(losses) / 3")),
        "one batch of 6 rows, the value is off",
    ),
    wrong(
        "right only at the example",
        "switches only Dropout and BatchNorm1d to eval",
        evaluate(
            """
modes = {m: m.training for m in model.modules()}
for m in model.modules():
    if isinstance(m, (nn.Dropout, nn.BatchNorm1d)):
        m.eval()
try:
    with torch.inference_mode():
        losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
finally:
    for m, mode in modes.items():
        m.train(mode)
return sum(losses) / len(losses)
"""
        ),
        "instance norm",
    ),
    wrong(
        "right only at the example",
        "no try/finally: a batch that raises leaves eval mode",
        evaluate(
            """
was_training = model.training
model.eval()
with torch.inference_mode():
    losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
model.train(was_training)
return sum(losses) / len(losses)
"""
        ),
        "Put the mode back in a `finally:` block",
    ),
    wrong(
        "right only at the example",
        "casts every batch to float32",
        evaluate(
            RESTORED.replace("model(x), y", "model(x.float()), y.float()").format(result=MEAN)
        ),
        "(float64) in train mode",
    ),
    # --- symptom fix ----------------------------------------------------------------------
    wrong(
        "symptom fix",
        "no_grad alone, in train mode",
        evaluate(
            """
with torch.no_grad():
    return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)
"""
        ),
        "that is the train-mode loss",
    ),
    wrong(
        "symptom fix",
        "a fixed seed to make train mode repeatable",
        evaluate(
            """
torch.manual_seed(0)
with torch.inference_mode():
    losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
return sum(losses) / len(losses)
"""
        ),
        "train-mode loss",
    ),
    wrong(
        "symptom fix",
        "a warm-up pass in train mode",
        evaluate(
            """
with torch.no_grad():
    model(loader[0][0])
""".strip()
            + "\n"
            + RESTORED.format(result=MEAN).strip()
        ),
        "running statistics changed",
    ),
    wrong(
        "symptom fix",
        "always back to train mode",
        evaluate(
            RESTORED.replace("model.train(was_training)", "model.train()").format(result=MEAN)
        ),
        "was in eval mode before and is in train mode after",
    ),
    wrong(
        "symptom fix",
        "restores only the top flag",
        evaluate(
            RESTORED.replace("model.train(was_training)", "model.training = was_training").format(
                result=MEAN
            )
        ),
        "changes only the model's own flag",
    ),
    # --- side effect ----------------------------------------------------------------------
    wrong(
        "side effect",
        "eval() and grad mode switched off for good",
        evaluate(
            """
model.eval()
torch.set_grad_enabled(False)
return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)
"""
        ),
        "left grad mode off",
    ),
    wrong(
        "side effect",
        "requires_grad_(False) instead of no_grad",
        evaluate(
            """
was_training = model.training
model.eval().requires_grad_(False)
try:
    losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
finally:
    model.train(was_training)
return sum(losses) / len(losses)
"""
        ),
        "can no longer learn",
    ),
    wrong(
        "side effect",
        "requires_grad_(False), then requires_grad_(True) for all",
        evaluate(
            """
was_training = model.training
model.eval().requires_grad_(False)
try:
    losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
finally:
    model.train(was_training).requires_grad_(True)
return sum(losses) / len(losses)
"""
        ),
        "which were frozen",
    ),
    wrong(
        "side effect",
        "never switches back",
        evaluate(
            """
model.eval()
with torch.inference_mode():
    return sum(float(F.mse_loss(model(x), y)) for x, y in loader) / len(loader)
"""
        ),
        "was in train mode before and is in eval mode after",
    ),
    wrong(
        "side effect",
        "standardises the inputs in place",
        evaluate(
            RESTORED.replace(
                "losses = [",
                "for x, _ in loader:\n            x.sub_(x.mean())\n        losses = [",
            ).format(result=MEAN)
        ),
        "in place",
    ),
    wrong(
        "side effect",
        "switches the notebook's model, not its argument",
        evaluate(
            """
was_training = net.training
model.eval()
net.eval()
with torch.inference_mode():
    losses = [float(F.mse_loss(model(x), y)) for x, y in loader]
model.train(was_training)
return sum(losses) / len(losses)
""",
        ),
        "the notebook's `net`",
    ),
    wrong(
        "side effect",
        "float64 by default for precision, left set",
        evaluate("torch.set_default_dtype(torch.float64)\n" + RESTORED.format(result=MEAN).strip()),
        "default dtype",
    ),
    # --- bypassed mechanism ---------------------------------------------------------------
    wrong(
        "bypassed mechanism",
        "records a graph and reads .item()",
        evaluate(
            RESTORED.replace("with torch.inference_mode():", "if True:")
            .replace("float(F.mse_loss(model(x), y))", "F.mse_loss(model(x), y).item()")
            .format(result=MEAN)
        ),
        "it recorded a graph",
    ),
    wrong(
        "bypassed mechanism",
        "detaches the output instead of no_grad",
        evaluate(
            RESTORED.replace("with torch.inference_mode():", "if True:")
            .replace("model(x)", "model(x).detach()")
            .format(result=MEAN)
        ),
        "it recorded a graph",
    ),
    wrong(
        "bypassed mechanism",
        "a hook to count batches, left on",
        evaluate(
            "model.register_forward_hook(lambda m, i, o: None)\n"
            + RESTORED.format(result=MEAN).strip()
        ),
        "it left hooks on the model",
    ),
    # --- wrong type or shape --------------------------------------------------------------
    wrong(
        "wrong type or shape",
        "returns the list of losses",
        evaluate(RESTORED.format(result="losses")),
        "returned a list of 3 items",
    ),
    wrong(
        "wrong type or shape",
        "unreduced losses",
        evaluate(
            """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        return torch.cat([F.mse_loss(model(x), y, reduction="none") for x, y in loader]).mean(1)
finally:
    model.train(was_training)
"""
        ),
        "a tensor of shape (21,)",
    ),
    wrong(
        "wrong type or shape",
        "forgets to return",
        evaluate(RESTORED.format(result=MEAN).replace("return ", "mean = ")),
        "forget `return`",
    ),
    # --- right ----------------------------------------------------------------------------
    right(
        "a tensor result, no_grad, try/finally",
        evaluate(
            """
mode = model.training
try:
    model.eval()
    with torch.no_grad():
        return torch.stack([F.mse_loss(model(x), y) for x, y in loader]).mean()
finally:
    model.train(mode)
"""
        ),
    ),
    right(
        "a running total, set_grad_enabled(False) as a context",
        evaluate(
            """
was_training = model.training
model.eval()
total, batches = 0.0, 0
try:
    with torch.set_grad_enabled(False):
        for inputs, targets in loader:
            total += F.mse_loss(model(inputs), targets).item()
            batches += 1
finally:
    model.train(was_training)
return total / batches
"""
        ),
    ),
    # --- audit: the loader, names, attributes and hidden graphs -------------------------
    wrong(
        "side effect",
        "uses up the loader with pop, as if it were a one-shot iterator",
        evaluate(
            """
was_training = model.training
model.eval()
losses = []
try:
    with torch.inference_mode():
        while loader:
            inputs, targets = loader.pop(0)
            losses.append(float(F.mse_loss(model(inputs), targets)))
finally:
    model.train(was_training)
return sum(losses) / len(losses)
"""
        ),
        "it changed the loader itself",
    ),
    wrong(
        "side effect",
        "replaces the loader's batches with normalised copies",
        evaluate(
            """
for index, (inputs, targets) in enumerate(loader):
    loader[index] = ((inputs - inputs.mean()) / inputs.std(), targets)
"""
            + RESTORED.format(result=MEAN)
        ),
        "some of them replaced",
    ),
    wrong(
        "side effect",
        "appends every evaluation to a global history",
        evaluate(
            RESTORED.format(result="history[-1]").replace(
                "return history[-1]",
                "history.append(sum(losses) / len(losses))\nreturn history[-1]",
            ),
            head="history = []\n\n\n",
        ),
        "the global list `history` (it held 0 items, now 1)",
    ),
    wrong(
        "side effect",
        "switches dropout off by setting p to 0",
        evaluate(
            """
for module in model.modules():
    if isinstance(module, nn.Dropout):
        module.p = 0.0
"""
            + RESTORED.format(result=MEAN)
        ),
        "it changed attributes of the model's modules (3.p)",
    ),
    wrong(
        "side effect",
        "marks the model as evaluated",
        evaluate("model.evaluated = True\n" + RESTORED.format(result=MEAN)),
        "it changed attributes of the model's modules (evaluated)",
    ),
    wrong(
        "wrong formula",
        "counts the batches with an iterator, then loops over the used-up iterator",
        evaluate(
            """
was_training = model.training
model.eval()
try:
    with torch.inference_mode():
        batches = iter(loader)
        count = sum(1 for _ in batches)
        total = sum(float(F.mse_loss(model(x), y)) for x, y in batches)
finally:
    model.train(was_training)
return total / count
"""
        ),
        "0 is what a loop returns that saw no batch",
    ),
    wrong(
        "bypassed mechanism",
        "packs the saved tensors away instead of recording no graph",
        evaluate(
            RESTORED.format(result=MEAN).replace(
                "with torch.inference_mode():",
                "with torch.autograd.graph.saved_tensors_hooks(lambda t: None, lambda p: None):",
            )
        ),
        "it recorded a graph (the model's output had a `grad_fn`",
    ),
    right(
        "a NumPy mean, inference_mode as a decorator",
        evaluate(
            """
@torch.inference_mode()
def losses():
    return [F.mse_loss(model(x), y).item() for x, y in loader]

was_training = model.training
model.eval()
try:
    return np.mean(losses())
finally:
    model.train(was_training)
""",
            head="import numpy as np\n\n\n",
        ),
    ),
    right(
        "each module's own flag put back",
        evaluate(
            """
flags = {module: module.training for module in model.modules()}
model.eval()
try:
    with torch.inference_mode():
        losses = torch.tensor([F.mse_loss(model(x), y) for x, y in loader])
finally:
    for module, flag in flags.items():
        module.training = flag
return losses.mean()
"""
        ),
    ),
    right(
        "reuses the chapter's evaluate",
        evaluate("return evaluate(model, loader)"),
    ),
    right(
        "a copy of the model (passes with a note)",
        evaluate(
            """
copy = deepcopy(model).eval()
with torch.inference_mode():
    return sum(F.mse_loss(copy(x), y).item() for x, y in loader) / len(loader)
""",
            head="from copy import deepcopy\n\n\n",
        ),
        "evaluated a copy of the model",
    ),
    right(
        "a float64 sum",
        evaluate(
            RESTORED.replace(
                "float(F.mse_loss(model(x), y))", "F.mse_loss(model(x), y).double()"
            ).format(result="torch.stack(losses).sum() / len(loader)")
        ),
    ),
    # --- from the fresh-eyes audit: each passed before
    wrong(
        "symptom fix",
        "skips a batch that raises (except Exception: pass)",
        evaluate(
            """
was_training = model.training
model.eval()
losses = []
with torch.inference_mode():
    for x, y in loader:
        try:
            losses.append(float(F.mse_loss(model(x), y)))
        except Exception:
            pass
model.train(was_training)
return sum(losses) / len(losses)
"""
        ),
        "your loop hid the error from batch 2",
    ),
    wrong(
        "symptom fix",
        "continues past a RuntimeError, mode put back in finally",
        evaluate(
            """
was_training = model.training
model.eval()
losses = []
try:
    with torch.inference_mode():
        for x, y in loader:
            try:
                loss = F.mse_loss(model(x), y)
            except RuntimeError:
                continue
            losses.append(float(loss))
finally:
    model.train(was_training)
return sum(losses) / len(losses)
"""
        ),
        "your loop hid the error from batch 2",
    ),
    wrong(
        "side effect",
        "counts its calls in a buffer registered on the model",
        evaluate(
            "model.register_buffer('n_evals', torch.zeros(()))\n" + RESTORED.format(result=MEAN)
        ),
        "`n_evals` (a buffer, added)",
    ),
    wrong(
        "side effect",
        "marks the model with a private attribute",
        evaluate("model._evaluated = True\n" + RESTORED.format(result=MEAN)),
        "`_evaluated` (an attribute, added)",
    ),
    wrong(
        "side effect",
        "reseeds torch's generator for a repeatable evaluation",
        evaluate("torch.manual_seed(0)\n" + RESTORED.format(result=MEAN)),
        "reseeded torch's random generator",
    ),
    wrong(
        "side effect",
        "a helper function keeps every mean in a global list",
        evaluate(
            RESTORED.format(result=MEAN).strip().replace("return ", "result = ")
            + "\nremember(result)\nreturn result",
            head="history = []\n\n\ndef remember(value):\n    history.append(value)\n\n\n",
        ),
        "the global list `history`",
    ),
    wrong(
        "side effect",
        "a mutable default argument keeps every mean",
        "def evaluate_model(model, loader, _history=[]):\n"
        + "".join(
            f"    {line}\n"
            for line in RESTORED.format(result=MEAN)
            .strip()
            .replace("return ", "result = ")
            .splitlines()
        )
        + "    _history.append(result)\n    return result\n",
        "the default list `_history` of evaluate_model",
    ),
    # --- issue 25: the model comes with gradients, as in the middle of training ----------
    wrong(
        "side effect",
        "clears the gradients with model.zero_grad() before evaluating",
        evaluate("model.zero_grad()\n" + RESTORED.format(result=MEAN)),
        "it cleared the `.grad` of 0.weight, 0.bias",
    ),
    wrong(
        "side effect",
        "zeroes every gradient in place after evaluating",
        evaluate(
            RESTORED.format(result=MEAN).strip().replace("return ", "result = ")
            + """
for parameter in model.parameters():
    if parameter.grad is not None:
        parameter.grad.zero_()
return result
"""
        ),
        "it zeroed the `.grad` of",
    ),
    # --- from the round-4 learner audit: each told the wrong cause, or passed, before --------
    wrong(
        "side effect",
        "model.double() for precision, then a right loop (audit: blamed on train mode)",
        evaluate(
            """
model.double()
was = model.training
model.eval()
try:
    with torch.no_grad():
        losses = [float(F.mse_loss(model(i.double()), t.double())) for i, t in loader]
finally:
    model.train(was)
return sum(losses) / len(losses)
"""
        ),
        "it changed the dtype of the model's parameters and buffers",
    ),
    wrong(
        "side effect",
        "model.to(torch.float32) and float32 batches (the float64 case converted)",
        evaluate(
            """
model.to(torch.float32)
was = model.training
model.eval()
try:
    with torch.no_grad():
        losses = [float(F.mse_loss(model(i.float()), t.float())) for i, t in loader]
finally:
    model.train(was)
return sum(losses) / len(losses)
"""
        ),
        "`model.double()` and `model.float()` convert the model itself",
    ),
    wrong(
        "side effect",
        "clips the gradients out of habit (audit: blamed on a backward pass)",
        evaluate(
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            + RESTORED.format(result=MEAN)
        ),
        "as `clip_grad_norm_` does",
    ),
    wrong(
        "side effect",
        "clips the gradients' values",
        evaluate(
            "torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)\n"
            + RESTORED.format(result=MEAN)
        ),
        "it capped each entry at ±0.5, as `clip_grad_value_` does",
    ),
    wrong(
        "bypassed mechanism",
        "inference_mode(False): the flag switches it off",
        evaluate(
            RESTORED.format(result=MEAN).replace(
                "torch.inference_mode()", "torch.inference_mode(False)"
            )
        ),
        "`torch.inference_mode(False)` and `torch.enable_grad()` switch it back on",
    ),
    wrong(
        "right only at the example",
        "a sum reduction divided by the rows (audit: passed; equal only for one output)",
        evaluate(
            RESTORED.format(result=MEAN).replace(
                "float(F.mse_loss(model(x), y))",
                "float(F.mse_loss(model(x), y, reduction='sum')) / len(x)",
            )
        ),
        "that is each row's squared error summed over the model's outputs",
    ),
    wrong(
        "right only at the example",
        "the squared error summed over dim 1, then the mean over rows",
        evaluate(
            RESTORED.format(result=MEAN).replace(
                "float(F.mse_loss(model(x), y))",
                "float(((model(x) - y) ** 2).sum(dim=1).mean())",
            )
        ),
        "on a model with instance norm (running statistics), RReLU and two outputs",
    ),
    right(
        "the mean of the squared errors over every element, by hand",
        evaluate(
            RESTORED.format(result=MEAN).replace(
                "float(F.mse_loss(model(x), y))", "float(((model(x) - y) ** 2).mean())"
            )
        ),
    ),
)
