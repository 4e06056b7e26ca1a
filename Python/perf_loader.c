/* Text that the dynamic loader knows, so that in-process unwinders walk
   through trampolines.

   glibc's backtrace(), libgcc's _Unwind_Backtrace() and C++ exceptions,
   and libunwind find a frame's unwind information through the dynamic
   loader: libgcc 12 asks glibc's _dl_find_object(), which takes no lock
   and allocates nothing, and libunwind walks dl_iterate_phdr().  Neither
   knows anonymous memory, so both stop at the first trampoline.  Nothing
   is registered with libgcc either: __register_frame() takes a lock that
   a signal handler can find held.

   So each backend's arenas are carved out of the text of one small ELF
   object that dlopen() loads once: its .eh_frame_hdr lists an FDE for
   every slot handed out so far.  The loader is entered only when a
   backend is activated, never when a trampoline is made: dlopen() waits
   for the loader's locks, which another thread may hold while it waits
   for the GIL (a dl_iterate_phdr() callback written in Python, a
   library's constructor that runs Python), and a forked child of a
   threaded parent may never get them.  _PyPerfLoader_Open() is called
   with the GIL released (sys.activate_stack_trampoline()) or before any
   other thread can run Python (-X perf at start-up), and not at all in a
   forked child, whose arenas come from what its parent opened, or are
   anonymous memory.

   The object has a read-only segment (ELF and program headers, a dynamic
   section, an empty symbol table and its hash table, .eh_frame_hdr and
   .eh_frame) and the text, which has no bytes in the file.  The read-only segment is shared
   anonymous memory, moved over the loader's private copy: each new
   arena's FDEs and search-table entries are written there, made writable
   for the time, then the table's count grows.  An entry depends on
   nothing but its slot's place in the text, so a forked child, which
   shares these pages, writes the same bytes as its parent for the same
   slots, and the count only grows.  The text is shared anonymous memory,
   reserved and made accessible an arena at a time, which
   Python/perf_arena.c fills; a forked child replaces the part its parent
   had not handed out before it uses any.  /proc/PID/maps shows the text
   as "/dev/zero (deleted)", as it shows anonymous arenas, to perf and in
   core files.

   dlopen() reads the object's first page from the memfd through
   /proc/PID/task/TID/fd/N: a debugger reads each new object's path while
   dlopen() runs, in its own process, where /proc/self/... would be its
   own; and the loader keeps the name, to return this object to a later
   dlopen() of the same path, so the path is not one a program opens its
   own memfds by (/proc/self/fd/N, /proc/PID/fd/N), nor one of ours
   before.  Once loaded, the object's name is emptied, as the main
   program's is, so that debuggers and core files skip it.  (The loader
   also tells files apart by their inode: only a memfd that got the
   closed one's number again, after 2^32 more inodes of that file system,
   would be taken for this object.)

   If anything fails (no memfd_create(), no /proc, a loader that refuses,
   a forked child, more slots than the object has), arenas are anonymous
   memory, which unwinders in the process do not walk through. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#if defined(HAVE_MEMFD_CREATE) && defined(HAVE_DLFCN_H)
#  include <dlfcn.h>              // dlopen(), dlinfo()
#  include <elf.h>
#  include <link.h>               // struct link_map
#  include <pthread.h>
#  include <sys/mman.h>           // memfd_create(), mmap()
#  include <sys/syscall.h>        // SYS_gettid
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
#define DYNAMIC_ENTRIES 6

/* Slots of an object: 8 MiB of perf trampolines, 56 MiB of perf_jit
   ones (x86-64), of address space reserved, not memory.  The unwind data
   of all of them takes 20 MiB of address space; pages of it are used as
   slots are handed out.  Arenas beyond are anonymous. */
#define MAX_SLOTS ((size_t)1 << 19)

/* The object of one slot stride.  Set up by _PyPerfLoader_Open() under
   open_lock, then used by _PyPerfLoader_NewText() under the GIL once
   "ready" is set. */
typedef struct {
    size_t stride;              /* 0: this entry is free */
    int ready;                  /* set last, atomically */
    size_t text_size;
    char *text;                 /* in the object */
    size_t used;                /* bytes of text handed out */
    unsigned long forks;        /* "forks" when the rest of the text was
                                   reserved by this process */
    unsigned char *base;        /* the object's read-only segment */
    size_t ro_size;
    size_t page;
    size_t hdr_off;             /* .eh_frame_hdr, from the object's base */
    size_t fde_off;             /* the first FDE */
    size_t fde_size;
    size_t text_off;
    unsigned char fde[_PyPerfUnwind_FDE_MAX_SIZE];  /* the first FDE */
} loader_object;

