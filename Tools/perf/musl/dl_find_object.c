/* glibc's _dl_find_object() for musl, for the interpreter built with
   Debian's musl-gcc only (Tools/perf/musl/build.sh links it in and the
   interpreter exports it).

   musl-gcc links gcc's libgcc_eh.a into whatever uses the unwinder (C++
   exceptions, _Unwind_Backtrace()): Debian built it for glibc 2.36, so
   it finds a PC's unwind information by asking _dl_find_object(), which
   musl does not have, and an extension module that unwinds does not
   load.  On Alpine, libgcc is built for musl and walks dl_iterate_phdr()
   for the object's PT_GNU_EH_FRAME segment instead; this does that walk,
   so that the unwinder finds here what it finds there. */

#define _GNU_SOURCE
#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* glibc 2.36's layout on x86-64 and aarch64 (no dlfo_eh_dbase, no
   dlfo_eh_count). */
struct dl_find_object {
    unsigned long long dlfo_flags;
    void *dlfo_map_start;
    void *dlfo_map_end;
    struct link_map *dlfo_link_map;
    void *dlfo_eh_frame;
    unsigned long long reserved[7];
};

struct search {
    uintptr_t pc;
    struct dl_find_object *result;
};

static int
visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct search *s = arg;
    uintptr_t start = UINTPTR_MAX, end = 0;
    void *eh_frame = NULL;
    int found = 0;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t from = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (from < start) {
                start = from;
            }
            if (from + ph->p_memsz > end) {
                end = from + ph->p_memsz;
            }
            if (s->pc >= from && s->pc < from + ph->p_memsz) {
                found = 1;
            }
        }
        else if (ph->p_type == PT_GNU_EH_FRAME) {
            eh_frame = (void *)from;
        }
    }
    if (!found) {
        return 0;
    }
    s->result->dlfo_flags = 0;
    s->result->dlfo_map_start = (void *)start;
    s->result->dlfo_map_end = (void *)end;
    s->result->dlfo_link_map = NULL;
    s->result->dlfo_eh_frame = eh_frame;
    return 1;
}

int
_dl_find_object(void *pc, struct dl_find_object *result)
{
    struct search s = {(uintptr_t)pc, result};
    return dl_iterate_phdr(visit, &s) == 1 ? 0 : -1;
}
