/* The share of a thread's C stack in which Python calls may go through
   trampolines (read on every call: see _PyPerfTrampoline_HaveStack() in
   pycore_perf_trampoline.h). */

#include "Python.h"
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <pthread.h>            // pthread_getattr_np()
#  include <sys/resource.h>       // getrlimit()
#  include <unistd.h>             // getpid()
#endif

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* A trampolined call costs C stack that an inlined one does not: a C frame
   of the evaluator (about 360 bytes on x86-64).  Calls are trampolined only
   in the first STACK_SHARE-th of a thread's stack, so all the trampolined
   frames of a thread together never take more than that share: a program
   that needs less than the rest of the stack without trampolines (deep
   recursion through C included) runs unchanged with them, and one that
   needs more would crash without them too.  A fixed reserve at the end of
   the stack would not do: the recursion that fills the reserve has less
   stack in all than it would have had without trampolines.  1/32 of the
   8 MiB main thread stack holds several hundred trampolined calls. */
#define STACK_SHARE 32

#ifdef __GLIBC__
/* Where the main thread's stack starts (glibc and its dynamic loader export
   it; no header declares it). */
extern void *__libc_stack_end;
#endif

/* The calling thread's own stack, as the C library reports it: *size
   bytes up from *addr.  Return 0, or -1 if it cannot tell. */
static int
own_stack(uintptr_t *addr, size_t *size)
{
    pthread_attr_t attr;
    int res = -1;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *start;
        if (pthread_attr_getstack(&attr, &start, size) == 0) {
            *addr = (uintptr_t)start;
            res = 0;
        }
        pthread_attr_destroy(&attr);
    }
    return res;
}

#ifndef __GLIBC__
/* The top of the main thread's stack, if the runtime was started in the
   main thread (see _PyPerfStack_ComputeLimit()). */
static uintptr_t main_stack_top;
#endif

void
_PyPerfStack_NoteStart(void)
{
#ifndef __GLIBC__
    uintptr_t addr;
    size_t size;
    if (main_stack_top == 0
        && (unsigned long)getpid() == PyThread_get_thread_native_id()
        && own_stack(&addr, &size) == 0)
    {
        main_stack_top = addr + size;
    }
#endif
}

/* Find the part of the calling thread's own stack where calls may be
   trampolined: *span bytes from *limit up, where the stack starts; *span
   is 0 if the stack cannot be found. */
void
_PyPerfStack_ComputeLimit(uintptr_t *limit, uintptr_t *span)
{
    *limit = 0;
    *span = 0;
#ifdef __GLIBC__
    /* For the main thread, pthread_getattr_np() parses /proc/self/maps
       (about 110,000 instructions, a fifth of what -X perf added to
       start-up) to report the stack's start and RLIMIT_STACK, capped by
       the mapping below the stack.  Linux leaves at least 128 MiB free
       below the main thread's stack, so a limit up to that needs no cap;
       beyond it, ask glibc.  The range check leaves out a child forked
       by another thread, which runs on that thread's stack. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    struct rlimit rl;
    uintptr_t start = (uintptr_t)__libc_stack_end;
    if ((unsigned long)getpid() == PyThread_get_thread_native_id()
        && getrlimit(RLIMIT_STACK, &rl) == 0
        && rl.rlim_cur <= (rlim_t)128 * 1024 * 1024
        && here < start && start - here <= rl.rlim_cur)
    {
        *span = rl.rlim_cur / STACK_SHARE;
        *limit = start - *span;
        return;
    }
#endif
    uintptr_t addr;
    size_t size;
    if (own_stack(&addr, &size) == 0) {
        /* The stack grows down from addr + size.  The thread may be
           running on another stack now: these are the bounds of its own
           all the same. */
        uintptr_t top = addr + size;
#ifndef __GLIBC__
        /* musl reports the main thread's stack only as far as it has
           grown yet (a few pages at start-up); it may grow to
           RLIMIT_STACK, into the 128 MiB that Linux leaves free below it
           at least.  Only that stack: the only thread of a child forked
           by another thread runs on that thread's stack, whose size is
           all it has. */
        struct rlimit rl;
        if (top == main_stack_top && getrlimit(RLIMIT_STACK, &rl) == 0) {
            size_t most = (size_t)128 * 1024 * 1024;
            if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < most) {
                most = (size_t)rl.rlim_cur;
            }
            size = Py_MAX(size, most);
        }
#endif
        *span = size / STACK_SHARE;
        *limit = top - *span;
    }
    /* Otherwise the stack is unknown: no call is trampolined. */
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
