"""Benchmark workloads for perf trampolines ("make bench").

Run as: python workloads.py NAME LOOPS
Prints one JSON object: the CPU seconds the workload took, the peak RSS and,
where available, the perf trampoline counters.  Plain Python only, so every
configuration (pristine, patched, patched with -X perf) runs the same code.
"""

import json
import resource
import sys
import time


def recursive_calls(loops):
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    for _ in range(loops):
        fib(20)


def method_calls(loops):
    class Point:
        def __init__(self, x, y):
            self.x = x
            self.y = y

        def norm2(self):
            return self.x * self.x + self.y * self.y

        def scaled(self, k):
            return Point(self.x * k, self.y * k)

    p = Point(3, 4)
    for _ in range(loops):
        total = 0
        for i in range(2000):
            total += p.scaled(i).norm2()


def generators(loops):
    def numbers(n):
        for i in range(n):
            yield i

    def squares(it):
        for x in it:
            yield x * x

    for _ in range(loops):
        sum(squares(numbers(5000)))


def coroutines(loops):
    async def leaf(x):
        return x + 1

    async def middle(x):
        return await leaf(x) + await leaf(x)

    async def top(n):
        total = 0
        for i in range(n):
            total += await middle(i)
        return total

    for _ in range(loops):
        coro = top(2000)
        try:
            coro.send(None)
        except StopIteration:
            pass


def generator_resumes(loops):
    # One generator resumed over and over with a body of one instruction or
    # two: the cost of a resume dominates.
    def counter():
        i = 0
        while True:
            yield i
            i += 1

    for _ in range(loops):
        g = counter()
        for _ in range(10000):
            next(g)


def coroutine_awaits(loops):
    # Awaits of a coroutine that returns at once: each starts a frame from
    # C, as a resume does.
    async def leaf():
        return 1

    async def driver(n):
        total = 0
        for _ in range(n):
            total += await leaf()
        return total

    for _ in range(loops):
        coro = driver(5000)
        try:
            coro.send(None)
        except StopIteration:
            pass


def comprehensions(loops):
    def double(x):
        return 2 * x

    def keep(x):
        return x % 3 != 0

    for _ in range(loops):
        [double(x) for x in range(3000) if keep(x)]
        {x: double(x) for x in range(1000)}


def closures_and_kwargs(loops):
    def make_adder(n):
        def add(x, *, scale=1):
            return (x + n) * scale
        return add

    add5 = make_adder(5)
    for _ in range(loops):
        total = 0
        for i in range(2000):
            total += add5(i, scale=2) + add5(i)


def instantiation(loops):
    class Node:
        __slots__ = ("value", "next")

        def __init__(self, value, next=None):
            self.value = value
            self.next = next

    class Plain:
        def __init__(self, a, b):
            self.a = a
            self.b = b

    for _ in range(loops):
        head = None
        for i in range(2000):
            head = Node(i, head)
            Plain(i, head)


def dunder_methods(loops):
    class Vec:
        def __init__(self, x, y):
            self.x = x
            self.y = y

        def __add__(self, other):
            return Vec(self.x + other.x, self.y + other.y)

        def __getitem__(self, i):
            return self.x if i == 0 else self.y

        def __eq__(self, other):
            return self.x == other.x and self.y == other.y

        @property
        def length2(self):
            return self.x * self.x + self.y * self.y

    for _ in range(loops):
        v = Vec(0, 0)
        one = Vec(1, 1)
        for i in range(1000):
            v = v + one
            v[0] + v[1] + v.length2
            v == one


def exceptions(loops):
    def level3(i):
        if i % 2:
            raise ValueError(i)
        return i

    def level2(i):
        return level3(i)

    def level1(i):
        try:
            return level2(i)
        except ValueError:
            return -1

    for _ in range(loops):
        for i in range(1000):
            level1(i)


def generator_delegation(loops):
    # A recursive generator walks a complete binary tree, 10 levels deep,
    # with "yield from": each value is passed up through every level, so
    # the time is in resuming nested generators.
    class Tree:
        __slots__ = ("left", "value", "right", "last")

        def __init__(self, depth, start=0):
            self.left = self.right = None
            if depth > 1:
                self.left = Tree(depth - 1, start)
                start = self.left.last + 1
            self.value = start
            self.last = start
            if depth > 1:
                self.right = Tree(depth - 1, start + 1)
                self.last = self.right.last

    def walk(node):
        if node.left is not None:
            yield from walk(node.left)
        yield node.value
        if node.right is not None:
            yield from walk(node.right)

    tree = Tree(10)
    for _ in range(loops):
        total = 0
        for value in walk(tree):
            total += value


def small_methods(loops):
    # A scheduler: many task objects, each asked small questions through
    # methods (priorities, readiness, bookkeeping) on every tick, as
    # constraint solvers and simulations do.
    class Task:
        def __init__(self, ident, period, cost):
            self.ident = ident
            self.period = period
            self.cost = cost
            self.due = period
            self.runs = 0

        def is_ready(self, now):
            return self.due <= now

        def priority(self):
            return self.cost * 16 - self.period

        def run(self, now):
            self.runs += 1
            self.due = now + self.period
            return self.cost

    class Scheduler:
        def __init__(self, tasks):
            self.tasks = tasks
            self.busy = 0

        def pick(self, now):
            best = None
            for task in self.tasks:
                if task.is_ready(now) and (
                        best is None or task.priority() > best.priority()):
                    best = task
            return best

        def tick(self, now):
            task = self.pick(now)
            if task is not None:
                self.busy += task.run(now)

    tasks = [Task(i, 3 + i % 7, 1 + i % 5) for i in range(40)]
    for _ in range(loops):
        scheduler = Scheduler(tasks)
        for now in range(100):
            scheduler.tick(now)


def numeric_loop(loops):
    for _ in range(loops):
        x = 0.0
        for i in range(20000):
            x = x * 0.5 + i * 1.5


def new_functions(loops):
    # Every function is new: compiled, given a trampoline and described
    # (map or jitdump line, debugger image) once, then called once.
    for i in range(loops):
        exec(f"def f{i}():\n    return {i}\nf{i}()", {})


def import_stdlib(loops):
    # A fresh process runs this once: what matters is first-time imports.
    if loops < 1:
        return
    import argparse, asyncio, csv, dataclasses, decimal, email.message  # noqa
    import fractions, http.client, json, logging, pathlib, pickle  # noqa
    import sqlite3, statistics, subprocess, tarfile, typing, unittest  # noqa
    import urllib.request, uuid, xml.etree.ElementTree, zipfile  # noqa


WORKLOADS = {
    "recursive_calls": (recursive_calls, 90),
    "method_calls": (method_calls, 180),
    "generators": (generators, 240),
    "coroutines": (coroutines, 180),
    "generator_resumes": (generator_resumes, 240),
    "coroutine_awaits": (coroutine_awaits, 240),
    "comprehensions": (comprehensions, 240),
    "closures_kwargs": (closures_and_kwargs, 240),
    "instantiation": (instantiation, 240),
    "dunder_methods": (dunder_methods, 240),
    "exceptions": (exceptions, 240),
    "generator_delegation": (generator_delegation, 240),
    "small_methods": (small_methods, 480),
    "numeric_loop": (numeric_loop, 120),
    "new_functions": (new_functions, 3000),
    "new_functions_later": (new_functions, 6000),
    "import_stdlib": (import_stdlib, 1),
}


# Loops run before the timed ones (otherwise one, for specialization).
# new_functions_later is new_functions in a process that has already made
# 8,000 new functions: what each costs once the first ones have met the
# process's new memory, file and buffers (in a process of its own,
# perf_jit's first few thousand cost more; see RESULTS.rst).
WARM_UP = {
    "import_stdlib": 0,
    "new_functions_later": 4000,
}


def main():
    name = sys.argv[1]
    func, loops = WORKLOADS[name]
    if len(sys.argv) > 2:
        loops = int(sys.argv[2])
    warm_up = WARM_UP.get(name, 1)
    if warm_up:
        func(warm_up)
    start = time.process_time()
    func(loops)
    seconds = time.process_time() - start
    result = {
        "seconds": seconds,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    try:
        import _testinternalcapi
        stats = _testinternalcapi.get_perf_trampoline_stats()
    except (ImportError, AttributeError):
        stats = None
    if stats is not None:
        result["trampoline_stats"] = stats
    print(json.dumps(result))


if __name__ == "__main__":
    main()
