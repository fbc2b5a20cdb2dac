"""Chapter 06, ``06-regions``: label a training step's four parts, and name the slowest.

The exercise has two solution cells: ``labelled_step`` and ``slowest``.
"""

from __future__ import annotations

from textwrap import dedent, indent

from tests.banks import bank, right, wrong

DATA = "batch = normalise_each(samples)"
FORWARD = "loss = model(batch).square().mean()"
BACKWARD = "optimizer.zero_grad()\nloss.backward()"
UPDATE = "optimizer.step()"
# The preparation as the chapter writes it after the exercise (normalise_batch), inline.
WHOLE_BATCH = (
    "batch = (samples - samples.mean(dim=1, keepdim=True)) / samples.std(dim=1, keepdim=True)"
)


def step(
    data: str = DATA,
    forward: str = FORWARD,
    backward: str = BACKWARD,
    update: str = UPDATE,
    *,
    labels: tuple[str, str, str, str] = ("data", "forward", "backward", "update"),
    before: str = "",
    after: str = "",
    header: str = "",
) -> str:
    """``labelled_step`` with each part in its region (``before``/``after``: outside them)."""
    lines = [
        f"{header.strip()}\n\n\n" if header else "",
        "def labelled_step(model, optimizer, samples):\n",
    ]
    if before:
        lines.append(indent(dedent(before).strip(), "    ") + "\n")
    for label, body in zip(labels, (data, forward, backward, update), strict=True):
        lines.append(f'    with record_function("{label}"):\n')
        lines.append(indent(dedent(body).strip() or "pass", "        ") + "\n")
    if after:
        lines.append(indent(dedent(after).strip(), "    ") + "\n")
    return "".join(lines)


SLOWEST = 'slowest = "data"'


def fastest_of(steps: int) -> str:
    """``slowest`` computed as the checker measures: each label's fastest of ``steps`` steps."""
    return dedent(
        """
        labels = ("data", "forward", "backward", "update")
        fastest = {}
        for _ in range(STEPS):
            with profile(activities=[ProfilerActivity.CPU]) as timing:
                labelled_step(net, sgd, samples)
            for e in timing.key_averages():
                if e.key in labels:
                    fastest[e.key] = min(fastest.get(e.key, 1e30), e.cpu_time_total)
        slowest = max(fastest, key=fastest.get)
        """
    ).replace("STEPS", str(steps))


def answer(labelled: str, slowest: str = SLOWEST) -> tuple[str, str]:
    """The two solution cells."""
    return (labelled, slowest)


