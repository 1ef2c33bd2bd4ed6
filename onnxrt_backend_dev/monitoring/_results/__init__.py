"""Saved results and their comparison: a versioned JSON schema (:mod:`.schema`), the
environment a result was measured in (:mod:`.environment`), saving and loading with checks
(:mod:`.store`, through the one reader of untrusted files), the builders of each command's
payload (:mod:`.payloads`), repeated runs of a program in child processes, sampled
(:mod:`.sampled_child`) or under cProfile (:mod:`.runner`), one side's figures per
function and call path (:mod:`.tables`), the comparison of profiles (:mod:`.diff`), the
judgement of a headline figure and the gate's answers (:mod:`.decide`, shared with the
pytest plugin's gate, :mod:`.gate`), the comparison of two results and its verdict
(:mod:`.compare`, :mod:`.change`, :mod:`.keys`) and its renderers (:mod:`.render`,
:mod:`.flame`)."""