/* perf and perf_jit have a stride each; room for one more. */
#define MAX_OBJECTS 3
static loader_object objects[MAX_OBJECTS];
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process that started the runtime: a forked child never opens. */
static long start_pid;
/* Forks since an object was opened, counted in each child (a descendant
   may have the same PID, as the first process of a PID namespace). */
static unsigned long forks;
static int watching_forks;

static void
count_fork(void)
{
    forks++;
}

/* Protect the pages of [from, to) of obj's read-only segment with prot.
   (They are written with the segment made writable for the time, not
   through a second mapping, which doubled the address space it takes.) */
static int
protect(loader_object *obj, size_t from, size_t to, int prot)
{
    size_t start = from / obj->page * obj->page;
    return mprotect(obj->base + start, to - start, prot);
}

#ifndef MADV_DONTDUMP
#  define MADV_DONTDUMP 0
#  define MADV_DODUMP 0
#endif

/* Core files and gcore keep only the parts in use (advice MADV_DODUMP)
   of [start, start + size): the rest of the reservations, shared memory,
   would be dumped whole, and read into memory for it. */
static void
dump(loader_object *obj, char *start, size_t size, int advice)
{
    if (advice != 0) {
        uintptr_t page = obj->page;
        uintptr_t from = (uintptr_t)start / page * page;
        uintptr_t to = ((uintptr_t)start + size + page - 1) / page * page;
        (void)madvise((void *)from, to - from, advice);
    }
}

/* Lay out the object for obj->stride and code_size bytes of code per
   slot, and write its headers, .eh_frame_hdr's header and the CIE into
   buf (of *ro_size bytes, zeroed).  With buf NULL, compute *ro_size and
   the offsets in obj only. */
