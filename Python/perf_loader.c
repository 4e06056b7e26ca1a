/* Arenas that the dynamic loader knows, so that in-process unwinders walk
   through trampolines.

   glibc's backtrace(), libgcc's _Unwind_Backtrace() and C++ exceptions,
   and libunwind find a frame's unwind information through the dynamic
   loader: libgcc 12 asks glibc's _dl_find_object(), which takes no lock
   and allocates nothing, and libunwind walks dl_iterate_phdr().  Neither
   knows anonymous memory, so both stopped at the first trampoline.  An
   arena made here is the text of a small ELF object opened with dlopen(),
   whose .eh_frame_hdr lists an FDE for each slot.  Nothing is registered
   with libgcc: __register_frame() takes a lock that a signal handler can
   find held.

   The object has a read-only segment (ELF and program headers, a dynamic
   section, an empty symbol table, .eh_frame_hdr and .eh_frame) and the
   text, which has no bytes in the file: the loader maps anonymous memory
   for it.  Every pointer in the read-only segment is relative, so that
   segment is the same for every arena of one slot stride.  It is built
   once, in shared memory, and each new object's read-only segment is then
   remapped onto those pages (mremap() of a shared mapping with old size
   0): an arena costs no memory for its unwind data, and a forked child
   shares it like the text.  The text is replaced by shared anonymous
   memory, which Python/perf_arena.c fills.  /proc/PID/maps shows both as
   "/dev/zero (deleted)", as it shows other arenas, to perf and in core
   files.

   dlopen() reads the object from a memfd holding only the first page
   (the loader reads nothing else; the rest is a hole).  Its path is
   /proc/PID/fd/N, not /proc/self/fd/N: a debugger reads each new object's
   path while dlopen() runs, in its own process, where /proc/self/fd/N is
   one of its own descriptors (gdb blocked reading its own pipe).  Once
   loaded, the object's name is emptied, as the main program's is, so
   that debuggers and core files skip it.  The loader returns the object
   already loaded under a name instead of loading another: descriptor
   numbers are reused, so "./" components make each path of the process
   new.

   If anything fails (no memfd_create(), no /proc, a loader that
   refuses), the process keeps anonymous arenas, which unwinders in the
   process do not walk through, as before this file. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#if defined(HAVE_MEMFD_CREATE) && defined(HAVE_DLFCN_H)
#  include <dlfcn.h>              // dlopen(), dlinfo()
#  include <elf.h>
#  include <link.h>               // struct link_map
#  include <sys/mman.h>           // memfd_create(), mmap(), mremap()
#  include <unistd.h>
#  define LOADER_KNOWS_ARENAS
#endif

#if !defined(LOADER_KNOWS_ARENAS)
#elif defined(__x86_64__)
#  define LOADER_MACHINE EM_X86_64
#  define LOADER_FLAGS 0
#elif defined(__aarch64__)
#  define LOADER_MACHINE EM_AARCH64
#  define LOADER_FLAGS 0
#elif defined(__riscv) && __riscv_xlen == 64
#  define LOADER_MACHINE EM_RISCV
   /* The loader refuses an object whose float ABI is not its own. */
#  if defined(__riscv_float_abi_double)
#    define LOADER_FLAGS EF_RISCV_FLOAT_ABI_DOUBLE
#  elif defined(__riscv_float_abi_single)
#    define LOADER_FLAGS EF_RISCV_FLOAT_ABI_SINGLE
#  else
#    define LOADER_FLAGS 0
#  endif
#else
#  undef LOADER_KNOWS_ARENAS
#endif

#ifdef LOADER_KNOWS_ARENAS

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

#define PHDRS 5
#define DYNAMIC_ENTRIES 5

/* The read-only segment for one slot stride and text size. */
typedef struct {
    size_t stride;
    size_t text_size;
    size_t ro_size;               /* whole pages; the text follows */
    char *ro;                     /* shared memory, read-only */
} loader_image;

