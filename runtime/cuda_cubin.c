/* Reading a cubin's target arch, so a device can choose between an
 * artifact's SASS and its PTX without asking the driver. Needs no toolkit. */
#include <elf.h>
#include <string.h>

#include "shapejit/ext/cuda_device.h"
#include "core/core_impl.h"

/* CUDA binaries are ELF64 with machine EM_CUDA; the arch sits in e_flags,
 * in bits 0-7 before ELF ABI version 8 and bits 8-15 from it on. */
sj_status sj_cubin_arch(sj_ctx *ctx, const void *cubin, size_t len, int *sm) {
    Elf64_Ehdr h;
    if (!cubin || len < sizeof h) return sj_fail(ctx, SJ_E_PARSE, "cubin: %zu bytes is too short", len);
    memcpy(&h, cubin, sizeof h);
    if (memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
        h.e_machine != EM_CUDA)
        return sj_fail(ctx, SJ_E_PARSE, "cubin: not a CUDA ELF binary");
    unsigned arch = h.e_ident[EI_ABIVERSION] >= 8 ? (h.e_flags >> 8) & 0xffu : h.e_flags & 0xffu;
    if (arch < 10) return sj_fail(ctx, SJ_E_PARSE, "cubin: implausible arch %u in its ELF header", arch);
    *sm = (int)arch;
    return SJ_OK;
}
