/* Describing trampolines to debuggers.

   A trampoline lives in an anonymous mapping: without help, gdb takes it
   for a frameless function and stops the backtrace there, and lldb and
   eu-stack show it as a bare address.  So, whatever the backend, every
   trampoline is described to debuggers through the GDB JIT interface (GDB
   manual, "JIT Compilation Interface"; lldb reads it too): an in-memory
   ELF image with a symbol per trampoline and an .eh_frame with an FDE per
   trampoline, linked into __jit_debug_descriptor.  gdb reads the list when
   it attaches or opens a core file, and is told of changes while attached
   by a breakpoint on __jit_debug_register_code().

   The unwind information is not registered with libgcc's unwinder
   (__register_frame()), which glibc's backtrace() and C++ exceptions use:
   once anything is registered, libgcc 12 looks every frame up under one
   global non-recursive lock and sorts new objects with malloc() inside a
   lookup, so an unwinder in a signal handler (in-process samplers, crash
   handlers) could deadlock or corrupt the heap, and each registered
   object makes every unwind in the process slower.  Such unwinders find
   the trampolines' unwind information through the dynamic loader instead
   (Python/perf_loader.c).

   Images are made per batch of IMAGE_SLOTS consecutive trampoline slots
   of an arena, with the FDEs of all of them from the start, so a debugger
   unwinds through a trampoline from the moment its image is told; its
   symbol is added to the image in place.  An attached debugger only
   learns of new symbols when it is told (it copies an image when it is
   registered), and telling it costs two stops of the process (about
   0.5 ms each with gdb 13 here).  So there are few images (one per batch,
   never one per trampoline); the symbols made while the interpreter
   starts up or imports are told once, when that is done, as their
   descriptions are written to the perf map (see
   Python/perf_description_file.c); and the notifications are budgeted
   against the program's own CPU time (see may_tell()).  Without a
   debugger, telling costs a few nanoseconds.

   Images and their code are never freed, like the arenas: a thread may
   still return into any trampoline, and a forked child keeps the list it
   inherited, which describes the code it inherited.  So that a fork does
   not copy their page tables, the ELF bytes of an image that gets no more
   symbols are moved into memory shared with forked children, like the
   arenas: only the image that grows (one per backend) is in memory of the
   process's own, and so is each image's entry in the list, which a
   process changes when it tells the debugger.  A child leaves the
   growing images it inherited where they are: it adds no symbol to them,
   and the parent's later ones never reach its copy (copy-on-write), so
   moving them would only cost each child a copy.  It makes new images in
   a reservation of its own. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <elf.h>                  // Elf64_Ehdr
#include <stddef.h>               // ptrdiff_t
#include <sys/mman.h>             // PROT_READ
#include <unistd.h>               // sysconf()
#include <time.h>                 // clock_gettime()

#if defined(__x86_64__)
#  define IMAGE_MACHINE EM_X86_64
#  define IMAGE_FLAGS 0
#elif defined(__aarch64__)
#  define IMAGE_MACHINE EM_AARCH64
#  define IMAGE_FLAGS 0
#else
#  define IMAGE_MACHINE EM_RISCV
/* The ABI of the code around: debuggers compare it with the program's. */
#  if defined(__riscv_compressed)
#    define IMAGE_RVC EF_RISCV_RVC
#  else
#    define IMAGE_RVC 0
#  endif
#  if defined(__riscv_float_abi_double)
#    define IMAGE_FLAGS (IMAGE_RVC | EF_RISCV_FLOAT_ABI_DOUBLE)
#  else
#    define IMAGE_FLAGS IMAGE_RVC
#  endif
#endif

/* Trampoline slots per image. */
#define IMAGE_SLOTS 256
/* Bytes reserved per symbol name; longer names are cut short. */
#define NAME_MAX_BYTES 512
/* The budget for notifications (see may_tell()): each is charged
   NOTIFY_COST_NS of the program's CPU time, about what one costs an
   attached gdb 13 here, and the program may be up to DEBUGGER_BURST_NS
   ahead: the first hundred notifications are never deferred. */
#define NOTIFY_COST_NS (1000 * 1000)
#define DEBUGGER_BURST_NS (100 * NOTIFY_COST_NS)


