"""Tools/perf/pyprofile, one module per stage:

readiness
    Whether everything is ready to record (pyprofile --check).
remote
    Turning the support on in a running process from outside, and off.
recording
    perf record, perf inject --jit and perf script.
containers
    A process in its own namespaces: its files copied to the host.
perfscript
    Reading perf script's output as it comes.
folding
    Stacks into a tree, and the Python view of a stack.
rendering
    The flame graph page and the collapsed stacks.

procroot (processes, and files through their root directory) and common
are shared by them.
"""