/* perf and perf_jit have a stride each, and arenas of 5 sizes
   (Python/perf_arena.c); room for a few more. */
#define MAX_IMAGES 16
static loader_image images[MAX_IMAGES];
static int failed;                /* once: anonymous arenas from then on */
static unsigned long opened;      /* objects of this process and its
                                     ancestors, for distinct paths */

/* Lay out the object and write its read-only segment into buf (of
   image->ro_size bytes, zeroed).  With buf NULL, compute ro_size only.
   The first page holds what the loader reads; the unwind data starts on
   the second. */
static void
write_image(loader_image *image, size_t code_size, size_t page,
            unsigned char *buf)
{
    size_t slots = image->text_size / image->stride;
    size_t hdr_off = page;
    size_t hdr_size = 12 + 8 * slots;
    size_t eh_off = _Py_SIZE_ROUND_UP(hdr_off + hdr_size, 8);
    size_t eh_max = (_PyPerfUnwind_CIE_MAX_SIZE
                     + slots * _PyPerfUnwind_FDE_MAX_SIZE + 4);
    if (buf == NULL) {
        image->ro_size = _Py_SIZE_ROUND_UP(eh_off + eh_max, page);
        return;
    }
    size_t text_off = image->ro_size;

    /* .eh_frame_hdr: the search table, sorted by address, in the only
       encoding that libgcc searches (datarel sdata4); its entries are
       added with the FDEs. */
    _PyPerfBuf hdr = {buf + hdr_off, 0, hdr_size};
    _PyPerfBuf_PutU8(&hdr, 1);              /* version */
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_pcrel | DW_EH_PE_sdata4);
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_udata4);
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_datarel | DW_EH_PE_sdata4);
    _PyPerfBuf_PutU32(&hdr, (uint32_t)(eh_off - (hdr_off + 4)));
    _PyPerfBuf_PutU32(&hdr, (uint32_t)slots);

    /* .eh_frame: a CIE and an FDE per slot, pc-relative.  The FDEs
       differ only in their CIE pointer and start address (the fields at
       4 and 8), which are relative to where they are: the first is
       written, the others are copies of it with those fields moved (at
       startup, writing each took most of the time of an arena). */
    _PyPerfBuf eh = {buf + eh_off, 0, image->ro_size - eh_off};
    size_t cie = _PyPerfUnwind_WriteCIE(&eh, 0);
    size_t first = _PyPerfUnwind_WriteFDE(&eh, cie, 0, code_size,
                                          (int64_t)text_off, (int64_t)eh_off);
    size_t fde_size = eh.len - first;
    assert(first + slots * fde_size + 4 <= eh.cap);
    uint32_t cie_pointer, start;
    memcpy(&cie_pointer, eh.buf + first + 4, 4);
    memcpy(&start, eh.buf + first + 8, 4);
    for (size_t i = 0; i < slots; i++) {
        size_t fde = first + i * fde_size;
        if (i > 0) {
            memcpy(eh.buf + fde, eh.buf + first, fde_size);
            uint32_t moved = cie_pointer + (uint32_t)(i * fde_size);
            memcpy(eh.buf + fde + 4, &moved, 4);
            moved = start + (uint32_t)(i * image->stride)
                    - (uint32_t)(i * fde_size);
            memcpy(eh.buf + fde + 8, &moved, 4);
        }
        _PyPerfBuf_PutU32(&hdr, (uint32_t)(text_off + i * image->stride
                                           - hdr_off));
        _PyPerfBuf_PutU32(&hdr, (uint32_t)(eh_off + fde - hdr_off));
    }
    eh.len = first + slots * fde_size;
    _PyPerfBuf_PutU32(&eh, 0);              /* end of .eh_frame */

    /* The first page: headers, the dynamic section, an empty symbol
       table (glibc's loader needs DT_SYMTAB, and dladdr() DT_STRTAB and
       DT_STRSZ). */
    size_t dyn_off = sizeof(Elf64_Ehdr) + PHDRS * sizeof(Elf64_Phdr);
    size_t sym_off = dyn_off + DYNAMIC_ENTRIES * sizeof(Elf64_Dyn);
    size_t str_off = sym_off + sizeof(Elf64_Sym);
    assert(str_off + 1 <= page);

    Elf64_Ehdr *ehdr = (Elf64_Ehdr *)buf;
    memcpy(ehdr->e_ident, ELFMAG, SELFMAG);
    ehdr->e_ident[EI_CLASS] = ELFCLASS64;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    ehdr->e_ident[EI_DATA] = ELFDATA2MSB;