/* The GDB JIT interface.  The names and the layout are the interface. */

enum {
    JIT_NOACTION = 0,
    JIT_REGISTER_FN,
    JIT_UNREGISTER_FN
};

struct jit_code_entry {
    struct jit_code_entry *next_entry;
    struct jit_code_entry *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};

struct jit_descriptor {
    uint32_t version;
    uint32_t action_flag;
    struct jit_code_entry *relevant_entry;
    struct jit_code_entry *first_entry;
};

/* Exported: a debugger looks both up by name, in a stripped interpreter
   among its dynamic symbols.  Another JIT compiler's registrar in the
   process (LLVM's, LuaJIT's, V8's) binds to these, the executable's
   coming first, and adds its images to the same list: gdb 13 reads the
   executable's descriptor for every object that defines one, so that is
   how it sees both.  Each side adds and removes only its own entries. */
PyAPI_DATA(struct jit_descriptor) __jit_debug_descriptor;
PyAPI_FUNC(void) __jit_debug_register_code(void);

struct jit_descriptor __jit_debug_descriptor = {1, JIT_NOACTION, NULL, NULL};

/* The debugger's breakpoint.  The barrier keeps the compiler from
   dropping the stores to the descriptor made before the call. */
__attribute__((noinline)) void
__jit_debug_register_code(void)
{
    __asm__ __volatile__("" ::: "memory");
}

/* Images */

enum {
    SECTION_NULL,
    SECTION_TEXT,
    SECTION_EH_FRAME,
    SECTION_SYMTAB,
    SECTION_STRTAB,
    SECTION_SHSTRTAB,
    SECTION_COUNT
};

/* The section names, in section order, each ending in a NUL. */
static const char section_names[] =
    "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";

struct _PyPerfDebugImage {
    struct jit_code_entry entry;
    const char *text;           /* the first slot */
    size_t stride;
    size_t slots;
    size_t named;               /* slots given a symbol, in order */
    int registered;             /* linked into __jit_debug_descriptor */
    int stale;                  /* has symbols the debugger was not told */
    unsigned char *elf;
    Elf64_Shdr *sections;       /* in elf */
    Elf64_Sym *symbols;         /* in elf; symbols[0] is the null one */
    char *strtab;               /* in elf, the last part of it */
    size_t strtab_cap;
    size_t bytes;               /* mapped at elf */
    int sealed;                 /* moved into debugger.images (seal()) */
};

static struct {
    /* CPU time the program may still charge notifications to (see
       may_tell()), as of last_ns of its CPU time. */
    int64_t credit_ns;
    int64_t last_ns;
    /* On CLOCK_MONOTONIC: the CPU time is not read again before then
       (see may_tell()). */
    int64_t next_look_ns;
    /* Where the ELF bytes of images go once they are sealed. */
    _PyPerfRegion images;
    /* The private memory of the last image sealed, kept for the next
       one: its pages are mapped, so reusing them costs no munmap() (a TLB
       flush) and no fault per page (every image's private memory has
       the same size, see new_image()). */
    unsigned char *spare;
} debugger = {DEBUGGER_BURST_NS, 0, 0, {NULL, NULL, 1}};

/* The CPU time of the process: it does not advance while a debugger has
   the process stopped, however slowly the debugger answers. */
static int64_t
cpu_time_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
notify(uint32_t action, struct _PyPerfDebugImage *image)
{
    __jit_debug_descriptor.action_flag = action;
    __jit_debug_descriptor.relevant_entry = &image->entry;
    __jit_debug_register_code();
    __jit_debug_descriptor.action_flag = JIT_NOACTION;
}

/* Tell the debugger, if one is attached, what image holds now: a
   debugger reads an image once, when it is registered, so an image that
   grew is unregistered and registered again. */
