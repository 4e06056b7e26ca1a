/* The watchdog: names held by a thread that starts up or imports reach
   the file in time, however long that thread computes.

   Such a thread holds what it describes and does not keep the eval
   breaker set meanwhile (Python/perf_description_file.c): checking it at
   every function entry and backward jump made importing much of the
   standard library 0.6% slower.  What it holds is written when the
   import ends, when it releases the GIL, when 64 names are held or at its
   next description once they are due; a module whose import computes for
   long without doing any of these (a loop at module level) kept them
   back, also from a SIGTERM that ended it.  So the first name held arms
   the watchdog, a thread of our own that sleeps until the names are due
   and then sets the eval breaker of the interpreter that holds them: its
   next check writes them.  The thread is started when it is needed and
   ends when it has had nothing to watch for IDLE_NS, so a program has it
   only while it imports (a process that holds nothing so never has
   one).  It blocks every signal, and touches nothing but the flag and
   the eval breaker, under a lock of its own that nothing else is taken
   under. */

#include "Python.h"
#include "pycore_interp.h"        // PyInterpreterState.ceval
#include "pycore_perf_backend.h"
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <pthread.h>
#include <signal.h>               // pthread_sigmask()
#include <time.h>                 // clock_gettime()

/* How long the thread waits for more to watch before it ends: a
   process that has imported nothing for that long has no thread of
   ours (some system calls, such as unshare(CLONE_NEWUSER), need a
   process of a single thread). */
#define IDLE_NS (100 * 1000 * 1000)

/* Set by the watchdog for the eval breaker: what is held is due.  And
   how many times it was (a statistic). */
int _PyPerfWatchdog_poked = 0;
size_t _PyPerfWatchdog_pokes = 0;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int started;                /* its thread runs, or is about to end */
    int failed;                 /* it could not be started: not again */
    /* When to set the eval breaker of interp (CLOCK_MONOTONIC); 0:
       nothing to wait for. */
    int64_t deadline;
    PyInterpreterState *interp;
} watchdog = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void *
watch(void *Py_UNUSED(arg))
{
    /* Idle from then on: the thread ends after IDLE_NS with nothing
       armed, counted from the last deadline it saw pass. */
    int64_t idle_until = 0;
    pthread_mutex_lock(&watchdog.lock);
    for (;;) {
        if (watchdog.deadline == 0) {
            struct timespec ts = {
                .tv_sec = (time_t)(idle_until / 1000000000),
                .tv_nsec = (long)(idle_until % 1000000000),
            };
            if (pthread_cond_timedwait(&watchdog.wake, &watchdog.lock, &ts)
                == ETIMEDOUT && watchdog.deadline == 0)
            {
                watchdog.started = 0;
                break;
            }
            continue;
        }
        struct timespec ts = {
            .tv_sec = (time_t)(watchdog.deadline / 1000000000),
            .tv_nsec = (long)(watchdog.deadline % 1000000000),
        };
        if (pthread_cond_timedwait(&watchdog.wake, &watchdog.lock, &ts)
            != ETIMEDOUT)
        {
            continue;           /* armed again, or woken for nothing */
        }
        /* What was held then may have been written since, and what is
           held now may be due later (read without the files' lock, as
           the eval breaker does). */
        int64_t due = _PyPerfFile_deadline;
        if (_PyPerfFile_held && watchdog.interp != NULL
            && due > watchdog.deadline)
        {
            watchdog.deadline = due;
            continue;
        }
        if (_PyPerfFile_held && watchdog.interp != NULL) {
            _PyPerfWatchdog_poked = 1;
            _PyPerfWatchdog_pokes++;
            _Py_atomic_store_relaxed(&watchdog.interp->ceval.eval_breaker,
                                     1);
        }
        idle_until = watchdog.deadline + IDLE_NS;
        watchdog.deadline = 0;
    }
    pthread_mutex_unlock(&watchdog.lock);
    return NULL;
}

/* Start the thread; -1 if it cannot be.  Called with the lock held. */
static int
start(void)
{
    pthread_condattr_t cattr;
    if (pthread_condattr_init(&cattr) != 0) {
        return -1;
    }
    /* The deadlines are on CLOCK_MONOTONIC, as _PyPerfFile_Now(). */
    int err = pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    if (err == 0) {
        pthread_cond_destroy(&watchdog.wake);
        err = pthread_cond_init(&watchdog.wake, &cattr);
    }
    pthread_condattr_destroy(&cattr);
    if (err != 0) {
        return -1;
    }
    static int watching_forks = 0;
    if (!watching_forks) {
        /* Once per process and its children, which inherit it. */
        if (pthread_atfork(NULL, NULL, _PyPerfWatchdog_AfterFork) != 0) {
            return -1;
        }
        watching_forks = 1;
    }
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        return -1;
    }
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&attr, 64 * 1024);
    /* No signal handler of the program runs in it: it inherits a mask
       that blocks them all. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    err = pthread_create(&thread, &attr, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        return -1;
    }
    /* Named for ps -L, top -H and debuggers, from here: the thread may
       not have run yet when the caller goes on. */
    (void)pthread_setname_np(thread, "perf-watchdog");
    return 0;
}

void
_PyPerfWatchdog_Arm(int64_t deadline)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (tstate == NULL) {
        /* The C API in a thread of its own: the thread that starts up
           writes what it holds at its end. */
        return;
    }
    pthread_mutex_lock(&watchdog.lock);
    if (!watchdog.started && !watchdog.failed) {
        if (start() == 0) {
            watchdog.started = 1;
        }
        else {
            /* The names wait as they did without it. */
            watchdog.failed = 1;
        }
    }
    watchdog.interp = tstate->interp;
    if (watchdog.started
        && (watchdog.deadline == 0 || deadline < watchdog.deadline))
    {
        /* Woken only for an earlier deadline: at a later one, it finds
           what is due then by itself. */
        watchdog.deadline = deadline;
        pthread_cond_signal(&watchdog.wake);
    }
    pthread_mutex_unlock(&watchdog.lock);
}

void
_PyPerfWatchdog_Forget(PyInterpreterState *interp)
{
    if (!watchdog.started) {
        return;
    }
    pthread_mutex_lock(&watchdog.lock);
    if (watchdog.interp == interp) {
        watchdog.interp = NULL;
        watchdog.deadline = 0;
    }
    pthread_mutex_unlock(&watchdog.lock);
}

void
_PyPerfWatchdog_AfterFork(void)
{
    /* In the child, from pthread_atfork(), before anything else runs: the
       thread is the parent's, and its lock may have been held at the
       fork.  The child starts a thread of its own if it needs one. */
    pthread_mutex_init(&watchdog.lock, NULL);
    pthread_cond_init(&watchdog.wake, NULL);
    watchdog.started = 0;
    watchdog.failed = 0;
    watchdog.deadline = 0;
    watchdog.interp = NULL;
    _PyPerfWatchdog_poked = 0;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