#else
    ehdr->e_ident[EI_DATA] = ELFDATA2LSB;
#endif
    ehdr->e_ident[EI_VERSION] = EV_CURRENT;
    ehdr->e_ident[EI_OSABI] = ELFOSABI_SYSV;
    ehdr->e_type = ET_DYN;
    ehdr->e_machine = LOADER_MACHINE;
    ehdr->e_version = EV_CURRENT;
    ehdr->e_phoff = sizeof(Elf64_Ehdr);
    ehdr->e_flags = LOADER_FLAGS;
    ehdr->e_ehsize = sizeof(Elf64_Ehdr);
    ehdr->e_phentsize = sizeof(Elf64_Phdr);
    ehdr->e_phnum = PHDRS;
    ehdr->e_shentsize = sizeof(Elf64_Shdr);

    Elf64_Phdr *ph = (Elf64_Phdr *)(buf + ehdr->e_phoff);
    ph[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R,
                         .p_filesz = image->ro_size,
                         .p_memsz = image->ro_size, .p_align = page};
    ph[1] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R | PF_X,
                         .p_offset = text_off, .p_vaddr = text_off,
                         .p_paddr = text_off, .p_filesz = 0,
                         .p_memsz = image->text_size, .p_align = page};
    ph[2] = (Elf64_Phdr){.p_type = PT_DYNAMIC, .p_flags = PF_R,
                         .p_offset = dyn_off, .p_vaddr = dyn_off,
                         .p_paddr = dyn_off,
                         .p_filesz = DYNAMIC_ENTRIES * sizeof(Elf64_Dyn),
                         .p_memsz = DYNAMIC_ENTRIES * sizeof(Elf64_Dyn),
                         .p_align = 8};
    ph[3] = (Elf64_Phdr){.p_type = PT_GNU_EH_FRAME, .p_flags = PF_R,
                         .p_offset = hdr_off, .p_vaddr = hdr_off,
                         .p_paddr = hdr_off, .p_filesz = hdr_size,
                         .p_memsz = hdr_size, .p_align = 4};
    /* Without it, the loader would make the thread stacks executable. */
    ph[4] = (Elf64_Phdr){.p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W,
                         .p_align = 16};

    Elf64_Dyn *dyn = (Elf64_Dyn *)(buf + dyn_off);
    dyn[0] = (Elf64_Dyn){.d_tag = DT_SYMTAB, .d_un.d_ptr = sym_off};
    dyn[1] = (Elf64_Dyn){.d_tag = DT_SYMENT, .d_un.d_val = sizeof(Elf64_Sym)};
    dyn[2] = (Elf64_Dyn){.d_tag = DT_STRTAB, .d_un.d_ptr = str_off};
    dyn[3] = (Elf64_Dyn){.d_tag = DT_STRSZ, .d_un.d_val = 1};
    dyn[4] = (Elf64_Dyn){.d_tag = DT_NULL};
    /* The symbol and the string table are zero already. */
}