static void
tell_debugger(struct _PyPerfDebugImage *image)
{
    struct jit_code_entry *entry = &image->entry;
    struct jit_descriptor *d = &__jit_debug_descriptor;
    if (image->registered) {
        if (entry->prev_entry != NULL) {
            entry->prev_entry->next_entry = entry->next_entry;
        }
        else {
            d->first_entry = entry->next_entry;
        }
        if (entry->next_entry != NULL) {
            entry->next_entry->prev_entry = entry->prev_entry;
        }
        notify(JIT_UNREGISTER_FN, image);
    }
    entry->prev_entry = NULL;
    entry->next_entry = d->first_entry;
    if (d->first_entry != NULL) {
        d->first_entry->prev_entry = entry;
    }
    d->first_entry = entry;
    notify(JIT_REGISTER_FN, image);
    image->registered = 1;
    image->stale = 0;
}

/* Whether new names may be told now.  Each notification stops the
   process twice while a debugger listens, so it is charged NOTIFY_COST_NS
   against the CPU time the program runs between notifications, with up
   to DEBUGGER_BURST_NS saved: a debugger attached from the start does not
   make a program that starts many functions take much more than twice as
   long.  The rule depends only on what the program does, never on how
   fast the debugger answers: the names of functions first run outside
   start-up and imports (whose names are told together when they end)
   are told at once while the program starts new functions at up to one
   per millisecond of its CPU time, after bursts of up to a hundred.
   Past that, names reach the debugger with the next notification there
   is budget for, or when their image is full; a debugger that attaches
   later, or reads a core file, sees them all.  Without a debugger,
   notifications take nanoseconds. */
static int
may_tell(int64_t wall)
{
    if (debugger.credit_ns >= NOTIFY_COST_NS) {
        /* The credit is brought up to date only when it runs short:
           reading the CPU time is a system call, which a program that
           starts many functions would make for each. */
        return 1;
    }
    /* Nor before enough wall time (CLOCK_MONOTONIC, "wall") has passed
       for the CPU time to make up the difference (a process uses its CPU
       time no faster than that, but for its other threads, which only
       makes the rule stricter). */
    if (wall < debugger.next_look_ns) {
        return 0;
    }
    int64_t now = cpu_time_ns();
    if (now < debugger.last_ns) {
        /* A forked child's CPU time starts again from zero. */
        debugger.last_ns = now;
    }
    debugger.credit_ns += now - debugger.last_ns;
    if (debugger.credit_ns > DEBUGGER_BURST_NS) {
        debugger.credit_ns = DEBUGGER_BURST_NS;
    }
    debugger.last_ns = now;
    if (debugger.credit_ns < NOTIFY_COST_NS) {
        debugger.next_look_ns = wall + NOTIFY_COST_NS - debugger.credit_ns;
        return 0;
    }
    return 1;
}

static void
charge_notification(void)
{
    debugger.credit_ns -= NOTIFY_COST_NS;
}

static Elf64_Shdr *
add_section(struct _PyPerfDebugImage *image, int index, size_t *name,
            uint32_t type, uint64_t flags, size_t offset, size_t size)
{
    Elf64_Shdr *s = &image->sections[index];
    s->sh_name = (uint32_t)*name;
    *name += strlen(section_names + *name) + 1;
    s->sh_type = type;
    s->sh_flags = flags;
    s->sh_addr = (flags & SHF_ALLOC)
                 ? (Elf64_Addr)(uintptr_t)(image->elf + offset) : 0;
    s->sh_offset = offset;
    s->sh_size = size;
    s->sh_addralign = 8;
    return s;
}

/* Where the parts of an image for n slots are: the ELF header, the
   section headers, their names, .eh_frame (a CIE of cie_size bytes, an
   FDE of fde_size bytes per slot and the terminator), .symtab and the
   room for .strtab, which ends at "end". */
typedef struct {
    size_t sections_at;
    size_t names_at;
    size_t eh_frame_at;
    size_t eh_frame_size;
    size_t symtab_at;
    size_t strtab_at;
    size_t strtab_cap;
    size_t end;
} image_layout;

