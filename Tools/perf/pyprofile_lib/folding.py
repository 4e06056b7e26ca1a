"""Stacks into a tree of frames, and the Python view of a stack: the
Python functions and the native code they call, without the evaluator's
plumbing."""

import os
import re


class Node:
    __slots__ = ("name", "libtype", "title", "value", "children")

    def __init__(self, name, libtype, title=None):
        self.name, self.libtype, self.title = name, libtype, title
        self.value = 0
        self.children = {}

    def add(self, stack, count=1):
        node = self
        for frame in stack:
            child = node.children.get(frame.label)
            if child is None:
                child = node.children[frame.label] = Node(
                    frame.label, frame.libtype, frame.title)
            node = child
        node.value += count

    def stacks(self, prefix=()):
        """(names from the outermost frame, samples) for every leaf."""
        if self.value:
            yield prefix, self.value
        for child in self.children.values():
            yield from child.stacks(prefix + (child.name,))

    def to_json(self):
        # The node format of d3-flame-graph (and of perf's flamegraph.py),
        # plus "t", the text shown on hover where it differs from "n".
        node = {"n": self.name, "l": self.libtype, "v": self.value,
                "c": [child.to_json() for child in self.children.values()]}
        if self.title is not None:
            node["t"] = self.title
        return node


class Frame:
    __slots__ = ("symbol", "dso", "label", "libtype", "title")

    def __init__(self, symbol, dso, label=None, title=None):
        self.symbol, self.dso = symbol, dso
        self.label = label or symbol
        self.libtype = libtype(symbol, dso)
        self.title = title

    @property
    def is_python(self):
        return self.symbol.startswith("py::")


def libtype(symbol, dso):
    """d3-flame-graph colors frames by library type: "jit" (green) for
    Python functions, "kernel" (orange) and "" (warm) for native code."""
    if symbol.startswith("py::"):
        return "jit"
    if dso == "[kernel.kallsyms]" or dso.endswith("/vmlinux"):
        return "kernel"
    return ""


# The interpreter's own code: the python executable or libpython.
INTERPRETER_DSO_RE = re.compile(r"(^|/)(python|libpython)[0-9.]*[a-z]*"
                                r"(\.so[0-9.]*)?$")

# The frames between a Python function and the native function it calls:
# the evaluator, the trampolines' C side and the calling convention.
PLUMBING_RE = re.compile(
    r"^(_PyEval_EvalFrameDefault|_PyEval_Vector|_PyPerfTrampoline_\w+"
    r"|_?PyObject_(Vectorcall\w*|Call\w*|FastCall\w*)|_PyFunction_Vectorcall"
    r"|cfunction_\w+|method_vectorcall\w*|vectorcall_\w+|slot_tp_call"
    r"|_PyObject_MakeTpCall|\[unknown\])$")


def is_interpreter(frame):
    return (INTERPRETER_DSO_RE.search(frame.dso) is not None
            or frame.symbol == "[unknown]")


def python_frame(frame):
    """The Python view of a py::QUALNAME:FILENAME frame."""
    qualname, _, filename = frame.symbol[4:].partition(":")
    frame.label = f"{qualname} ({os.path.basename(filename) or filename})"
    frame.title = f"{qualname} ({filename})"
    return frame


def python_view(stack):
    """Fold a stack (outermost first) into what a Python developer reads:
    the Python functions, and the native functions called from them.  The
    native frames above the outermost Python function (process and thread
    start-up), the interpreter's frames between two Python functions, and
    the plumbing between a Python function and the native code it calls
    go; a stack without Python frames stays as it is."""
    python = [i for i, frame in enumerate(stack) if frame.is_python]
    if not python:
        return stack
    view = []
    for i in range(python[0], len(stack)):
        frame = stack[i]
        if frame.is_python:
            view.append(python_frame(frame))
        elif i < python[-1]:
            # Between Python functions: a C extension calling back into
            # Python stays; the interpreter does not.
            if not is_interpreter(frame):
                view.append(frame)
        elif not PLUMBING_RE.match(frame.symbol):
            view.append(frame)
    return view


def python_sample_count(tree):
    """Samples whose stack has a Python frame (colored "jit")."""
    def count(node, python):
        python = python or node.libtype == "jit"
        total = node.value if python else 0
        return total + sum(count(child, python)
                           for child in node.children.values())
    return count(tree, False)
