/*
 * Template of the perf trampoline (see Python/perf_trampoline.c).
 *
 * PyObject *
 * _Py_trampoline_func_start(PyThreadState *tstate,
 *                           struct _PyInterpreterFrame *frame,
 *                           int throwflag,
 *                           _PyFrameEvalFunction evaluator)
 *
 * calls evaluator(tstate, frame, throwflag) from a native frame of its own
 * and returns its result.  The code between _Py_trampoline_func_start and
 * _Py_trampoline_func_end is copied once per code object, so it must be
 * position independent.  Keep the prologue and epilogue in sync with the
 * unwind information that describes them.
 */

    .text
    .globl  _Py_trampoline_func_start
    .globl  _Py_trampoline_func_end
/* Points inside the template where the frame changes, for its unwind
   information (Python/perf_unwind.c). */
    .globl  _Py_trampoline_func_pushed
    .globl  _Py_trampoline_func_framed
    .globl  _Py_trampoline_func_popped
    .hidden _Py_trampoline_func_start
    .hidden _Py_trampoline_func_end
    .hidden _Py_trampoline_func_pushed
    .hidden _Py_trampoline_func_framed
    .hidden _Py_trampoline_func_popped

#if defined(__x86_64__)

    .type   _Py_trampoline_func_start, @function
    .p2align 4
_Py_trampoline_func_start:
    /* Indirect branch target for CET/IBT; a NOP on older processors. */
    endbr64
    /* Keep the frame-pointer chain intact for frame-pointer unwinding. */
    push    %rbp
_Py_trampoline_func_pushed:
    mov     %rsp, %rbp
_Py_trampoline_func_framed:
    call    *%rcx
    pop     %rbp
_Py_trampoline_func_popped:
    ret
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#  if defined(__CET__)
/* GNU property note: this object supports IBT and shadow stacks. */
    .section .note.gnu.property, "a"
    .p2align 3
    .long   4                       /* name size */
    .long   16                      /* descriptor size */
    .long   5                       /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   0xc0000002              /* GNU_PROPERTY_X86_FEATURE_1_AND */
    .long   4                       /* property size */
    .long   (__CET__ & 3)           /* 1: IBT, 2: SHSTK */
    .p2align 3
#  endif

#elif defined(__aarch64__)

#  if defined(__ARM_FEATURE_PAC_DEFAULT) && (__ARM_FEATURE_PAC_DEFAULT & 2)
#    define PERF_SIGN_LR    pacibsp
#    define PERF_AUTH_LR    autibsp
#    define PERF_PAC_PROP   2
#  elif defined(__ARM_FEATURE_PAC_DEFAULT)
#    define PERF_SIGN_LR    paciasp
#    define PERF_AUTH_LR    autiasp
#    define PERF_PAC_PROP   2
#  else
#    define PERF_SIGN_LR
#    define PERF_AUTH_LR
#    define PERF_PAC_PROP   0
#  endif
#  if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#    define PERF_BTI_PROP   1
#  else
#    define PERF_BTI_PROP   0
#  endif

    .type   _Py_trampoline_func_start, %function
    .p2align 4
_Py_trampoline_func_start:
    /* Landing pad for indirect calls under BTI (a NOP without BTI).
       PACI[AB]SP would also be one, but only when return address
       signing is on. */
    hint    #34                     /* bti c */
    PERF_SIGN_LR
    stp     x29, x30, [sp, -16]!
_Py_trampoline_func_pushed:
    mov     x29, sp
_Py_trampoline_func_framed:
    blr     x3
    ldp     x29, x30, [sp], 16
_Py_trampoline_func_popped:
    PERF_AUTH_LR
    ret
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#  if PERF_BTI_PROP || PERF_PAC_PROP
/* GNU property note: this object supports BTI and/or PAC. */
    .section .note.gnu.property, "a"
    .p2align 3
    .long   4                       /* name size */
    .long   16                      /* descriptor size */
    .long   5                       /* NT_GNU_PROPERTY_TYPE_0 */
    .asciz  "GNU"
    .long   0xc0000000              /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
    .long   4                       /* property size */
    .long   (PERF_BTI_PROP | PERF_PAC_PROP)
    .p2align 3
#  endif

#elif defined(__riscv) && __riscv_xlen == 64

/* The psABI's frame record: s0 (the frame pointer) holds the stack
   pointer at entry, the return address is at s0-8 and the caller's s0 at
   s0-16; perf's kernel unwinder reads them there.  The stack pointer stays
   16-byte aligned. */
    .globl  _Py_trampoline_func_reserved
    .hidden _Py_trampoline_func_reserved
    .type   _Py_trampoline_func_start, @function
    .p2align 4
_Py_trampoline_func_start:
    addi    sp, sp, -16
_Py_trampoline_func_reserved:
    sd      ra, 8(sp)
    sd      s0, 0(sp)
_Py_trampoline_func_pushed:
    addi    s0, sp, 16
_Py_trampoline_func_framed:
    jalr    a3
    ld      ra, 8(sp)
    ld      s0, 0(sp)
    addi    sp, sp, 16
_Py_trampoline_func_popped:
    ret
_Py_trampoline_func_end:
    .size   _Py_trampoline_func_start, . - _Py_trampoline_func_start

#else
#  error "no perf trampoline template for this architecture"
#endif

/* The trampoline never needs an executable stack. */
    .section .note.GNU-stack, "", %progbits
