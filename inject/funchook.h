/* inject/funchook.h — the `function:SYMBOL[@LIBRARY]` step marker: run a
 * callback at every call of a named function of an unmodified program.
 *
 * Two mechanisms, chosen per symbol (never both, so the callback fires once
 * per call):
 *  - defined in the main executable: the function's entry is patched with a
 *    jump to a trampoline (funchook_entry.c); every caller is seen, also
 *    internal calls and calls of static functions, found in .symtab.
 *  - defined in a shared library: the GOT slots (R_X86_64_JUMP_SLOT and
 *    R_X86_64_GLOB_DAT) naming it in every other loaded object are pointed at
 *    a trampoline (funchook_got.c), and so are those of objects dlopen()ed
 *    later. Calls from inside the defining library itself are not seen.
 *
 * The first half is the interface inject/preload.c uses; the second half is
 * shared only by inject/funchook*.c. */
#ifndef SP_FUNCHOOK_H
#define SP_FUNCHOOK_H

#include <stddef.h>
#include <stdint.h>

/* Arrange for cb() to run at every call of `symbol`, defined in `library` (a
 * path substring or glob of the object's file name; "" means the main
 * executable first, then any loaded object). Returns 0 when the definition was
 * found and hooked: at its entry, or at the call sites of the objects loaded
 * now (possibly none yet) and of those loaded later by dlopen. Returns -1 after
 * printing one `stepprof:` error line when the symbol cannot be found or
 * hooked; nothing is left patched then. cb must be thread-safe; it runs on the
 * calling thread before the function, with errno preserved, and is not
 * re-entered on a thread that is already inside it. Called once per marker,
 * from the thread that activates stepprof. */
int sp_funchook_install(const char *symbol, const char *library, void (*cb)(void));

/* ---- internal to inject/funchook*.c ---------------------------------- */

/* One hooked function definition. Lives for the life of the process: stubs
 * that point at it may be running on any thread. */
typedef struct sp_fh_hook {
    void (*cb)(void);
    unsigned long fired; /* calls seen, for the never-fired warning */
} sp_fh_hook_t;

/* A trampoline: [hook pointer][endbr64][call thunk][tail...]. The thunk runs
 * hook->cb with every register and the vector state preserved and returns to
 * the tail, which continues the hooked function. SP_FH_STUB_ENTRY is the
 * offset callers jump to; SP_FH_STUB_TAIL the offset of the tail, where the
 * thunk's return address points (the thunk finds the hook pointer from it). */
#define SP_FH_STUB_ENTRY 8
#define SP_FH_STUB_TAIL 18

/* A new hook record, or NULL when the table is full. */
sp_fh_hook_t *sp_fh_hook_new(void (*cb)(void));
/* A fresh writable page for trampolines; when near != 0 it lies within
 * +-1 GiB of near (so rel32 jumps and RIP-relative operands reach), else NULL
 * is returned. */
uint8_t *sp_fh_code_alloc(uintptr_t near);
/* Makes a page from sp_fh_code_alloc read+execute. 0 ok, -1 error. */
int sp_fh_code_seal(uint8_t *page);
/* Releases a page that was never sealed (a refused patch). */
void sp_fh_code_free(uint8_t *page);
/* Is addr inside one of our trampoline pages? */
int sp_fh_is_ours(uintptr_t addr);
/* Writes the stub head (hook pointer, endbr64, call thunk) at p; the tail
 * starts at p + SP_FH_STUB_TAIL. */
void sp_fh_stub_head(uint8_t *p, sp_fh_hook_t *h);
/* Writes `jmp *0(%rip); .quad target` at p; returns its length (14). */
size_t sp_fh_emit_abs_jmp(uint8_t *p, uintptr_t target);

/* From now on every dlopen that succeeds re-patches the GOT hooks and looks
 * for a second CUDA copy (cudacopies.h). */
void sp_fh_dlopen_watch(void);
/* The C library's dlopen, bypassing our interposer. */
void *sp_fh_real_dlopen(const char *file, int mode);
/* Does the object at `path` match a LIBRARY pattern (substring of the path, or
 * glob of the path or of its base name)? "" matches everything. */
int sp_fh_lib_matches(const char *pattern, const char *path);
/* The executable's path ("/proc/self/exe" resolved), never NULL. */
const char *sp_fh_exe_path(void);

/* funchook_got.c: a library-defined symbol hooked through GOTs. */
typedef struct sp_fh_got sp_fh_got_t;
/* Finds the definitions; NULL with the reason in why when there are none. */
sp_fh_got_t *sp_fh_got_prepare(const char *symbol, const char *library, void (*cb)(void), char *why,
                               size_t whylen);
/* Patches the GOTs of every loaded object not patched before (all of them on
 * the first call). Returns the number of slots patched now; a slot that cannot
 * be written is skipped with one error line. Callers serialise calls. */
int sp_fh_got_patch(sp_fh_got_t *g);
/* The hooks created so far for g (their fired counts). */
unsigned long sp_fh_got_fired(const sp_fh_got_t *g);
/* Where the definitions live, for messages: "libfoo.so" or "2 objects". */
const char *sp_fh_got_where(const sp_fh_got_t *g);

/* funchook_entry.c: a symbol defined in the main executable. */
typedef struct sp_fh_exe_sym {
    uintptr_t addr;      /* run-time address */
    size_t size;
    int prot;            /* PROT_* of the segment holding it, restored after patching */
    uintptr_t cold_addr; /* its SYMBOL.cold part (gcc's hot/cold split), 0 if none */
    size_t cold_size;
    char name[256];
} sp_fh_exe_sym_t;
/* Definitions of `symbol` in the executable's .symtab / .dynsym: exact name
 * matches, else gcc's clones SYMBOL.isra.N / SYMBOL.constprop.N. Returns the
 * count (<= max); 0 when none; -1 when the file cannot be read. */
int sp_fh_exe_find(const char *symbol, sp_fh_exe_sym_t *out, int max);
/* Entry patching in two steps, so that a marker with several definitions is
 * hooked at all of them or none: prepare builds the trampoline (NULL with the
 * reason in why when the entry cannot be patched safely), commit writes the
 * jump (-1 with the reason when the code cannot be made writable), cancel
 * drops a prepared patch. */
typedef struct sp_fh_entry sp_fh_entry_t;
sp_fh_entry_t *sp_fh_entry_prepare(const sp_fh_exe_sym_t *s, sp_fh_hook_t *h, char *why, size_t whylen);
int sp_fh_entry_commit(sp_fh_entry_t *e, char *why, size_t whylen);
void sp_fh_entry_cancel(sp_fh_entry_t *e);
/* Drops the disassembler once all entry patches are done. */
void sp_fh_entry_done(void);

#endif