static void
write_headers(loader_object *obj, size_t code_size, size_t page,
              unsigned char *buf, size_t *ro_size)
{
    size_t slots = obj->text_size / obj->stride;
    size_t hdr_size = 12 + 8 * slots;
    size_t eh_off = _Py_SIZE_ROUND_UP(page + hdr_size, 8);
    if (buf == NULL) {
        /* The sizes of the CIE and of an FDE, which do not depend on
           where they are. */
        unsigned char scratch[_PyPerfUnwind_CIE_MAX_SIZE
                              + _PyPerfUnwind_FDE_MAX_SIZE];
        _PyPerfBuf b = {scratch, 0, sizeof(scratch)};
        size_t cie = _PyPerfUnwind_WriteCIE(&b, 0);
        size_t fde = _PyPerfUnwind_WriteFDE(&b, cie, 0, code_size, 0, 0);
        obj->hdr_off = page;
        obj->fde_off = eh_off + fde;
        obj->fde_size = b.len - fde;
        *ro_size = _Py_SIZE_ROUND_UP(obj->fde_off + slots * obj->fde_size,
                                     page);
        obj->text_off = *ro_size;
        return;
    }

    /* .eh_frame_hdr: the search table, sorted by address, in the only
       encoding that libgcc searches (datarel sdata4).  Its entries and
       its count are written as slots are handed out (publish()). */
    _PyPerfBuf hdr = {buf + obj->hdr_off, 0, hdr_size};
    _PyPerfBuf_PutU8(&hdr, 1);              /* version */
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_pcrel | DW_EH_PE_sdata4);
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_udata4);
    _PyPerfBuf_PutU8(&hdr, DW_EH_PE_datarel | DW_EH_PE_sdata4);
    _PyPerfBuf_PutU32(&hdr, (uint32_t)(eh_off - (obj->hdr_off + 4)));
    _PyPerfBuf_PutU32(&hdr, 0);             /* no entries yet */

    /* .eh_frame: the CIE, then an FDE per slot, pc-relative.  The FDEs
       differ only in their CIE pointer and start address (the fields at
       4 and 8), which are relative to where they are: the first is kept,
       the others are copies of it with those fields moved.  What follows
       the last FDE written is zero, which ends .eh_frame. */
    _PyPerfBuf eh = {buf + eh_off, 0, *ro_size - eh_off};
    size_t cie = _PyPerfUnwind_WriteCIE(&eh, 0);
    size_t first = _PyPerfUnwind_WriteFDE(&eh, cie, 0, code_size,
                                          (int64_t)obj->text_off,
                                          (int64_t)eh_off);
    assert(eh_off + first == obj->fde_off);
    assert(eh.len - first == obj->fde_size);
    memcpy(obj->fde, eh.buf + first, obj->fde_size);
    memset(eh.buf + first, 0, obj->fde_size);

    /* The first page: headers, the dynamic section, an empty symbol
       table (glibc's loader needs DT_SYMTAB, and dladdr() DT_STRTAB and
       DT_STRSZ) and its hash table (musl's loader searches every
       object's for the symbols of the objects loaded with it, and
       dladdr() counts the symbols from it). */
    size_t dyn_off = sizeof(Elf64_Ehdr) + PHDRS * sizeof(Elf64_Phdr);
    size_t sym_off = dyn_off + DYNAMIC_ENTRIES * sizeof(Elf64_Dyn);
    size_t hash_off = sym_off + sizeof(Elf64_Sym);
    size_t str_off = hash_off + 4 * sizeof(uint32_t);
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
                         .p_filesz = *ro_size, .p_memsz = *ro_size,
                         .p_align = page};
    ph[1] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R | PF_X,
                         .p_offset = obj->text_off,
                         .p_vaddr = obj->text_off,
                         .p_paddr = obj->text_off, .p_filesz = 0,
                         .p_memsz = obj->text_size, .p_align = page};
    ph[2] = (Elf64_Phdr){.p_type = PT_DYNAMIC, .p_flags = PF_R,
                         .p_offset = dyn_off, .p_vaddr = dyn_off,
                         .p_paddr = dyn_off,
                         .p_filesz = DYNAMIC_ENTRIES * sizeof(Elf64_Dyn),
                         .p_memsz = DYNAMIC_ENTRIES * sizeof(Elf64_Dyn),
                         .p_align = 8};
    ph[3] = (Elf64_Phdr){.p_type = PT_GNU_EH_FRAME, .p_flags = PF_R,
                         .p_offset = obj->hdr_off, .p_vaddr = obj->hdr_off,
                         .p_paddr = obj->hdr_off, .p_filesz = hdr_size,
                         .p_memsz = hdr_size, .p_align = 4};
    /* Without it, the loader would make the thread stacks executable. */
    ph[4] = (Elf64_Phdr){.p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W,
                         .p_align = 16};

    Elf64_Dyn *dyn = (Elf64_Dyn *)(buf + dyn_off);
    dyn[0] = (Elf64_Dyn){.d_tag = DT_SYMTAB, .d_un.d_ptr = sym_off};
    dyn[1] = (Elf64_Dyn){.d_tag = DT_SYMENT, .d_un.d_val = sizeof(Elf64_Sym)};
    dyn[2] = (Elf64_Dyn){.d_tag = DT_STRTAB, .d_un.d_ptr = str_off};
    dyn[3] = (Elf64_Dyn){.d_tag = DT_STRSZ, .d_un.d_val = 1};
    dyn[4] = (Elf64_Dyn){.d_tag = DT_HASH, .d_un.d_ptr = hash_off};
    dyn[5] = (Elf64_Dyn){.d_tag = DT_NULL};
    /* One bucket and one chain (for the null symbol), both empty; the
       symbol and the string table are zero already. */
    uint32_t hash[4] = {1, 1, 0, 0};
    memcpy(buf + hash_off, hash, sizeof(hash));
}

/* Write the FDEs and search-table entries of slots [first, end), then
   let unwinders see them.  Every entry is what any process of the
   lineage writes for that slot, and each is written whole from a copy
   made first, so that rewriting one that another process published
   already shows no other bytes to an unwinder meanwhile; the count is
   raised, never lowered.  Return -1 if the segment cannot be made
   writable. */
