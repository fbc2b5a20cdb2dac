"""Chapter 06, ``06-dominant-op``: name the operator with the most self CPU time in backward."""

from __future__ import annotations

from tests.banks import bank, right, wrong


def answer(value: str) -> str:
    """The exercise cell: ``dominant`` set to ``value`` (Python source)."""
    return f"dominant = {value}"


BANK = bank(
    "06-dominant-op",
    # --- wrong formula: the wrong column, or the wrong kind of row
    wrong(
        "wrong formula",
        "the backward kernel with the largest total",
        answer('"aten::_embedding_bag_dense_backward"'),
        "large *total*",
    ),
    wrong(
        "wrong formula", "zero_, whose total holds fill_", answer('"aten::zero_"'), "large *total*"
    ),
    wrong(
        "wrong formula", "zeros, whose total holds fill_", answer('"aten::zeros"'), "large *total*"
    ),
    wrong("wrong formula", "a small backward operator", answer('"aten::mm"'), "not the largest"),
    wrong("wrong formula", "the sort in backward", answer('"aten::sort"'), "not the largest"),
    # --- right only at the example: forward's rows, or names that are not operators
    wrong(
        "right only at the example",
        "forward's kernel",
        answer('"aten::_embedding_bag"'),
        "forward only",
    ),
    wrong(
        "right only at the example",
        "forward's entry point",
        answer('"aten::embedding_bag"'),
        "forward only",
    ),
    wrong("right only at the example", "the memory row", answer('"[memory]"'), "not an operator"),
    # --- bypassed mechanism: a node or a label where an operator belongs
    wrong(
        "bypassed mechanism",
        "the backward node",
        answer('"EmbeddingBagBackward0"'),
        "backward node",
    ),
    wrong(
        "bypassed mechanism",
        "the engine's row for the node",
        answer('"autograd::engine::evaluate_function: EmbeddingBagBackward0"'),
        "backward node",
    ),
    wrong("bypassed mechanism", "the backward label", answer('"backward"'), "a label"),
    wrong(
        "bypassed mechanism",
        "the gradient accumulation",
        answer('"torch::autograd::AccumulateGrad"'),
        "backward node",
    ),
    # --- symptom fix: hedging
    wrong(
        "symptom fix",
        "two names in one string",
        answer('"aten::fill_, aten::_embedding_bag_dense_backward"'),
        "one operator",
    ),
    wrong(
        "symptom fix",
        "a typo",
        answer('"aten::fil_"'),
        "no operator called",
    ),
    wrong(
        "symptom fix",
        "the functional name, without the underscore",
        answer('"aten::fill"'),
        "aten::fill_",
    ),
    # --- wrong type or shape
    wrong("wrong type or shape", "a list of one name", answer('["aten::fill_"]'), "a str"),
    wrong("wrong type or shape", "a number", answer("13.4"), "a str"),
    wrong("wrong type or shape", "None", answer("None"), "a str"),
    # --- right answers, written differently from the solution
    right("without the aten:: prefix", answer('"fill_"')),
    right("with spaces around it", answer('"  aten::fill_\\n"')),
    right(
        "read off the notebook's backward table",
        'rows = fastest_rows(bag_report, "backward")\n'
        "dominant = max((n for n in rows if n.startswith('aten::')), key=lambda n: rows[n][1])",
    ),
    right(
        "the largest self time, each operator's fastest of five profiles of its own, computed",
        "fastest = {}\n"
        "for _ in range(5):\n"
        "    report = ah.profiling.profile_ops(bag_loss, indices)\n"
        "    for e in report.profiler.key_averages():\n"
        "        if e.key.startswith('aten::'):\n"
        "            fastest[e.key] = min(fastest.get(e.key, 1e30), e.self_cpu_time_total)\n"
        "dominant = max(fastest, key=fastest.get)",
    ),
    right("the Python spelling of the operator", answer('"torch.ops.aten.fill_"')),
    right("the row itself", answer('bag_report.row("aten::fill_")')),
    right("with an overload's name", answer('"aten::fill_.Scalar"')),
    right("the overload object", answer("torch.ops.aten.fill_.Scalar")),
    right("the default overload, without the prefix", answer('"fill_.default"')),
    # --- issue 25: no right answer may fail because the machine was busy (each operator is
    # read as its fastest of the five runs, which a busy machine does not disturb)
    right("the course's answer, on a machine at any load", answer('"aten::fill_"')),
    right(
        "its own five profiles of backward alone, each operator's fastest",
        "best = {}\n"
        "for _ in range(5):\n"
        "    words.zero_grad()  # a .grad left from the last run would be added to (add_)\n"
        "    scorer.zero_grad()\n"
        "    loss = bag_loss(indices)\n"
        "    with profile(activities=[ProfilerActivity.CPU]) as only_backward:\n"
        "        loss.backward()\n"
        "    for e in only_backward.key_averages():\n"
        "        if e.key.startswith('aten::'):\n"
        "            best[e.key] = min(best.get(e.key, 1e30), e.self_cpu_time_total)\n"
        "words.zero_grad()\n"
        "scorer.zero_grad()\n"
        "dominant = max(best, key=best.get)",
    ),
)
