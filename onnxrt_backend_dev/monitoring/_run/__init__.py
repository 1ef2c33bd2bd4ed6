"""The harness of the processes a command runs: the one program harness and the
program's side (:mod:`.program`: the program, its checks, a child run to its end, the
repeated runs; a program run as ``__main__`` here), the one handler of the signals that
end a command (:mod:`.signals`), the supervision of children in their own process groups
with a start gate, a timeout and a kill path (:mod:`.supervise`), and the janitor that
cleans up after a command killed outright (:mod:`.janitor`)."""
