/* DWARF unwind information for the perf trampoline template.

   A trampoline keeps a frame record (the caller's frame pointer and the
   return address) like any C function, but it lives in an anonymous
   mapping with no ELF image, so an unwinder that does not follow frame
   pointers needs to be told how the template moves its frame.  This file
   writes that description for every consumer: as .eh_frame (one CIE, one
   FDE) and a one-entry .eh_frame_hdr with pc-relative pointers for the
   jitdump of the perf_jit backend, and as one CIE with an FDE per
   trampoline and absolute pointers for debuggers and in-process
   unwinders (Python/perf_debugger.c).

   The locations come from labels in Python/asm_trampoline.S, so the
   description follows the template when it changes. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#if defined(__x86_64__)
#  define DWARF_SP 7
#  define DWARF_FP 6
#  define DWARF_RA 16
#  define DWARF_CODE_ALIGN 1
#elif defined(__aarch64__)
#  define DWARF_SP 31
#  define DWARF_FP 29
#  define DWARF_RA 30
#  define DWARF_CODE_ALIGN 4
#else
#  define DWARF_SP 2
#  define DWARF_FP 8
#  define DWARF_RA 1
#  define DWARF_CODE_ALIGN 1            /* compressed instructions */
#endif
#define DWARF_DATA_ALIGN (-8)

/* DWARF call frame instructions and pointer encodings. */
#define DW_CFA_advance_loc 0x40
#define DW_CFA_offset 0x80
#define DW_CFA_restore 0xc0
#define DW_CFA_def_cfa 0x0c
#define DW_CFA_def_cfa_register 0x0d
#define DW_CFA_def_cfa_offset 0x0e
#define DW_CFA_AARCH64_negate_ra_state 0x2d
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

/* Advance the location of a CFA program from *loc to new_loc (bytes). */
static void
advance_to(_PyPerfBuf *b, size_t *loc, size_t new_loc)
{
    size_t delta = (new_loc - *loc) / DWARF_CODE_ALIGN;
    assert(new_loc >= *loc && delta < 0x40);
    if (delta) {
        _PyPerfBuf_PutU8(b, DW_CFA_advance_loc | (uint8_t)delta);
    }
    *loc = new_loc;
}

static void
pad_to_8(_PyPerfBuf *b, size_t start)
{
    while ((b->len - start) % 8) {
        _PyPerfBuf_PutU8(b, 0);             /* DW_CFA_nop */
    }
}

size_t
_PyPerfUnwind_WriteCIE(_PyPerfBuf *b, int absolute)
{
    /* The state at the first instruction; the return address is just
       above the stack pointer on x86-64, in x30 on aarch64, in ra on
       riscv64. */
    size_t cie = b->len;
    assert(b->cap - b->len >= _PyPerfUnwind_CIE_MAX_SIZE);
    _PyPerfBuf_PutU32(b, 0);                /* length, patched below */
    _PyPerfBuf_PutU32(b, 0);                /* CIE id */
    _PyPerfBuf_PutU8(b, 1);                 /* version */
    _PyPerfBuf_PutBytes(b, "zR", 3);        /* augmentation */
    _PyPerfBuf_PutULEB128(b, DWARF_CODE_ALIGN);
    _PyPerfBuf_PutSLEB128(b, DWARF_DATA_ALIGN);
    _PyPerfBuf_PutULEB128(b, DWARF_RA);
    _PyPerfBuf_PutULEB128(b, 1);            /* augmentation data length */
    _PyPerfBuf_PutU8(b, absolute ? DW_EH_PE_absptr
                                 : DW_EH_PE_pcrel | DW_EH_PE_sdata4);
#if defined(__x86_64__)
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa);
    _PyPerfBuf_PutULEB128(b, DWARF_SP);
    _PyPerfBuf_PutULEB128(b, 8);
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_RA);
    _PyPerfBuf_PutULEB128(b, 1);            /* at CFA-8 */
#else
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa);
    _PyPerfBuf_PutULEB128(b, DWARF_SP);
    _PyPerfBuf_PutULEB128(b, 0);
#endif
    pad_to_8(b, cie);
    _PyPerfBuf_PatchU32(b, cie, (uint32_t)(b->len - cie - 4));
    return cie;
}

size_t
_PyPerfUnwind_WriteFDE(_PyPerfBuf *b, size_t cie, int absolute,
                       size_t code_size, int64_t text_addr, int64_t buf_addr)
{
    /* How the prologue and epilogue move the CFA. */
    size_t fde = b->len;
    assert(b->cap - b->len >= _PyPerfUnwind_FDE_MAX_SIZE);
    _PyPerfBuf_PutU32(b, 0);                /* length, patched below */
    _PyPerfBuf_PutU32(b, (uint32_t)(b->len - cie));     /* CIE pointer */
    if (absolute) {
        _PyPerfBuf_PutU64(b, (uint64_t)text_addr);
        _PyPerfBuf_PutU64(b, (uint64_t)code_size);      /* pc range */
    }
    else {
        int64_t field_addr = buf_addr + (int64_t)b->len;
        _PyPerfBuf_PutU32(b, (uint32_t)(int32_t)(text_addr - field_addr));
        _PyPerfBuf_PutU32(b, (uint32_t)code_size);      /* pc range */
    }
    _PyPerfBuf_PutULEB128(b, 0);            /* augmentation data length */
    size_t pushed = _Py_trampoline_func_pushed - _Py_trampoline_func_start;
    size_t popped = _Py_trampoline_func_popped - _Py_trampoline_func_start;
    size_t loc = 0;
#if defined(__x86_64__) || defined(__aarch64__)
    size_t framed = _Py_trampoline_func_framed - _Py_trampoline_func_start;
#endif
#if defined(__x86_64__)
    advance_to(b, &loc, pushed);            /* push %rbp */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_offset);
    _PyPerfBuf_PutULEB128(b, 16);
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_FP);
    _PyPerfBuf_PutULEB128(b, 2);            /* at CFA-16 */
    advance_to(b, &loc, framed);            /* mov %rsp, %rbp */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_register);
    _PyPerfBuf_PutULEB128(b, DWARF_FP);
    advance_to(b, &loc, popped);            /* pop %rbp */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa);
    _PyPerfBuf_PutULEB128(b, DWARF_SP);
    _PyPerfBuf_PutULEB128(b, 8);
    _PyPerfBuf_PutU8(b, DW_CFA_restore | DWARF_FP);