static image_layout
layout_image(size_t slots, size_t cie_size, size_t fde_size)
{
    image_layout at;
    at.sections_at = sizeof(Elf64_Ehdr);
    at.names_at = at.sections_at + SECTION_COUNT * sizeof(Elf64_Shdr);
    at.eh_frame_at = _Py_SIZE_ROUND_UP(at.names_at + sizeof(section_names), 8);
    at.eh_frame_size = cie_size + slots * fde_size + 4;
    at.symtab_at = _Py_SIZE_ROUND_UP(at.eh_frame_at + at.eh_frame_size, 8);
    at.strtab_at = at.symtab_at + (slots + 1) * sizeof(Elf64_Sym);
    at.strtab_cap = 1 + slots * NAME_MAX_BYTES;
    at.end = at.strtab_at + at.strtab_cap;
    return at;
}

/* A new image for the slots from code on, up to arena_end, with their
   unwind information and no symbols; NULL if there is no memory. */
static struct _PyPerfDebugImage *
new_image(const char *code, size_t size, size_t stride,
          const char *arena_end)
{
    size_t slots = Py_MIN((size_t)IMAGE_SLOTS,
                          (size_t)(arena_end - code) / stride);
    /* The CIE and the first slot's FDE, which the others copy: the FDEs
       differ only in their address (the 8 bytes after the CIE pointer,
       which is relative).  So .eh_frame takes exactly what the slots
       need, where room for the longest FDE possible was up to a fifth of
       what sealing an image copied. */
    unsigned char first[_PyPerfUnwind_CIE_MAX_SIZE
                        + _PyPerfUnwind_FDE_MAX_SIZE];
    _PyPerfBuf u = {first, 0, sizeof(first)};
    size_t cie = _PyPerfUnwind_WriteCIE(&u, 1);
    size_t cie_size = u.len - cie;
    size_t fde = _PyPerfUnwind_WriteFDE(&u, cie, 1, size,
                                        (int64_t)(uintptr_t)code, 0);
    size_t fde_size = u.len - fde;
    image_layout at = layout_image(slots, cie_size, fde_size);
    /* Room for IMAGE_SLOTS slots whatever this image has (fewer at the
       end of an arena: a third of perf_jit's images), so that the private
       memory of any sealed image can be reused for the next one (see
       seal()): the sizes above are the same for every image.  Pages that
       are never written are never touched. */
    long page = sysconf(_SC_PAGESIZE);
    size_t total = _Py_SIZE_ROUND_UP(
        layout_image(IMAGE_SLOTS, cie_size, fde_size).end,
        (size_t)(page > 0 ? page : 4096));
    struct _PyPerfDebugImage *image = PyMem_RawCalloc(1, sizeof(*image));
    if (image == NULL) {
        return NULL;
    }
    /* Private while it grows (see seal()).  Reused memory holds the
       last image: every byte up to .strtab is written or zeroed below,
       and .strtab as it grows. */
    char *mem;
    if (debugger.spare != NULL) {
        mem = (char *)debugger.spare;
        debugger.spare = NULL;
    }
    else {
        mem = mmap(NULL, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            PyMem_RawFree(image);
            return NULL;
        }
    }
    image->bytes = total;
    image->text = code;
    image->stride = stride;
    image->slots = slots;
    image->elf = (unsigned char *)mem;
    image->sections = (Elf64_Shdr *)(image->elf + at.sections_at);
    image->symbols = (Elf64_Sym *)(image->elf + at.symtab_at);
    image->strtab = (char *)image->elf + at.strtab_at;
    image->strtab_cap = at.strtab_cap;

    /* The headers, the padding after .eh_frame and the null symbol are
       partly or wholly zero. */
    memset(image->elf, 0, at.eh_frame_at);
    memset(image->elf + at.eh_frame_at + at.eh_frame_size, 0,
           at.symtab_at + sizeof(Elf64_Sym)
           - (at.eh_frame_at + at.eh_frame_size));
    image->strtab[0] = '\0';

    Elf64_Ehdr *ehdr = (Elf64_Ehdr *)image->elf;
    memcpy(ehdr->e_ident, ELFMAG, SELFMAG);
    ehdr->e_ident[EI_CLASS] = ELFCLASS64;
    ehdr->e_ident[EI_DATA] = ELFDATA2LSB;
    ehdr->e_ident[EI_VERSION] = EV_CURRENT;
    ehdr->e_ident[EI_OSABI] = ELFOSABI_SYSV;
    ehdr->e_type = ET_REL;
    ehdr->e_machine = IMAGE_MACHINE;
    ehdr->e_version = EV_CURRENT;
    ehdr->e_flags = IMAGE_FLAGS;
    ehdr->e_shoff = at.sections_at;
    ehdr->e_ehsize = sizeof(Elf64_Ehdr);
    ehdr->e_shentsize = sizeof(Elf64_Shdr);
    ehdr->e_shnum = SECTION_COUNT;
    ehdr->e_shstrndx = SECTION_SHSTRTAB;
    memcpy(image->elf + at.names_at, section_names, sizeof(section_names));

    /* One FDE per slot, with absolute addresses: the image is in memory
       of its own, too far from the code for 4-byte pc-relative ones. */
    _PyPerfBuf b = {image->elf + at.eh_frame_at, 0, at.eh_frame_size};
    _PyPerfBuf_PutBytes(&b, first, u.len);
    for (size_t i = 1; i < slots; i++) {
        size_t next = b.len;
        _PyPerfBuf_PutBytes(&b, first + fde, fde_size);
        uint32_t cie_pointer = (uint32_t)(next + 4 - cie);
        uint64_t pc_begin = (uint64_t)(uintptr_t)(code + i * stride);
        memcpy(b.buf + next + 4, &cie_pointer, 4);
        memcpy(b.buf + next + 8, &pc_begin, 8);
    }
    _PyPerfBuf_PutU32(&b, 0);               /* the terminator */
    assert(b.len == at.eh_frame_size);

    size_t name = 1;
    Elf64_Shdr *text = add_section(image, SECTION_TEXT, &name, SHT_NOBITS,
                                   SHF_ALLOC | SHF_EXECINSTR,
                                   at.eh_frame_at, slots * stride);
    text->sh_addr = (Elf64_Addr)(uintptr_t)code;
    text->sh_addralign = 16;
    add_section(image, SECTION_EH_FRAME, &name, SHT_PROGBITS, SHF_ALLOC,
                at.eh_frame_at, b.len);
    Elf64_Shdr *symtab = add_section(image, SECTION_SYMTAB, &name,
                                     SHT_SYMTAB, 0, at.symtab_at,
                                     sizeof(Elf64_Sym));
    symtab->sh_link = SECTION_STRTAB;
    symtab->sh_info = 1;                    /* the first global */
    symtab->sh_entsize = sizeof(Elf64_Sym);
    add_section(image, SECTION_STRTAB, &name, SHT_STRTAB, 0, at.strtab_at, 1);
    add_section(image, SECTION_SHSTRTAB, &name, SHT_STRTAB, 0, at.names_at,
                sizeof(section_names));
    image->sections[SECTION_SHSTRTAB].sh_addralign = 1;
    image->sections[SECTION_STRTAB].sh_addralign = 1;

    image->entry.symfile_addr = (const char *)image->elf;
    image->entry.symfile_size = at.strtab_at + 1;

    return image;
}

