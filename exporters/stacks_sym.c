/* exporters/stacks_sym.c — see stacks_sym.h. dladdr names exported symbols
 * (programs built -rdynamic, shared libraries); anything else is printed as
 * an offset into its module, which addr2line resolves. Return addresses are
 * looked up at pc-1 (a call as the last instruction of a function returns
 * past its end), printed as the return address. A Python frame
 * (collectors/pystack.h) is its interned "file.py(42): fn"; Python frames are
 * the outermost part of a stack and replace the interpreter's native frames
 * (natives_kept). Texts are cached by id under
 * a mutex: the reports' thread renders stacks beside the exporter's. */
#define _GNU_SOURCE
#include "../collectors/kernels.h"
#include "symtab.h"
#include "stacks_sym.h"

#include "../collectors/pystack.h"
#include "../collectors/stacks.h"
#include "../collectors/strings.h"
#include "jsonw.h"
#include "report_buf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char **cache;        /* by id; "" = symbolized to nothing */
static uint32_t cache_cap;

static const void *own_base(void)
{
    Dl_info self;
    return dladdr((void *)(uintptr_t)&own_base, &self) ? self.dli_fbase : NULL;
}

void sp_stacks_frame_text(sp_rb_t *b, uintptr_t pc, int innermost)
{
    if (pc & SP_PYFRAME_BIT) {
        sp_rb_puts(b, sp_str_get((uint32_t)pc));
        return;
    }
    static const void *own;
    if (!own)
        own = own_base();
    Dl_info info;
    uintptr_t at = innermost ? pc : pc - 1;
    if (!dladdr((void *)at, &info) || !info.dli_fname) {
        sp_rb_printf(b, "0x%lx", (unsigned long)pc);
        return;
    }
    if (info.dli_fbase == own)
        return;
    const char *mod = strrchr(info.dli_fname, '/');
    mod = mod ? mod + 1 : info.dli_fname;
    if (!*mod)
        mod = "?";
    if (!info.dli_sname || !info.dli_saddr) {
        uintptr_t off = 0;
        const char *local = sp_symtab_exe_lookup(at, &off);
        const char *pretty = local ? sp_kern_demangle(local) : NULL;
        if (local)
            sp_rb_printf(b, "%s+0x%lx (%s)", pretty ? pretty : local, (unsigned long)(off + (pc - at)), mod);
        else
            sp_rb_printf(b, "%s+0x%lx", mod, (unsigned long)(pc - (uintptr_t)info.dli_fbase));
        return;
    }
    const char *pretty = sp_kern_demangle(info.dli_sname);
    sp_rb_printf(b, "%s+0x%lx (%s)", pretty ? pretty : info.dli_sname, (unsigned long)(pc - (uintptr_t)info.dli_saddr),
                 mod);
}

/* Does pc lie in the interpreter: libpython, or a python executable that has
 * it linked in? */
static int in_interpreter(uintptr_t pc)
{
    static char exe[256];
    static int exe_is_python = -1;
    if (exe_is_python < 0) {
        char path[4096];
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        path[k > 0 ? k : 0] = 0;
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        snprintf(exe, sizeof exe, "%.255s", base);
        exe_is_python = strncmp(exe, "python", 6) == 0;
    }
    Dl_info info;
    if (!dladdr((void *)(pc - 1), &info) || !info.dli_fname)
        return 0;
    const char *mod = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    return strncmp(mod, "libpython", 9) == 0 || (exe_is_python && strcmp(mod, exe) == 0);
}

/* How many native frames (innermost first) a stack keeps. With Python frames
 * (after the native ones) those stand for the interpreter: the native frames
 * from the first interpreter frame outwards (_PyEval_EvalFrameDefault, ...,
 * main) are dropped, the Python frames take their place. */
static size_t natives_kept(const uintptr_t *pc, size_t n)
{
    size_t k = 0;
    while (k < n && !(pc[k] & SP_PYFRAME_BIT))
        k++;
    if (k == n)
        return n;
    for (size_t i = 0; i < k; i++)
        if (in_interpreter(pc[i]))
            return i;
    return k;
}

static char *symbolize(uint32_t id)
{
    size_t n = 0;
    const uintptr_t *pc = sp_stack_get(id, &n);
    if (!pc)
        return NULL;
    size_t kept = natives_kept(pc, n);
    sp_rb_t b;
    sp_rb_init(&b);
    for (size_t i = n; i-- > 0;) {
        if (i >= kept && !(pc[i] & SP_PYFRAME_BIT))
            continue;
        size_t before = b.n;
        if (b.n)
            sp_rb_puts(&b, ";");
        size_t start = b.n;
        sp_stacks_frame_text(&b, pc[i], i == 0);
        if (b.oom)
            break;
        if (b.n == start) {          /* a dropped frame: take back its separator */
            b.n = before;
            if (b.s)
                b.s[b.n] = 0;
            continue;
        }
        for (size_t k = start; k < b.n; k++)
            if (b.s[k] == ';')
                b.s[k] = '_';
    }
    if (b.oom || !b.n) {
        sp_rb_free(&b);
        return NULL;
    }
    return b.s;
}

const char *sp_stacks_text(uint32_t id)
{
    if (!id)
        return NULL;
    const char *r = NULL;
    pthread_mutex_lock(&lock);
    if (id >= cache_cap) {
        uint32_t cap = cache_cap ? cache_cap : 1024;
        while (cap <= id)
            cap *= 2;
        char **nc = realloc(cache, cap * sizeof *nc);
        if (!nc)
            goto out;
        memset(nc + cache_cap, 0, (cap - cache_cap) * sizeof *nc);
        cache = nc;
        cache_cap = cap;
    }
    if (!cache[id]) {
        char *t = symbolize(id);
        cache[id] = t ? t : strdup("");
    }
    r = cache[id] && *cache[id] ? cache[id] : NULL;
out:
    pthread_mutex_unlock(&lock);
    return r;
}

void sp_stacks_write_arg(struct sp_jw *w, uint32_t id)
{
    const char *t = sp_stacks_text(id);
    if (!t)
        return;
    sp_jw_puts(w, ", \"Call stack\": ");
    sp_jw_str(w, t, 0);
}