static loader_image *
get_image(size_t text_size, size_t stride, size_t code_size, size_t page)
{
    loader_image *image = NULL;
    for (int i = 0; i < MAX_IMAGES; i++) {
        if (images[i].stride == stride && images[i].text_size == text_size) {
            return &images[i];
        }
        if (image == NULL && images[i].stride == 0) {
            image = &images[i];
        }
    }
    if (image == NULL) {
        return NULL;
    }
    loader_image made = {.stride = stride, .text_size = text_size};
    write_image(&made, code_size, page, NULL);
    char *ro = mmap(NULL, made.ro_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ro == MAP_FAILED) {
        return NULL;
    }
    write_image(&made, code_size, page, (unsigned char *)ro);
    if (mprotect(ro, made.ro_size, PROT_READ) < 0) {
        munmap(ro, made.ro_size);
        return NULL;
    }
    made.ro = ro;
    *image = made;
    return image;
}

/* Open the object for image; return where its text starts, or NULL.
   The descriptor of the memfd is closed in every case. */
static char *
open_object(loader_image *image, size_t page)
{
    char self[32];
    char pid[32];
    ssize_t len = readlink("/proc/self", self, sizeof(self) - 1);
    PyOS_snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    if (len <= 0 || (size_t)len != strlen(pid)
        || memcmp(self, pid, (size_t)len) != 0)
    {
        /* /proc is not this process's PID namespace's. */
        return NULL;
    }
    int fd = memfd_create("python-perf-arena", MFD_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    if (ftruncate(fd, (off_t)image->ro_size) < 0
        || pwrite(fd, image->ro, page, 0) != (ssize_t)page)
    {
        close(fd);
        return NULL;
    }
    /* /proc/PID/fd/ then a "./" per 1 bit and a "/" per 0 bit of the
       count of objects opened so far, from the highest 1 bit. */
    char path[64 + 3 * 8 * sizeof(unsigned long)];
    int n = PyOS_snprintf(path, sizeof(path), "/proc/%s/fd/", pid);
    for (int bit = 8 * (int)sizeof(unsigned long) - 1; bit >= 0; bit--) {
        if ((opened >> bit) == 0) {
            continue;
        }
        if ((opened >> bit) & 1) {
            path[n++] = '.';
        }
        path[n++] = '/';
    }
    PyOS_snprintf(path + n, sizeof(path) - n, "%d", fd);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    if (handle == NULL) {
        return NULL;
    }
    opened++;
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) < 0 || map == NULL) {
        return NULL;                /* loaded, and never used */
    }
    map->l_name[0] = '\0';
    char *base = (char *)map->l_addr;
    if (mremap(image->ro, 0, image->ro_size, MREMAP_MAYMOVE | MREMAP_FIXED,
               base) == MAP_FAILED)
    {
        /* An emulator (qemu-user) may not make such an alias: a copy,
           which costs the memory the alias saves. */
        if (mmap(base, image->ro_size, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        {
            return NULL;
        }
        memcpy(base, image->ro, image->ro_size);
        if (mprotect(base, image->ro_size, PROT_READ) < 0) {
            return NULL;
        }
    }
    return base + image->ro_size;
}

char *
_PyPerfLoader_NewText(size_t size, size_t stride, size_t code_size)
{
    if (failed) {
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    loader_image *image = NULL;
    char *text = NULL;
    if (page > 0 && size % (size_t)page == 0) {
        image = get_image(size, stride, code_size, (size_t)page);
    }
    if (image != NULL) {
        text = open_object(image, (size_t)page);
    }
    if (text != NULL) {
        text = mmap(text, size, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (text == MAP_FAILED) {
            text = NULL;
        }
    }
    if (text == NULL) {
        failed = 1;
    }
    return text;
}

#else  /* !LOADER_KNOWS_ARENAS */

char *
_PyPerfLoader_NewText(size_t Py_UNUSED(size), size_t Py_UNUSED(stride),
                      size_t Py_UNUSED(code_size))
{
    return NULL;
}

#endif  /* LOADER_KNOWS_ARENAS */
#endif  /* PY_HAVE_PERF_TRAMPOLINE */