/* Append the symbol of the trampoline at code to image, whose next slot
   it is.  Debuggers get "py::QUALNAME (FILENAME)": gdb would show a name
   that ends in ".py", like the profilers' "py::QUALNAME:FILENAME", as
   "[py]".  The sizes that make the symbol visible are updated last, so
   that a core dumped at any point holds a consistent image. */
static void
add_symbol(struct _PyPerfDebugImage *image, const char *code, size_t size,
           const char *name, size_t len, size_t qualname_end)
{
    Elf64_Shdr *strtab = &image->sections[SECTION_STRTAB];
    size_t at = strtab->sh_size;
    char *dest = image->strtab + at;
    const char *parts[4] = {name, " (", name + qualname_end + 1, ")"};
    size_t lengths[4] = {qualname_end, 2, len - qualname_end - 1, 1};
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        size_t k = Py_MIN(lengths[i], (size_t)NAME_MAX_BYTES - 1 - n);
        if (k < lengths[i]) {
            /* Too long: cut short, at a character boundary. */
            while (k > 0 && ((unsigned char)parts[i][k] & 0xc0) == 0x80) {
                k--;
            }
            memcpy(dest + n, parts[i], k);
            n += k;
            break;
        }
        memcpy(dest + n, parts[i], k);
        n += k;
    }
    dest[n] = '\0';
    assert(at + n + 1 <= image->strtab_cap);

    Elf64_Sym *sym = &image->symbols[1 + image->named];
    sym->st_name = (uint32_t)at;
    sym->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym->st_other = STV_DEFAULT;
    sym->st_shndx = SECTION_TEXT;
    sym->st_value = (Elf64_Addr)(code - image->text);
    sym->st_size = size;

    image->named++;
    strtab->sh_size = at + n + 1;
    image->sections[SECTION_SYMTAB].sh_size =
        (1 + image->named) * sizeof(Elf64_Sym);
    image->entry.symfile_size = strtab->sh_offset + strtab->sh_size;
    image->stale = 1;
}

