"""Generators, coroutines and asynchronous generators: they run, are
suspended and resumed through their trampolines."""

import json
import unittest

from test import support
from test.test_perf_profiler.util import (PerfTestCase,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestGeneratorsAndCoroutines(PerfTestCase):

    SCRIPT = """
        import asyncio, json, os, sys

        out = {}

        def gen(n):
            total = 0
            for i in range(n):
                x = yield i
                if x:
                    total += x
            return total

        def deleg(n):
            r = yield from gen(n)
            return r * 10

        g = deleg(3)
        values = [next(g)]
        try:
            while True:
                values.append(g.send(2))
        except StopIteration as exc:
            out["deleg"] = [values, exc.value]

        def thrown():
            yield 1

        g = thrown()
        try:
            g.throw(KeyError("boom"))   # never started before
        except KeyError as exc:
            out["throw_unstarted"] = repr(exc)

        # A name that is not ASCII is encoded while the exception is set.
        def thrown_\u00e9():
            yield 1

        g = thrown_\u00e9()
        try:
            g.throw(KeyError("boom"))
        except KeyError as exc:
            out["throw_unstarted_encoded"] = [repr(exc),
                                              repr(exc.__context__)]

        def catcher():
            try:
                yield 1
            except ValueError as exc:
                yield f"caught {exc}"
            yield "end"

        g = catcher()
        next(g)
        out["throw_started"] = [g.throw(ValueError("v")), next(g)]
        g.close()

        def closer():
            try:
                yield 1
            finally:
                out["closed"] = True

        g = closer()
        next(g)
        g.close()

        out["genexpr"] = sum(x * x for x in range(10))

        async def leaf(x):
            return x + 1

        async def mid(x):
            return await leaf(x) * 2

        async def top():
            return [await mid(i) for i in range(3)]

        def run_coro(coro):
            try:
                coro.send(None)
            except StopIteration as exc:
                return exc.value
            raise AssertionError("coroutine suspended")

        out["coro"] = run_coro(top())

        async def sleeper():
            await asyncio.sleep(0)
            return "slept"

        async def agen():
            for i in range(3):
                await asyncio.sleep(0)
                yield i

        async def consume():
            return [x async for x in agen()]

        async def gather():
            return await asyncio.gather(sleeper(), consume())

        out["asyncio"] = asyncio.run(gather())
        print(json.dumps(out))
        print(os.getpid())
    """

    EXPECTED = {
        "deleg": [[0, 1, 2], 60],
        "throw_unstarted": "KeyError('boom')",
        "throw_unstarted_encoded": ["KeyError('boom')", "None"],
        "throw_started": ["caught v", "end"],
        "closed": True,
        "genexpr": 285,
        "coro": [2, 4, 6],
        "asyncio": ["slept", [0, 1, 2]],
    }

    def test_generators_and_coroutines(self):
        for flags in ((), ("-X", "perf")):
            with self.subTest(flags=flags):
                pid, rc, out, err, script = self.run_script(self.SCRIPT,
                                                            flags=flags)
                self.assertEqual(err, "")
                lines = out.splitlines()
                self.assertEqual(json.loads(lines[0]), self.EXPECTED)
                self.assertEqual(lines[1], str(pid))
                if not flags:
                    continue
                text = self.assert_map_file(pid)
                for qualname in (
                        "gen", "deleg", "thrown", "thrown_\u00e9",
                        "catcher", "closer",
                        "<genexpr>", "leaf", "mid", "top",
                        "top.<locals>.<listcomp>", "sleeper", "agen",
                        "consume", "consume.<locals>.<listcomp>", "gather"):
                    with self.subTest(qualname=qualname):
                        self.assert_symbol_count(
                            text, f"py::{qualname}:{script}", 1)

    def test_suspended_across_activation_changes(self):
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def counter():
                i = 0
                while True:
                    try:
                        i += 1
                        yield i
                    except ValueError:
                        i += 100

            async def awaiter(fut):
                return (await fut) + 1

            class Future:
                def __init__(self):
                    self.value = None
                def __await__(self):
                    yield "suspended"
                    return self.value

            sys.activate_stack_trampoline("perf")
            g1 = counter()
            values = [next(g1)]              # started through a trampoline
            fut = Future()
            c1 = awaiter(fut)
            values.append(c1.send(None))
            sys.deactivate_stack_trampoline()
            values += [next(g1) for _ in range(3)]
            values.append(g1.throw(ValueError))
            g2 = counter()
            values.append(next(g2))          # started without
            sys.activate_stack_trampoline("perf")
            values += [next(g2), next(g1), g2.throw(ValueError)]
            fut.value = 41
            try:
                c1.send(None)
            except StopIteration as exc:
                values.append(exc.value)
            g1.close()
            g2.close()
            sys.deactivate_stack_trampoline()
            print(json.dumps(values))
            print(os.getpid())
        """)
        lines = out.splitlines()
        self.assertEqual(json.loads(lines[0]),
                         [1, "suspended", 2, 3, 4, 105, 1, 2, 106, 103, 42])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::counter:{script}", 1)
        self.assert_symbol_count(text, f"py::awaiter:{script}", 1)
        self.assert_symbol_count(text, f"py::Future.__await__:{script}", 1)

    def test_creation_has_no_frame_of_its_own(self):
        # A call instruction that calls a generator, coroutine or
        # asynchronous generator function only creates the object; its
        # body runs later, resumed through its trampoline.  The creation
        # runs in the caller's C frame, so functions whose objects are
        # created so but never run get no trampoline.
        pid, rc, out, err, script = self.run_script("""
            import json, os

            def make(n):
                def gen_run():
                    yield n
                def gen_idle():
                    yield n
                async def coro_run():
                    return n
                async def coro_idle():
                    return n
                async def agen_run():
                    yield n
                async def agen_idle():
                    yield n
                return [gen_run(), gen_idle(), coro_run(), coro_idle(),
                        agen_run(), agen_idle()]

            def caller():
                return make(7)

            objs = caller()
            values = [next(objs[0])]
            try:
                objs[2].send(None)
            except StopIteration as exc:
                values.append(exc.value)
            try:
                objs[4].asend(None).send(None)
            except StopIteration as exc:
                values.append(exc.value)
            values.append([o.__class__.__name__ for o in objs])
            print(json.dumps(values))
            print(os.getpid(), flush=True)
            # Closing the idle ones (as finalization would) runs them.
            os._exit(0)
        """, flags=("-X", "perf"))
        lines = out.splitlines()
        self.assertEqual(err, "")
        self.assertEqual(json.loads(lines[0]), [
            7, 7, 7,
            ["generator", "generator", "coroutine", "coroutine",
             "async_generator", "async_generator"]])
        text = self.assert_map_file(pid)
        for qualname in ("make", "caller", "make.<locals>.gen_run",
                         "make.<locals>.coro_run", "make.<locals>.agen_run"):
            with self.subTest(qualname=qualname):
                self.assert_symbol_count(text, f"py::{qualname}:{script}", 1)
        for qualname in ("make.<locals>.gen_idle", "make.<locals>.coro_idle",
                         "make.<locals>.agen_idle"):
            with self.subTest(qualname=qualname):
                self.assert_not_described(text, qualname)


if __name__ == "__main__":
    unittest.main()