static int
publish(loader_object *obj, size_t first, size_t end)
{
    size_t table = obj->hdr_off + 12;
    size_t fdes = obj->fde_off;
    if (protect(obj, obj->hdr_off, table + 8 * end,
                PROT_READ | PROT_WRITE) < 0
        || protect(obj, fdes + first * obj->fde_size,
                   fdes + end * obj->fde_size, PROT_READ | PROT_WRITE) < 0)
    {
        (void)protect(obj, obj->hdr_off, table + 8 * end, PROT_READ);
        return -1;
    }
    uint32_t cie_pointer, start;
    memcpy(&cie_pointer, obj->fde + 4, 4);
    memcpy(&start, obj->fde + 8, 4);
    unsigned char fde[_PyPerfUnwind_FDE_MAX_SIZE];
    memcpy(fde, obj->fde, obj->fde_size);
    for (size_t i = first; i < end; i++) {
        size_t at = fdes + i * obj->fde_size;
        uint32_t moved = cie_pointer + (uint32_t)(i * obj->fde_size);
        memcpy(fde + 4, &moved, 4);
        moved = start + (uint32_t)(i * obj->stride)
                - (uint32_t)(i * obj->fde_size);
        memcpy(fde + 8, &moved, 4);
        memcpy(obj->base + at, fde, obj->fde_size);
        uint32_t entry[2] = {
            (uint32_t)(obj->text_off + i * obj->stride - obj->hdr_off),
            (uint32_t)(at - obj->hdr_off),
        };
        memcpy(obj->base + table + 8 * i, entry, sizeof(entry));
    }
    uint32_t *count = (uint32_t *)(obj->base + obj->hdr_off + 8);
    uint32_t seen = __atomic_load_n(count, __ATOMIC_RELAXED);
    while (seen < (uint32_t)end
           && !__atomic_compare_exchange_n(count, &seen, (uint32_t)end, 1,
                                           __ATOMIC_RELEASE,
                                           __ATOMIC_RELAXED))
    {
    }
    (void)protect(obj, obj->hdr_off, table + 8 * end, PROT_READ);
    (void)protect(obj, fdes + first * obj->fde_size,
                  fdes + end * obj->fde_size, PROT_READ);
    dump(obj, (char *)obj->base + table + 8 * first, 8 * (end - first),
         MADV_DODUMP);
    dump(obj, (char *)obj->base + fdes + first * obj->fde_size,
         (end - first) * obj->fde_size, MADV_DODUMP);
    return 0;
}

/* Open the object for obj (stride and text_size set); return 0, or -1
   if the loader cannot be told. */
static int
open_object(loader_object *obj, size_t code_size, size_t page)
{
    char self[32];
    char pid[32];
    ssize_t len = readlink("/proc/self", self, sizeof(self) - 1);
    PyOS_snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    if (len <= 0 || (size_t)len != strlen(pid)
        || memcmp(self, pid, (size_t)len) != 0)
    {
        /* /proc is not this process's PID namespace's. */
        return -1;
    }
    size_t ro_size;
    write_headers(obj, code_size, page, NULL, &ro_size);
    /* The segment, written here and moved over the loader's copy. */
    unsigned char *rw = mmap(NULL, ro_size, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE,
                             -1, 0);
    if (rw == MAP_FAILED) {
        return -1;
    }
    write_headers(obj, code_size, page, rw, &ro_size);
    /* The loader reads the first page only; the rest is a hole. */
    int fd = memfd_create("python-perf-unwind", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)ro_size) < 0
        || pwrite(fd, rw, page, 0) != (ssize_t)page)
    {
        if (fd >= 0) {
            close(fd);
        }
        munmap(rw, ro_size);
        return -1;
    }
    /* The loader returns the object already loaded under a path instead
       of loading another, and descriptor numbers are reused: a "./" per
       object opened before makes each path of the process new. */
    char path[96];
    int n = PyOS_snprintf(path, sizeof(path), "/proc/%s/task/%ld/fd/", pid,
                          (long)syscall(SYS_gettid));
    for (loader_object *o = objects; o < obj && n + 2 < (int)sizeof(path);
         o++)
    {
        path[n++] = '.';
        path[n++] = '/';
    }
    PyOS_snprintf(path + n, sizeof(path) - n, "%d", fd);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    struct link_map *map = NULL;
    if (handle == NULL
        || dlinfo(handle, RTLD_DI_LINKMAP, &map) < 0 || map == NULL
        /* Not one loaded before (whose name is empty). */
        || strcmp(map->l_name, path) != 0)
    {
        /* If loaded, it is never used. */
        munmap(rw, ro_size);
        return -1;
    }
    map->l_name[0] = '\0';
    char *base = (char *)map->l_addr;
    /* The same bytes as the loader's private copy, in memory shared with
       forked children ("/dev/zero (deleted)" in /proc/PID/maps, like the
       text): moved there whole, so that no unwinder sees the headers
       missing meanwhile. */
    if (mremap(rw, ro_size, ro_size, MREMAP_MAYMOVE | MREMAP_FIXED, base)
        == MAP_FAILED)
    {
        munmap(rw, ro_size);
        if (mmap(base, ro_size, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                 -1, 0) == MAP_FAILED)
        {
            /* The object has no FDE for any address, like the rest of
               its memory. */
            return -1;
        }
        write_headers(obj, code_size, page, (unsigned char *)base,
                      &ro_size);
    }
    (void)mprotect(base, ro_size, PROT_READ);
    obj->base = (unsigned char *)base;
    obj->ro_size = ro_size;
    obj->page = page;
    /* The headers, the table's count and the CIE are dumped. */
    dump(obj, base + obj->hdr_off + page,
         obj->fde_off - obj->hdr_off - page, MADV_DONTDUMP);
    dump(obj, base + obj->fde_off, ro_size - obj->fde_off, MADV_DONTDUMP);
    /* The text, reserved. */
    obj->text = base + obj->text_off;
    if (mmap(obj->text, obj->text_size, PROT_NONE,
             MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
             -1, 0) == MAP_FAILED)
    {
        return -1;
    }
    dump(obj, obj->text, obj->text_size, MADV_DONTDUMP);
    obj->used = 0;
    obj->forks = forks;
    return 0;
}

