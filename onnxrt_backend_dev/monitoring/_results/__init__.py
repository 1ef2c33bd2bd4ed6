"""Saved results and their comparison: a versioned JSON schema (:mod:`.schema`), the
environment a result was measured in (:mod:`.environment`), saving and loading with checks
(:mod:`.store`), the builders of each command's payload (:mod:`.payloads`), repeated runs
of a program under cProfile (:mod:`.runner`), the comparison of two results
(:mod:`.compare`) and its renderers (:mod:`.render`)."""
