"""Chapter 05, ``05-freeze``: freeze every layer of an ``nn.Sequential`` but the last."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def freeze(body: str, head: str = "") -> str:
    """The exercise cell: ``head`` before the function, ``body`` as its body."""
    lines = "".join(f"    {line}\n" for line in body.strip().splitlines())
    return f"{head}def freeze_all_but_last(model):\n{lines}"


BANK = bank(
    "05-freeze",
    # --- wrong formula --------------------------------------------------------------------
    wrong(
        "wrong formula",
        "freezes everything",
        freeze("model.requires_grad_(False)"),
        "the last layer is frozen too",
    ),
    wrong(
        "wrong formula",
        "freezes only the last layer",
        freeze("model[-1].requires_grad_(False)"),
        "layers before the last one still get gradients",
    ),
    wrong(
        "wrong formula",
        "freezes only the first layer",
        freeze("model[0].requires_grad_(False)"),
        "Still learning: 1.bias, 1.weight.",
    ),
    wrong(
        "wrong formula",
        "freezes the Linear layers only, not batch norm",
        freeze(
            """
for layer in list(model)[:-1]:
    if isinstance(layer, nn.Linear):
        layer.requires_grad_(False)
"""
        ),
        "Still learning: 1.bias, 1.weight.",
    ),
    wrong(
        "wrong formula",
        "freezes the weights, not the biases",
        freeze(
            """
for name, parameter in model[:-1].named_parameters():
    if name.endswith("weight"):
        parameter.requires_grad_(False)
"""
        ),
        "Still learning: 0.bias, 1.bias.",
    ),
    wrong(
        "wrong formula",
        "sets a module attribute nothing reads",
        freeze(
            """
for layer in model[:-1]:
    layer.requires_grad = False
"""
        ),
        "sets a new attribute that nothing reads",
    ),
    # --- right only at the example --------------------------------------------------------
    wrong(
        "right only at the example",
        "the example's indices, 0 and 1",
        freeze(
            """
model[0].requires_grad_(False)
model[1].requires_grad_(False)
"""
        ),
        "but not for a seven-module network",
    ),
    wrong(
        "right only at the example",
        "names starting with '4.' learn",
        freeze(
            """
for name, parameter in model.named_parameters():
    parameter.requires_grad_(name.startswith("4."))
"""
        ),
        "Hint: find the layers from the model itself",
    ),
    wrong(
        "right only at the example",
        "switches the last layer's bias back on by name",
        freeze(
            """
model.requires_grad_(False)
model[-1].weight.requires_grad_(True)
model[-1].bias.requires_grad_(True)
"""
        ),
        "freezing a seven-module network whose last layer (index 6) has no bias raised",
    ),
    # --- symptom fix ----------------------------------------------------------------------
    wrong(
        "symptom fix",
        "model.eval() instead of freezing",
        freeze("model[:-1].eval()"),
        "`model.eval()` changes dropout and batch norm, not gradients",
    ),
    wrong(
        "symptom fix",
        "zeroes the gradients with hooks",
        freeze(
            """
for parameter in model[:-1].parameters():
    parameter.register_hook(torch.zeros_like)
"""
        ),
        "a hook that detaches or zeroes gradients does not freeze",
    ),
    wrong(
        "symptom fix",
        "detaches the last layer's input with a hook",
        freeze("model[-1].register_forward_pre_hook(lambda module, args: args[0].detach())"),
        "a hook that detaches or zeroes gradients does not freeze",
    ),
    # --- side effect ----------------------------------------------------------------------
    wrong(
        "side effect",
        "freezes the notebook's model, not its argument",
        freeze(
            """
for parameter in net[:-1].parameters():
    parameter.requires_grad_(False)
"""
        ),
        "the notebook's `net`",
    ),
    wrong(
        "side effect",
        "re-initialises the last layer",
        freeze(
            """
model[:-1].requires_grad_(False)
model[-1].reset_parameters()
"""
        ),
        "it changed the values of",
    ),
    wrong(
        "side effect",
        "replaces the last layer with a fresh one",
        freeze(
            """
model.requires_grad_(False)
last = model[-1]
model[-1] = nn.Linear(last.in_features, last.out_features, bias=last.bias is not None)
"""
        ),
        "it replaced layers of the model",
    ),
    wrong(
        "side effect",
        "switches grad mode off for good",
        freeze(
            """