void
_PyPerfLoader_NoteStart(void)
{
    start_pid = (long)getpid();
}

void
_PyPerfLoader_Open(size_t stride, size_t code_size)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || (long)getpid() != start_pid || forks != 0
        || pthread_mutex_trylock(&open_lock) != 0)
    {
        /* A forked child, or another thread opens: not now (waiting
           could deadlock: this thread may be in a dl_iterate_phdr()
           callback, and the other waiting for the loader). */
        return;
    }
    if (!watching_forks) {
        watching_forks = pthread_atfork(NULL, NULL, count_fork) == 0;
    }
    loader_object *obj = NULL;
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (objects[i].stride == stride) {
            obj = NULL;         /* opened, or tried */
            break;
        }
        if (obj == NULL && objects[i].stride == 0) {
            obj = &objects[i];
        }
    }
    if (obj != NULL) {
        obj->stride = stride;
        obj->text_size = _Py_SIZE_ROUND_UP(MAX_SLOTS * stride, (size_t)page);
        if (watching_forks && open_object(obj, code_size, (size_t)page) == 0) {
            __atomic_store_n(&obj->ready, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&open_lock);
}

char *
_PyPerfLoader_NewText(size_t size, size_t stride)
{
    loader_object *obj = NULL;
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (objects[i].stride == stride
            && __atomic_load_n(&objects[i].ready, __ATOMIC_ACQUIRE))
        {
            obj = &objects[i];
            break;
        }
    }
    /* Whole slots from the start of the text, so that a slot's entries
       depend on its place only. */
    if (obj == NULL || obj->used % stride != 0 || size % stride != 0
        || size > obj->text_size - obj->used)
    {
        return NULL;
    }
    char *text = obj->text + obj->used;
    if (obj->forks != forks) {
        /* A forked child: what its parent has not handed out yet is the
           parent's to fill. */
        if (mmap(text, obj->text_size - obj->used, PROT_NONE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                 -1, 0) == MAP_FAILED)
        {
            return NULL;
        }
        dump(obj, text, obj->text_size - obj->used, MADV_DONTDUMP);
        obj->forks = forks;
    }
    if (mprotect(text, size, PROT_READ | PROT_WRITE) < 0
        || publish(obj, obj->used / stride, (obj->used + size) / stride) < 0)
    {
        (void)mprotect(text, size, PROT_NONE);
        return NULL;
    }
    dump(obj, text, size, MADV_DODUMP);
    obj->used += size;
    return text;
}

#else  /* !LOADER_KNOWS_ARENAS */

void
_PyPerfLoader_NoteStart(void)
{
}

void
_PyPerfLoader_Open(size_t Py_UNUSED(stride), size_t Py_UNUSED(code_size))
{
}

char *
_PyPerfLoader_NewText(size_t Py_UNUSED(size), size_t Py_UNUSED(stride))
{
    return NULL;
}

#endif  /* LOADER_KNOWS_ARENAS */
#endif  /* PY_HAVE_PERF_TRAMPOLINE */
