"""One source of truth for stacks, shared by the cProfile path, the memory attribution and
the sampler: the frame every stack is made of, the rule telling library code from the
user's, and the exporters of weighted stacks (speedscope, collapsed)."""