BANK = bank(
    "06-regions",
    # --- wrong formula: the step computes something other than the specified step
    wrong(
        "wrong formula",
        "the loss of the raw samples, not of the prepared batch",
        answer(step(forward="loss = model(samples).square().mean()")),
        "from the raw `samples`",
    ),
    wrong(
        "wrong formula",
        "a summed loss",
        answer(step(forward="loss = model(batch).square().sum()")),
        "(the sum over the batch, not the mean)",
    ),
    wrong(
        "wrong formula",
        "forgets the square",
        answer(step(forward="loss = model(batch).mean()")),
        "not those of the specified loss",
    ),
    wrong(
        "wrong formula",
        "normalises by the whole batch's statistics",
        answer(step(data="batch = (samples - samples.mean()) / samples.std()")),
        "not those of the specified loss",
    ),
    wrong(
        "wrong formula",
        "a typo in a label",
        answer(step(labels=("Data", "forward", "backward", "update"))),
        "regions called 'Data'",
    ),
    wrong(
        "wrong formula",
        "the slowest region read off the self column",
        answer(step(), 'slowest = "forward"'),
        "is not the slowest",
    ),
    wrong(
        "wrong formula",
        "the update before backward",
        answer(
            step(
                backward="optimizer.zero_grad()\noptimizer.step()",
                update="loss.backward()",
                labels=("data", "forward", "update", "backward"),
            )
        ),
        "stepping before backward has none to use yet",
    ),
    wrong(
        "wrong formula",
        "steps with the previous step's gradients",
        answer(
            step(
                backward="optimizer.step()",
                update="optimizer.zero_grad()\nloss.backward()",
                labels=("data", "forward", "update", "backward"),
            )
        ),
        "`optimizer.step()` ran before `loss.backward()`",
    ),
    # --- symptom fix
    wrong(
        "symptom fix",
        "forgets to zero the gradients",
        answer(step(backward="loss.backward()")),
        "zero",
    ),
    wrong(
        "symptom fix",
        "zeroes the gradients between backward and the step",
        answer(step(backward="loss.backward()", update="optimizer.zero_grad()\noptimizer.step()")),
        "zeroing between backward and step",
    ),
    wrong(
        "symptom fix",
        "steps twice to make up for a slow start",
        answer(step(update="optimizer.step()\noptimizer.step()")),
        "2 times",
    ),
    # --- side effect
    wrong(
        "side effect",
        "normalises the caller's samples in place",
        answer(
            step(
                data="samples -= samples.mean(dim=1, keepdim=True)\n"
                "samples /= samples.std(dim=1, keepdim=True)\nbatch = samples"
            )
        ),
        "changed `samples` in place",
    ),
    wrong(
        "side effect",
        "leaves grad mode off after the update",
        answer(step(update="torch.set_grad_enabled(False)\noptimizer.step()")),
        "grad mode",
    ),
    wrong(
        "side effect",
        "leaves the model in eval mode",
        answer(step(forward="model.eval()\nloss = model(batch).square().mean()")),
        "eval mode",
    ),
    wrong(
        "side effect",
        "more threads, for speed",
        answer(step(before="torch.set_num_threads(4)")),
        "threads",
    ),
    wrong(
        "side effect",
        "halves the learning rate after each step",
        answer(step(after='for group in optimizer.param_groups:\n    group["lr"] *= 0.5')),
        "it changed the optimizer's settings (lr of param group 0",
    ),
    wrong(
        "side effect",
        "turns momentum on inside the step",
        answer(step(before='optimizer.param_groups[0]["momentum"] = 0.9')),
        "momentum of param group 0",
    ),
    wrong(
        "side effect",
        "reseeds torch inside the step",
        answer(step(before="torch.manual_seed(123)")),
        "changed torch's random state",
    ),
    wrong(
        "side effect",
        "registers a hook on the optimizer",
        answer(step(after="optimizer.register_step_post_hook(lambda *args: None)")),
        "registered a step post-hook on the optimizer",
    ),
    wrong(
        "side effect",
        "keeps every loss in a global list (and so every step's graph)",
        answer(step(header="LOSSES = []", after="LOSSES.append(loss)")),
        "the global list `LOSSES`",
    ),
    wrong(
        "side effect",
        "counts the steps in a global dict",
        answer(step(header='STATS = {"n": 0}', after='STATS["n"] += 1')),
        "`STATS`",
    ),
    wrong(
        "side effect",
        "keeps the last loss on the model",
        answer(step(after="model.last_loss = loss.item()")),
        "`model.last_loss`",
    ),
    wrong(
        "side effect",
        "counts the steps on the optimizer",
        answer(step(after='optimizer.steps_done = getattr(optimizer, "steps_done", 0) + 1')),
        "`optimizer.steps_done`",
    ),
    wrong(
        "side effect",
        "changes the optimizer's defaults",
        answer(step(after='optimizer.defaults["lr"] = 1.0')),
        "`optimizer.defaults`",
    ),
    wrong(
        "side effect",
        "writes its own entry into the optimizer's state",
        answer(step(after='for p in model.parameters():\n    optimizer.state[p]["junk"] = 1')),
        "`junk` in its state",
    ),
    wrong(
        "side effect",
        "a stray momentum buffer for a tensor that is no parameter",
        answer(step(after='optimizer.state[torch.zeros(3)]["momentum_buffer"] = torch.zeros(3)')),
        "a tensor that is not one of its parameters",
    ),
    wrong(
        "side effect",
        "reseeds NumPy inside the step",
        answer(step(header="import numpy as np", before="np.random.seed(0)")),
        "NumPy's global random state",
    ),
    wrong(
        "side effect",
        "draws a NumPy random number inside the step",
        answer(step(header="import numpy as np", after="jitter = np.random.rand()")),
        "NumPy's global random state",
    ),
    wrong(
        "side effect",
        "reseeds Python's random inside the step",
        answer(step(header="import random", before="random.seed(0)")),
        "Python's random state",
    ),
    wrong(
        "side effect",
        "makes the caller's samples require grad",
        answer(step(before="samples.requires_grad_()")),
        "now require grad",
    ),
    # --- issue 25, learner audit: the table cell runs the step on `net` and `sgd` before the
    # check (the bank runs it too, as the learner does): what the step leaves is already in
    # the notebook when the check starts, and is judged from the course's settings
    wrong(
        "side effect",
        "flush-denormal on (the table cell ran it first)",
        answer(step(before="torch.set_flush_denormal(True)")),
        "denormal",
    ),
    wrong(
        "side effect",
        "flush-denormal on in 'update' (the table cell ran it first)",
        answer(step(update="torch.set_flush_denormal(True)\noptimizer.step()")),
        "Put it back with `torch.set_flush_denormal(False)`",
    ),
    wrong(
        "side effect",
        "default dtype float64 (the table cell ran it first)",
        answer(step(before="torch.set_default_dtype(torch.float64)")),
        "dtype",
    ),
    wrong(
        "side effect",
        "default dtype float64 after the update (the table cell ran it first)",
        answer(step(after="torch.set_default_dtype(torch.float64)")),
        "default dtype torch.float64, not the course's setting",
    ),
    wrong(
        "side effect",
        "two threads in 'data' (the table cell ran it first)",
        answer(step(data="torch.set_num_threads(2)\nbatch = normalise_each(samples)")),
        "the table cell ran your step",
    ),
    wrong(
        "side effect",
        "grad mode left off after the step (the table cell raised on its second call)",
        answer(step(after="torch.set_grad_enabled(False)")),
        "grad mode",
    ),
    wrong(
        "side effect",
        "momentum turned on, zeroing to zeros (the table cell ran it first)",
        answer(
            step(
                before='optimizer.param_groups[0]["momentum"] = 0.9',
                backward="optimizer.zero_grad(set_to_none=False)\nloss.backward()",
            )
        ),
        "momentum",
    ),
    wrong(
        "side effect",
        "weight decay turned on (the table cell ran it first)",
        answer(step(after='optimizer.param_groups[0]["weight_decay"] = 1e-4')),
        "weight_decay of param group 0: 0.0001, where `optimizer.defaults`",
    ),
    wrong(
        "side effect",
        "the model left in eval mode by train(False) (the table cell ran it first)",
        answer(step(after="model.train(False)")),
        "the notebook's `net` is in eval mode",
    ),
    wrong(
        "symptom fix",
        "clips the gradients' norm in backward",
        answer(
            step(
                backward="optimizer.zero_grad()\nloss.backward()\n"
                "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)"
            )
        ),
        "clip_grad_norm_",
    ),
    wrong(
        "symptom fix",
        "caps each gradient value in backward",
        answer(
            step(
                backward="optimizer.zero_grad()\nloss.backward()\n"
                "torch.nn.utils.clip_grad_value_(model.parameters(), 0.01)"
            )
        ),
        "each value capped at ±0.01",
    ),
    # --- bypassed mechanism
    wrong(
        "bypassed mechanism",
        "the batch normalised in Python before 'data', only turned into a tensor in it",
        answer(
            step(
                header="import statistics",
                before="rows = [[(v - statistics.mean(r)) / statistics.stdev(r) for v in r]\n"
                "        for r in samples.tolist()]",
                data="batch = torch.tensor(rows)",
            )
        ),
        "`samples.tolist()`) ran outside every region, not in 'data'",
    ),
    wrong(
        "bypassed mechanism",
        "samples read into a list before 'data', the statistics inside it",
        answer(
            step(
                before="rows = samples.tolist()",
                data="t = torch.tensor(rows)\n"
                "batch = (t - t.mean(1, keepdim=True)) / t.std(1, keepdim=True)",
            )
        ),
        "`samples.tolist()`) ran outside every region, not in 'data'",
    ),
    wrong(
        "bypassed mechanism",
        "updates the parameters by hand instead of optimizer.step()",
        answer(
            step(
                update="with torch.no_grad():\n    for g in optimizer.param_groups:\n"
                "        for p in g['params']:\n            p.add_(p.grad, alpha=-g['lr'])"
            )
        ),
        "by hand, never with `optimizer.step()`",
    ),
    wrong(
        "bypassed mechanism",
        "backward inside optimizer.step's closure",
        answer(
            step(
                backward="optimizer.zero_grad()",
                update="optimizer.step(lambda: loss.backward() or loss)",
            )
        ),
        "inside `optimizer.step(closure)`",
    ),
    wrong(
        "bypassed mechanism",
        "opens a profiler of its own",
        answer(
            step(header="from torch.profiler import profile as _profile").replace(
                "def labelled_step(model, optimizer, samples):\n",
                "def _inner(model, optimizer, samples):\n",
            )
            + "\n\ndef labelled_step(model, optimizer, samples):\n"
            "    with _profile():\n        _inner(model, optimizer, samples)\n"
        ),
        "a profiler of its own",
    ),
    wrong(
        "bypassed mechanism",
        "empty regions, the work after them",
        answer(
            step(
                data="",
                forward="",
                backward="",
                update="",
                after="train_step(model, optimizer, samples)",
            )
        ),
        "ran outside every region",
    ),
    wrong(
        "symptom fix",
        "a first try at the data left in, outside every region",
        answer(step(before="normalise_each(samples)")),
        "operators run outside the four regions",
    ),
    wrong(
        "bypassed mechanism",
        "the batch prepared before the regions, a copy in 'data'",
        answer(
            step(
                before="batch = (samples - samples.mean(dim=1, keepdim=True))"
                " / samples.std(dim=1, keepdim=True)",
                data="batch = batch.clone()",
            )
        ),
        "the batch preparation (the work on `samples`",
    ),
    wrong(
        "bypassed mechanism",
        "half of the batch preparation before the regions",
        answer(
            step(
                before="centred = samples - samples.mean(dim=1, keepdim=True)",
                data="batch = centred / samples.std(dim=1, keepdim=True)",
            )
        ),
        "part of the batch preparation",
    ),
    wrong(
        "bypassed mechanism",
        "regions entered by hand and never closed",
        answer(
            dedent(
                """
                def labelled_step(model, optimizer, samples):
                    record_function("data").__enter__()
                    batch = normalise_each(samples)
                    record_function("forward").__enter__()
                    loss = model(batch).square().mean()
                    record_function("backward").__enter__()
                    optimizer.zero_grad()
                    loss.backward()
                    record_function("update").__enter__()
                    optimizer.step()
                """
            )
        ),
        "never closed them",
    ),
    wrong(
        "bypassed mechanism",
        "the old step, unlabelled",
        answer(
            "def labelled_step(model, optimizer, samples):\n"
            "    train_step(model, optimizer, samples)\n"
        ),
        "there is no region called",
    ),
    wrong(
        "bypassed mechanism",
        "regions nested",
        answer(
            step(data="", forward="batch = normalise_each(samples)\n" + FORWARD)
            .replace('    with record_function("data"):\n        pass\n', "")
            .replace(
                '    with record_function("forward"):\n',
                '    with record_function("forward"), record_function("data"):\n',
            )
        ),
        "'data' is inside 'forward'",
    ),
    wrong(
        "bypassed mechanism",
        "the loss computed in backward",
        answer(
            step(
                forward="prediction = model(batch)",
                backward="loss = prediction.square().mean()\n" + BACKWARD,
            )
        ),
        "the loss",
    ),
    # --- right only at the example
    wrong(
        "right only at the example",
        "trains the notebook's net, not its argument",
        answer(
            step(
                forward="loss = net(batch).square().mean()",
                backward="sgd.zero_grad()\nloss.backward()",
                update="sgd.step()",
            )
        ),
        "the model it was given",
    ),
    wrong(
        "right only at the example",
        "a loop over exactly 128 samples",
        answer(
            step(
                data="batch = torch.stack([(samples[i] - samples[i].mean()) / samples[i].std() "
                "for i in range(128)])"
            )
        ),
        "37 samples",
    ),
    # --- wrong type or shape
    wrong(
        "wrong type or shape",
        "slowest as a list",
        answer(step(), 'slowest = ["data"]'),
        "one of the labels",
    ),
    wrong(
        "wrong type or shape",
        "slowest as a number",
        answer(step(), "slowest = 0"),
        "one of the labels",
    ),
    # --- right answers, written differently from the solution
    right(
        "zero_grad at the top, outside every region",
        answer(step(before="optimizer.zero_grad()", backward="loss.backward()")),
        "outside the four regions: fine",
    ),
    right(
        "record_function imported from the legacy profiler, under another name",
        answer(
            step(header="from torch.autograd.profiler import record_function as label").replace(
                "record_function(", "label("
            )
        ),
    ),
    right(
        "record_function as decorators on helper functions",
        answer(
            dedent(
                """
                @record_function("data")
                def prepare(samples):
                    return normalise_each(samples)


                @record_function("forward")
                def compute_loss(model, batch):
                    prediction = model(batch)
                    return (prediction**2).mean()


                @torch.profiler.record_function("backward")
                def differentiate(model, loss):
                    model.zero_grad(set_to_none=True)
                    loss.backward()


                @torch.profiler.record_function("update")
                def update(optimizer):
                    optimizer.step()


                def labelled_step(model, optimizer, samples):
                    batch = prepare(samples)
                    loss = compute_loss(model, batch)
                    differentiate(model, loss)
                    update(optimizer)
                """
            )
        ),
    ),
    right(
        "MSE against zeros, torch.autograd.backward, the batch prepared without grad",
        answer(
            step(
                data="with torch.no_grad():\n    batch = torch.stack([(s - s.mean()) / s.std() "
                "for s in samples])",
                forward="out = model(batch)\nloss = F.mse_loss(out, torch.zeros_like(out))",
                backward="optimizer.zero_grad(set_to_none=False)\ntorch.autograd.backward(loss)",
            )
        ),
    ),
    right(
        "slowest computed from profiles of the step (the fastest of three, as the checker)",
        answer(
            step(),
            fastest_of(3),
        ),
    ),
    right("slowest with another capitalisation", answer(step(), 'slowest = "Data"')),
    right(
        "regions entered and left by hand",
        answer(
            dedent(
                """
                def labelled_step(model, optimizer, samples):
                    region = torch.profiler.record_function("data")
                    region.__enter__()
                    batch = normalise_each(samples)
                    region.__exit__(None, None, None)
                    with torch.profiler.record_function("forward"):
                        loss = torch.mean(model(batch) ** 2)
                    with torch.profiler.record_function("backward"):
                        optimizer.zero_grad()
                        loss.backward()
                    with torch.profiler.record_function("update"):
                        optimizer.step()
                """
            )
        ),
    ),
    # --- issue 25: the preparation written on the whole batch, as the chapter shows after
    # the exercise: no region leads by much, and timing noise must not fail a right answer
    right(
        "the batch prepared on the whole batch, slowest read as each label's fastest of five",
        answer(
            step(data=WHOLE_BATCH),
            fastest_of(5),
        ),
    ),
    right(
        "the batch prepared on the whole batch, backward named as the slowest",
        answer(step(data=WHOLE_BATCH), 'slowest = "backward"'),
    ),
    # --- learner audit of region_times (issue 25, last round): the table cell between the two
    # solution cells must rebind none of the learner's names
    right(
        "the label names kept in a global dict called labels",
        answer(
            dedent(
                """
                labels = {"prep": "data", "fwd": "forward", "bwd": "backward", "opt": "update"}


                def labelled_step(model, optimizer, samples):
                    with record_function(labels["prep"]):
                        batch = normalise_each(samples)
                    with record_function(labels["fwd"]):
                        loss = model(batch).square().mean()
                    with record_function(labels["bwd"]):
                        optimizer.zero_grad()
                        loss.backward()
                    with record_function(labels["opt"]):
                        optimizer.step()
                """
            )
        ),
    ),
    right(
        "the regions opened by a helper context manager called region",
        answer(
            dedent(
                """
                import contextlib


                @contextlib.contextmanager
                def region(name):
                    with record_function(name):
                        yield


                def labelled_step(model, optimizer, samples):
                    with region("data"):
                        batch = normalise_each(samples)
                    with region("forward"):
                        loss = model(batch).square().mean()
                    with region("backward"):
                        optimizer.zero_grad()
                        loss.backward()
                    with region("update"):
                        optimizer.step()
                """
            )
        ),
    ),
    wrong(
        "bypassed mechanism",
        "the whole batch prepared, 'update' named without the table (its profile thrown away)",
        answer(step(data=WHOLE_BATCH), 'step_profile = None\nslowest = "update"'),
        "your regions are right, but 'update' is not",
    ),
)