torch.set_grad_enabled(False)
model[:-1].requires_grad_(False)
"""
        ),
        "left grad mode off",
    ),
    # --- wrong type or shape --------------------------------------------------------------
    wrong(
        "wrong type or shape",
        "returns a frozen copy, leaves the model learning",
        freeze(
            """
frozen = deepcopy(model)
frozen[:-1].requires_grad_(False)
return frozen
""",
            head="from copy import deepcopy\n\n\n",
        ),
        "it returned another model",
    ),
    wrong(
        "wrong type or shape",
        "takes a list of layers",
        freeze(
            """
for layer in model[:-1]:
    for parameter in layer:
        parameter.requires_grad_(False)
"""
        ),
        "raised an exception",
    ),
    # --- audit: index slicing, gradients written, attributes, the notebook's optimizer ---
    wrong(
        "right only at the example",
        "freezes all parameters but the last two",
        freeze(
            """
for parameter in list(model.parameters())[:-2]:
    parameter.requires_grad_(False)
"""
        ),
        "Still learning: 4.bias.",
    ),
    wrong(
        "symptom fix",
        "freezes and writes zero gradients",
        freeze(
            """
for parameter in model[:-1].parameters():
    parameter.requires_grad_(False)
    parameter.grad = torch.zeros_like(parameter)
"""
        ),
        "it set the `.grad` of 0.weight, 0.bias, 1.weight, 1.bias",
    ),
    wrong(
        "side effect",
        "also stops batch norm's statistics through momentum",
        freeze(
            """
model[:-1].requires_grad_(False)
for module in model.modules():
    if isinstance(module, nn.BatchNorm1d):
        module.momentum = 0.0
"""
        ),
        "it changed attributes of the model's modules (1.momentum)",
    ),
    wrong(
        "side effect",
        "sets the notebook optimizer's learning rate to zero as well",
        freeze(
            """
model[:-1].requires_grad_(False)
fine_tuner.param_groups[0]["lr"] = 0.0
""",
            head="fine_tuner = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\n",
        ),
        "settings (lr of param group 0)",
    ),
    # --- right ----------------------------------------------------------------------------
    right(
        "everything off, then the last on",
        freeze("model.requires_grad_(False)[-1].requires_grad_(True)"),
    ),
    right(
        "each module in the list but the last",
        freeze(
            """
for layer in list(model.children())[:-1]:
    layer.requires_grad_(False)
"""
        ),
    ),
    right(
        "by name, from the model's length",
        freeze(
            """
last = f"{len(model) - 1}."
for name, parameter in model.named_parameters():
    parameter.requires_grad = name.startswith(last)
"""
        ),
    ),
    right("a slice of the Sequential", freeze("model[:-1].requires_grad_(False)")),
    right(
        "every parameter not in the last layer",
        freeze(
            """
keep = {id(p) for p in model[-1].parameters()}
for parameter in model.parameters():
    if id(parameter) not in keep:
        parameter.requires_grad_(False)
"""
        ),
    ),
    right(
        "also puts the frozen layers in eval mode (passes with a note)",
        freeze(
            """
frozen = model[:-1]
frozen.requires_grad_(False)
frozen.eval()
"""
        ),
        "Note: it also switched",
    ),
    # --- from the fresh-eyes audit: each passed before
    wrong(
        "right only at the example",
        "freezes model[:-2] (the chapter's second-to-last module has no parameters)",
        freeze("model[:-2].requires_grad_(False)"),
        "second-to-last module (a LayerNorm) has parameters",
    ),
    wrong(
        "right only at the example",
        "loops over model[0:-2]",
        freeze(
            """
for layer in model[0:-2]:
    for parameter in layer.parameters():
        parameter.requires_grad = False
"""
        ),
        "Still learning: 3.bias, 3.weight.",
    ),
    wrong(
        "side effect",
        "records the freezing in a buffer",
        freeze(
            """
model[:-1].requires_grad_(False)
model.register_buffer("frozen", torch.tensor(True))
"""
        ),
        "`frozen` (a buffer, added)",
    ),
    wrong(
        "side effect",
        "switches momentum off in every optimizer it finds through gc",
        freeze(
            """