#elif defined(__aarch64__)
#  if defined(__ARM_FEATURE_PAC_DEFAULT)
    advance_to(b, &loc, pushed - 4);        /* paci[ab]sp signed x30 */
    _PyPerfBuf_PutU8(b, DW_CFA_AARCH64_negate_ra_state);
#  endif
    advance_to(b, &loc, pushed);            /* stp x29, x30, [sp, -16]! */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_offset);
    _PyPerfBuf_PutULEB128(b, 16);
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_FP);
    _PyPerfBuf_PutULEB128(b, 2);            /* at CFA-16 */
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_RA);
    _PyPerfBuf_PutULEB128(b, 1);            /* at CFA-8 */
    advance_to(b, &loc, framed);            /* mov x29, sp */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_register);
    _PyPerfBuf_PutULEB128(b, DWARF_FP);
    advance_to(b, &loc, popped);            /* ldp x29, x30, [sp], 16 */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa);
    _PyPerfBuf_PutULEB128(b, DWARF_SP);
    _PyPerfBuf_PutULEB128(b, 0);
    _PyPerfBuf_PutU8(b, DW_CFA_restore | DWARF_FP);
    _PyPerfBuf_PutU8(b, DW_CFA_restore | DWARF_RA);
#  if defined(__ARM_FEATURE_PAC_DEFAULT)
    advance_to(b, &loc, popped + 4);        /* auti[ab]sp */
    _PyPerfBuf_PutU8(b, DW_CFA_AARCH64_negate_ra_state);
#  endif
#else
    /* The CFA stays sp+16 through the body: the epilogue reloads s0
       before it releases the frame. */
    size_t reserved = (_Py_trampoline_func_reserved
                       - _Py_trampoline_func_start);
    advance_to(b, &loc, reserved);          /* addi sp, sp, -16 */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_offset);
    _PyPerfBuf_PutULEB128(b, 16);
    advance_to(b, &loc, pushed);            /* sd ra, 8(sp); sd s0, 0(sp) */
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_RA);
    _PyPerfBuf_PutULEB128(b, 1);            /* at CFA-8 */
    _PyPerfBuf_PutU8(b, DW_CFA_offset | DWARF_FP);
    _PyPerfBuf_PutULEB128(b, 2);            /* at CFA-16 */
    advance_to(b, &loc, popped);            /* ld ra; ld s0; addi sp */
    _PyPerfBuf_PutU8(b, DW_CFA_def_cfa_offset);
    _PyPerfBuf_PutULEB128(b, 0);
    _PyPerfBuf_PutU8(b, DW_CFA_restore | DWARF_FP);
    _PyPerfBuf_PutU8(b, DW_CFA_restore | DWARF_RA);
#endif
    pad_to_8(b, fde);
    _PyPerfBuf_PatchU32(b, fde, (uint32_t)(b->len - fde - 4));
    assert(b->len - fde <= _PyPerfUnwind_FDE_MAX_SIZE);
    return fde;
}

size_t
_PyPerfUnwind_Write(_PyPerfBuf *b, size_t code_size, int64_t text_addr,
                    int64_t eh_frame_addr)
{
    size_t start = b->len;
    int64_t buf_addr = eh_frame_addr - (int64_t)start;
    assert(b->cap - b->len >= _PyPerfUnwind_MAX_SIZE);
    size_t cie = _PyPerfUnwind_WriteCIE(b, 0);
    size_t fde = _PyPerfUnwind_WriteFDE(b, cie, 0, code_size, text_addr,
                                        buf_addr);
    _PyPerfBuf_PutU32(b, 0);                /* end of .eh_frame */

    /* .eh_frame_hdr: a one-entry search table. */
    size_t hdr = b->len;
    int64_t hdr_addr = buf_addr + (int64_t)hdr;
    _PyPerfBuf_PutU8(b, 1);                 /* version */
    _PyPerfBuf_PutU8(b, DW_EH_PE_pcrel | DW_EH_PE_sdata4);  /* eh_frame */
    _PyPerfBuf_PutU8(b, DW_EH_PE_udata4);                   /* fde_count */
    _PyPerfBuf_PutU8(b, DW_EH_PE_datarel | DW_EH_PE_sdata4); /* table */
    _PyPerfBuf_PutU32(b, (uint32_t)(int32_t)(eh_frame_addr - (hdr_addr + 4)));
    _PyPerfBuf_PutU32(b, 1);
    _PyPerfBuf_PutU32(b, (uint32_t)(int32_t)(text_addr - hdr_addr));
    _PyPerfBuf_PutU32(b, (uint32_t)(int32_t)(buf_addr + (int64_t)fde
                                             - hdr_addr));
    assert(b->len - start <= _PyPerfUnwind_MAX_SIZE);
    return b->len - hdr;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
