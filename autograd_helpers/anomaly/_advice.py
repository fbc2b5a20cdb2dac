"""What to do about a saved tensor changed in place: the fix depends on who changed it.

A copy (``y.clone()``) fixes an in-place op on a tensor fn computed. It fixes nothing when
an optimizer's ``step()`` (or a hand-written update) changed a parameter between the
forward pass that saved it and the backward pass: backward must differentiate the forward
that used the old values, so the order of the calls is what is wrong. A forward op that
changes a parameter as its side effect (``nn.Embedding`` with ``max_norm`` renormalises
its weight) is different again: there a copy for the other use is the fix, as PyTorch's
documentation says. And a change through ``.data`` raises no error at all: the gradient
is silently wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CARRIED",
    "VIEW_UNCHANGED",
    "Changer",
    "inplace_fix",
    "reused_fix",
    "running_statistics_fix",
    "silent_fix",
]


@dataclass(frozen=True)
class Changer:
    """Who changed the saved tensor.

    ``kind`` is ``"optimizer"`` (an optimizer's ``step()`` updated a parameter),
    ``"parameter"`` (a leaf, updated by hand; ``frozen`` when it does not require grad),
    ``"forward"`` (an op of
    the forward pass, ``op``, changed a parameter as its side effect), ``"input"`` (fn
    changed its own input), ``"computed"`` (a tensor fn computed), or ``""`` (not found).
    ``name`` names the input (``"`x` (argument 0)"``), or gives a parameter's shape when
    autograd saved a view of it (``"of shape (1, 4)"``).
    """

    kind: str
    name: str = ""
    op: str = ""
    frozen: bool = False  # the parameter does not require grad (`requires_grad=False`)
    buffer: bool = False  # no `nn.Parameter` at all: a module's buffer, or a constant tensor
    in_forward: bool = False  # a module's own forward changed it (after using it)
    expression: str = ""  # what the changing line calls it: "self.scale"
    rewrite: str = ""  # that line out of place: "self.scale = self.scale.mul(0.9)"


INTERMEDIATE = (
    "Backward needs the values it saved. Fix: compute a new tensor instead of changing this "
    "one (`y = y + 1`, not `y.add_(1)` or `y += 1`), or change a copy (`y = y.clone()` "
    "before the in-place line)."
)
_COPY_WONT_HELP = (
    "A copy would not help: backward must differentiate the forward pass that used the old values."
)
_AFTER_FORWARD = (
    "or run the forward pass again after the update, so that the loss uses the updated parameters"
)


VIEW_UNCHANGED = (
    "The values it saved did not change: the saved tensor is a view{base}, and the write "
    "went to another part of it. All views of a tensor share their base's version counter, "
    "so autograd sees a write to any part of the base as a change of every view, and "
    "raises. Fix: save a copy of the part you need (`t = y[0].clone().sin()`, a clone "
    "before the op that saves it), or make the write first, before the view is taken and "
    "saved (or write into a copy: `y = y.clone()` before the in-place line)."
)
CARRIED = (
    "This backward, run in a loop, reached back into a previous iteration's graph through "
    "a tensor carried from one iteration to the next (a recurrent hidden state `h`, say): "
    "it still hangs on the graph of every earlier step, whose saved parameters the "
    "optimizer's `step()` has updated since (and `retain_graph=True` only kept that old "
    "graph alive). Fix: detach the carried tensor at each iteration (`h = h.detach()` "
    "before the next step: truncated backpropagation through time), and drop "
    "`retain_graph=True`. "
)


def reused_fix(changer: Changer, line: str, cut: bool) -> str:
    """The fix for a graph made once and reused by every iteration of a loop whose optimizer
    steps in between (a GAN's ``fake = netG(z)`` before the generator's steps), as sentences.

    Detaching what is reused would silence the error and the gradient with it: with
    ``cut``, the parameters that made it get no gradient from this loss, and their
    optimizer steps without it. So the fix that keeps the gradient leads.

    Example::

        >>> fix = reused_fix(Changer("optimizer"), "in step: fake = netG(z)", cut=True)
        >>> fix.index("compute it again") < fix.index("Do not `.detach()`")
        True
    """
    where = f", by the line {line}" if line else ""
    moved = f"`{line.partition(': ')[2]}`" if ": " in line else "the line that makes it"
    warning = (
        " Do not `.detach()` it instead: that silences the error and the gradient with it, "
        "so the parameters that made it (a GAN's generator) would get no gradient from this "
        "loss, and their optimizer would step without one."
        if cut
        else ""
    )
    return (
        f"It is {_parameter(changer)}, and the optimizer's `step()` updated it in place after "
        "the forward pass that saved it. This backward, run in a loop, reached back into a "
        f"graph made once, before the loop{where}: every iteration reuses that one output, "
        "and `retain_graph=True` only kept its old graph alive. Fix: compute it again after "
        f"each step (move {moved} into the loop, before the loss that uses it), so that "
        "each backward differentiates the parameters' current values; `retain_graph=True` "
        f"is then not needed there.{warning}"
    )


UNKNOWN = (
    "Which operation changed it could not be found, so the fix cannot be chosen for you: if "
    "it is a tensor fn computed, compute a new tensor instead of changing it, or change a "
    "copy (`y = y.clone()` first); if it is a parameter that an optimizer's `step()` "
    "updated, call every `backward()` before any `step()`, or run the forward pass again "
    "after the step."
)
_RENORMALISES = {
    "embedding": " (`nn.Embedding` and `F.embedding` with `max_norm` renormalise, in place, "
    "the rows they look up)",
}


def _parameter(changer: Changer) -> str:
    if changer.buffer:
        what = (
            "a buffer (a tensor a module registers with `register_buffer`, such as batch "
            "norm's `running_mean` and `running_var`, or a constant tensor), not a parameter"
        )
        return what if not changer.name else f"(a view of) {what}, {changer.name}"
    return "a parameter" if not changer.name else f"(a view of) a parameter {changer.name}"


def _leaf(changer: Changer) -> str:
    """What kind of leaf the parameter is: one that requires grad, or a frozen one."""
    if changer.buffer:
        return (
            "like a frozen parameter, it is a leaf that does not require grad, whose values "
            "backward needs for the gradient of another input (as an eval-mode batch norm "
            "needs its running statistics)"
        )
    if changer.frozen:
        return (
            "a leaf that does not require grad (frozen, `requires_grad=False`: backward needs "
            "it for the gradient of another input, not for its own)"
        )
    return "a leaf that requires grad"


def _side_effect(changer: Changer) -> str:
    op = changer.op.removesuffix("(inplace=True)")
    example = (
        "`emb.weight.clone() @ W.t()` where it used `emb.weight`, as PyTorch's documentation "
        "of `max_norm` does"
        if op == "embedding"
        else "`weight.clone()` where it used `weight`"
    )
    return (
        f"It is {_parameter(changer)}, {_leaf(changer)}, and `{op}` changed it in "
        "place as part of the forward pass, after another line had saved it for backward"
        f"{_RENORMALISES.get(op, '')}: the op's own side effect, not an update made too "
        f"early. Fix: in the line that saved it, use a copy of the parameter ({example}), "
        f"so that `{op}` changes the parameter but not what backward saved; or call `{op}` "
        "before that line, so that the line uses the changed values."
    )


def inplace_fix(changer: Changer) -> str:
    """The fix for a saved tensor that ``changer`` changed in place, as sentences.

    Example::

        >>> optimizer = inplace_fix(Changer("optimizer"))
        >>> "`step()`" in optimizer, "clone" in optimizer  # a copy is not the fix
        (True, False)
    """
    if changer.kind == "optimizer":
        return (
            f"It is {_parameter(changer)}, and the optimizer's `step()` updated it in place "
            f"after a forward pass saved it and before this backward. {_COPY_WONT_HELP} Fix: "
            "call every `backward()` before any `step()` (with two losses, as in a GAN: both "
            f"backward passes, then the optimizers' steps), {_AFTER_FORWARD}, or `.detach()` "
            "what the second loss should not differentiate."
        )
    if changer.kind == "parameter" and changer.buffer and changer.in_forward:
        use = f"`{changer.expression}.clone()`" if changer.expression else "a `.clone()` of it"
        update = (
            f"`{changer.rewrite}`"
            if changer.rewrite
            else "`self.buf = self.buf * 0.9`, not `self.buf.mul_(0.9)`"
        )
        return (
            f"It is {_parameter(changer)}; {_leaf(changer)}. The module's own forward changed "
            f"it in place (`{changer.op}`) after a line of that forward had used it, and "
            f"backward needs the values that line used. Fix: use a copy where it is used "
            f"({use} in that line), or update it out of place after its use ({update}), "
            "which gives the module a new tensor and leaves the saved one alone."
        )
    if changer.kind == "parameter" and changer.buffer:
        return (
            f"It is {_parameter(changer)}; {_leaf(changer)}. It was changed in place after a "
            f"forward pass saved it and before this backward. {_COPY_WONT_HELP} Fix: change "
            f"it after backward, {_AFTER_FORWARD}."
        )
    if changer.kind == "parameter":
        return (
            f"It is {_parameter(changer)}, {_leaf(changer)}, updated in place after "
            f"a forward pass saved it and before this backward: an update made too early. "
            f"{_COPY_WONT_HELP} Fix: update after backward (as `optimizer.step()` follows "
            f"`loss.backward()`), {_AFTER_FORWARD}."
        )
    if changer.kind == "forward":
        return _side_effect(changer)
    if changer.kind == "":
        return UNKNOWN
    if changer.kind == "input":
        return (
            f"It is fn's own input {changer.name}: changing it in place changes the caller's "
            "tensor too, and backward needed its old values. Fix: compute a new tensor "
            "(`x = x.relu()`, not `x.relu_()` or `x += 1`; on a block's input, `nn.ReLU()`, "
            "not `nn.ReLU(inplace=True)`), or change a copy (`x = x.clone()` first)."
        )
    return INTERMEDIATE


def silent_fix(parameter: bool) -> str:
    """Why a change through ``.data`` is dangerous, and the fix, as sentences.

    ``parameter``: the tensor is a leaf that requires grad (updated on purpose, too early).

    Example::

        >>> "`.detach()`" in silent_fix(parameter=False)
        True
    """
    then = (
        "update it after backward, inside `torch.no_grad()`"
        if parameter
        else "compute a new tensor (`y = y * 0`) or change a copy (`y = y.clone()` first)"
    )
    return (
        "This is the danger of `.data`: it bypasses the version counter, so autograd cannot "
        "see the change; backward runs without an error and computes the gradient from the "
        "changed values, silently wrong. Fix: change values through `.detach()` or inside "
        "`torch.no_grad()`, which autograd checks (it then raises instead of computing a "
        f"wrong gradient), and to keep what backward needs, {then}."
    )


def running_statistics_fix(name: str) -> str:
    """Why batch norm's ``running_mean``/``running_var`` changed unseen, and the fix.

    Example::

        >>> "eval-mode" in running_statistics_fix("running_var")
        True
    """
    return (
        f"it is batch norm's `{name}`. An eval-mode forward saves the running statistics, "
        "and its backward uses them; a train-mode forward updates them in place (with "
        "momentum: `running = (1 − momentum) × running + momentum × batch's`, the variance "
        "unbiased, divided by n − 1) without moving their version, so autograd cannot see "
        "the change: backward runs without an error and computes the eval-mode gradient "
        "from the new statistics, silently wrong. Fix: run that backward before the "
        "train-mode forward, or keep the two apart (a `copy.deepcopy` of the model for the "
        "eval-mode pass)."
    )