model[:-1].requires_grad_(False)
for thing in gc.get_objects():
    if isinstance(thing, torch.optim.Optimizer):
        thing.param_groups[0]["momentum"] = 0.0
""",
            head="import gc\n\nfine_tuner = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n\n\n",
        ),
        "settings (momentum of param group 0)",
    ),
    # --- issue 25: the model comes with gradients, as in the middle of training ----------
    wrong(
        "symptom fix",
        "freezes, then keeps zeros with zero_grad(set_to_none=False)",
        freeze(
            """
model[:-1].requires_grad_(False)
model.zero_grad(set_to_none=False)
"""
        ),
        "to zeros: a zero gradient kept on a frozen layer still moves it",
    ),
    wrong(
        "symptom fix",
        "zeroes each frozen parameter's gradient in place",
        freeze(
            """
for parameter in model[:-1].parameters():
    parameter.requires_grad_(False)
    if parameter.grad is not None:
        parameter.grad.zero_()
"""
        ),
        "it set the `.grad` of 0.weight, 0.bias, 1.weight, 1.bias to zeros",
    ),
    wrong(
        "side effect",
        "clears every gradient, the last layer's too, with model.zero_grad()",
        freeze(
            """
model.zero_grad()
model[:-1].requires_grad_(False)
"""
        ),
        "it cleared the `.grad` of the last layer (4.weight, 4.bias)",
    ),
    right(
        "freezes and clears the frozen layers' gradients (passes with a note)",
        freeze(
            """
for parameter in model[:-1].parameters():
    parameter.requires_grad_(False)
    parameter.grad = None
"""
        ),
        "Note: it also cleared the `.grad` of the frozen 0.weight, 0.bias, 1.weight, 1.bias",
    ),
    # --- from the round-4 learner audit: each passed, or was told the wrong cause, before ---
    wrong(
        "side effect",
        "freezes and leaves a no-op forward hook on the last layer",
        freeze(
            "model[:-1].requires_grad_(False)\nmodel[-1].register_forward_hook(lambda m, i, o: None)"
        ),
        "it left hooks on 4: they would run on every later forward or backward pass",
    ),
    wrong(
        "side effect",
        "freezes and leaves a backward pre-hook on the last layer",
        freeze(
            "model[:-1].requires_grad_(False)\n"
            "model[-1].register_full_backward_pre_hook(lambda m, g: None)"
        ),
        "it left hooks on 4:",
    ),
    wrong(
        "side effect",
        "freezes and leaves a tensor hook on the last weight",
        freeze("model[:-1].requires_grad_(False)\nmodel[-1].weight.register_hook(lambda g: g)"),
        "it left hooks on 4.weight",
    ),
    wrong(
        "side effect",
        "a backward pre-hook on the last layer that stops nothing, frozen with a hook first",
        freeze(
            "model[-1].register_full_backward_pre_hook(lambda m, g: None)\n"
            "model[:-1].requires_grad_(False)"
        ),
        "Remove a hook you add",
    ),
    wrong(
        "side effect",
        "freezes and converts the model to float64 (audit: told 'changed the values')",
        freeze("model.double()\nmodel[:-1].requires_grad_(False)"),
        "it changed the dtype of the model's parameters and buffers",
    ),
    wrong(
        "side effect",
        "freezes and converts the model to bfloat16",
        freeze("model[:-1].requires_grad_(False)\nmodel.to(torch.bfloat16)"),
        "now bfloat16",
    ),
    wrong(
        "right only at the example",
        "freezes the first entries of named_children sorted by name (audit: passed)",
        freeze(
            """
kids = sorted(model.named_children())
for _, m in kids[:-1]:
    m.requires_grad_(False)
"""
        ),
        "not for an eleven-module network",
    ),
    wrong(
        "right only at the example",
        "the module with the largest name kept learning",
        freeze(
            """
last = max(name for name, _ in model.named_children())
for name, m in model.named_children():
    if name != last:
        m.requires_grad_(False)
"""
        ),
        "find the layers from the model itself",
    ),
    right(
        "the last child by position, from named_children",
        freeze(
            """
*earlier, _ = model.named_children()
for _, m in earlier:
    m.requires_grad_(False)
"""
        ),
    ),
)
