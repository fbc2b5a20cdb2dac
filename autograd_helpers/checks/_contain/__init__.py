"""Containment: what learner code changed or ran, judged in plain words and put back.

Private; used by every chapter's checkers (``checks/function/`` ... ``checks/profiler/``):

- :mod:`.contained`: :class:`~.contained.Contained`, the snapshot of what learner code can
  reach by name (values, ``requires_grad``, hooks, flags, buffers, globals, lists, class
  attributes), with :mod:`.names`, :mod:`.reach` and :mod:`.writers` (what it reaches and
  how it writes) and :mod:`.modules` (models, optimizers and their state);
- :mod:`.patched` and :mod:`.global_calls`: module functions replaced for a while by ones
  that note each call, and the calls on torch's process-wide state they catch (a reseed);
- :mod:`.watch` (with :mod:`.watch_vmap`): the one watcher of what learner code calls, the
  backward passes it runs and what it builds; :mod:`.nan_patching`, a NaN it replaced;
- :mod:`.saved_hooks_switch`: the saved-tensor hooks switch, beyond the shared snapshot.

It may use the core (:mod:`autograd_helpers.checks._core`), never a chapter's package
(``tests/test_layering.py``).
"""
