/* The name of a trampoline: "py::QUALNAME:FILENAME", in UTF-8, made for
   every new function, so made in few instructions, and safe for the
   line-based perf map (no control characters). */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* The UTF-8 bytes of a str that is not ASCII, encoded into *owned
   (backslashreplace: file names may hold lone surrogates), which the
   caller releases; "?" if that fails.  The exception of the frame being
   started (generator.throw()) is kept aside meanwhile. */
static void
encoded_symbol_part(PyObject *str, const char **src, size_t *n,
                    PyObject **owned)
{
    *src = "?";
    *n = 1;
    if (!PyUnicode_Check(str)) {
        return;
    }
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    *owned = _PyUnicode_AsUTF8String(str, "backslashreplace");
    if (*owned != NULL) {
        *src = PyBytes_AS_STRING(*owned);
        *n = (size_t)PyBytes_GET_SIZE(*owned);
    }
    else {
        PyErr_Clear();
    }
    PyErr_Restore(exc, val, tb);
}

/* The UTF-8 bytes of one part of a name: an ASCII string as it is, others
   as encoded_symbol_part() makes them. */
static inline void
symbol_part(PyObject *str, const char **src, size_t *n, PyObject **owned)
{
    *owned = NULL;
    if (PyUnicode_Check(str) && PyUnicode_IS_READY(str)
        && PyUnicode_IS_ASCII(str))
    {
        *src = (const char *)PyUnicode_DATA(str);
        *n = (size_t)PyUnicode_GET_LENGTH(str);
        return;
    }
    encoded_symbol_part(str, src, n, owned);
}

/* A control character (below 0x20, or 0x7f) would break a line-based
   format. */
static inline int
is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* Whether s[:n] has a control character.  Eight bytes at a time: a byte
   by byte test of every name was about 300 of the 1,000 instructions that
   describing a function took while importing.  Bytes from 0x80 up (UTF-8)
   never count: ~x clears their high bit. */
static int
has_control_chars(const char *s, size_t n)
{
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t highs = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t del = x ^ (0x7f * ones);
        if ((((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs) {
            return 1;
        }
    }
    for (; i < n; i++) {
        if (is_control((unsigned char)s[i])) {
            return 1;
        }
    }
    return 0;
}

size_t
_PyPerfTrampoline_FormatSymbol(PyCodeObject *co, char *buf, size_t size,
                               size_t *qualname_end)
{
    const char *qualname, *filename;
    size_t qn, fn;
    PyObject *owned_q, *owned_f;
    symbol_part(co->co_qualname, &qualname, &qn, &owned_q);
    symbol_part(co->co_filename, &filename, &fn, &owned_f);
    size_t len = 4 + qn + 1 + fn;
    *qualname_end = 4 + qn;
    if (len <= size) {
        memcpy(buf, "py::", 4);
        memcpy(buf + 4, qualname, qn);
        buf[4 + qn] = ':';
        memcpy(buf + 4 + qn + 1, filename, fn);
        /* Nothing that would break a line-based format (the newline above
           all). */
        if (has_control_chars(buf + 4, len - 4)) {
            for (size_t i = 4; i < len; i++) {
                if (is_control((unsigned char)buf[i])) {
                    buf[i] = '?';
                }
            }
        }
    }
    Py_XDECREF(owned_q);
    Py_XDECREF(owned_f);
    return len;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