/* Move image, which gets no more symbols, into memory shared with forked
   children.  While it grows, an image is in memory of its own, which a
   fork copies: a child must never see the parent change an image.  If
   there is no memory, it stays where it is. */
static void
seal(struct _PyPerfDebugImage *image)
{
    if (image->sealed) {
        return;
    }
    /* All of it but the names' room that is left. */
    size_t used = (size_t)image->entry.symfile_size;
    long page = sysconf(_SC_PAGESIZE);
    size_t total = _Py_SIZE_ROUND_UP(used, (size_t)(page > 0 ? page : 4096));
    unsigned char *mem = _PyPerfRegion_Alloc(&debugger.images, total,
                                             PROT_READ | PROT_WRITE);
    if (mem == NULL) {
        return;
    }
#ifdef MADV_POPULATE_WRITE
    /* Every page is written below: one call maps them all, where a fault
       per page made a new function cost a tenth more with perf. */
    (void)madvise(mem, total, MADV_POPULATE_WRITE);
#endif
    memcpy(mem, image->elf, used);
    unsigned char *old = image->elf;
    ptrdiff_t delta = mem - old;
    image->elf = mem;
    image->sections = (Elf64_Shdr *)((char *)image->sections + delta);
    image->symbols = (Elf64_Sym *)((char *)image->symbols + delta);
    image->strtab += delta;
    image->sections[SECTION_EH_FRAME].sh_addr += delta;
    /* A debugger that was told keeps its copy: the bytes are the same. */
    image->entry.symfile_addr = (const char *)mem;
    image->slots = image->named;
    image->sealed = 1;
    if (debugger.spare == NULL) {
        debugger.spare = old;
    }
    else {
        (void)munmap(old, image->bytes);
    }
    image->bytes = total;
}

void
_PyPerfDebugger_Describe(struct _PyPerfDebugImage **current,
                         const char *code, size_t size, size_t stride,
                         const char *arena_end, const char *name,
                         size_t len, size_t qualname_end, int batch,
                         int64_t now)
{
    struct _PyPerfDebugImage *image = *current;
    int is_new = 0;
    if (image == NULL || image->stride != stride
        || code != image->text + image->named * stride
        || image->named == image->slots)
    {
        if (image != NULL) {
            /* It never changes again. */
            if (image->stale) {
                tell_debugger(image);
                charge_notification();
            }
            seal(image);
        }
        image = new_image(code, size, stride, arena_end);
        *current = image;
        if (image == NULL) {
            /* No memory: debuggers will not know this one. */
            return;
        }
        is_new = 1;
    }
    add_symbol(image, code, size, name, len, qualname_end);
    /* A new image is told whatever the budget (once per IMAGE_SLOTS
       trampolines), and charged to it: a debugger unwinds through the
       slots it covers only once it is told. */
    if ((!batch && may_tell(now)) || is_new) {
        tell_debugger(image);
        charge_notification();
    }
    if (image->named == image->slots) {
        seal(image);
    }
}

void
_PyPerfDebugger_AfterFork(void)
{
    /* The rest of the parent's reservation is the parent's to use. */
    debugger.images.next = debugger.images.end = NULL;
}

void
_PyPerfDebugger_Flush(struct _PyPerfDebugImage *image)
{
    if (image == NULL || !image->stale) {
        return;
    }
    if (may_tell(_PyPerfFile_Now())) {
        tell_debugger(image);
        charge_notification();
    }
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */
