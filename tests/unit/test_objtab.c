/* tests/unit/test_objtab.c — the loaded objects' table of inject/objtab.c on this process's real
 * objects: after a first fill every object the loader lists has an entry; finding an object by an
 * address inside it (a function from dlsym) and by a DT_NEEDED name (soname, file name) gives the
 * object dladdr names; one object's scope holds its dependencies once each, breadth first; a
 * definition found in a scope is the address dlsym gives; a refresh with nothing loaded changes
 * nothing, one after a dlopen appends (earlier entries keep their index), one after a dlclose reads
 * every object again (the unloaded one is gone); the probes count objects that define a name.
 * The table starts at 4 entries here (unit.mk), so it grows. Libraries: libz, libyaml and libcjson (scripts/deps.sh installs them), loaded with dlopen. */
#define _GNU_SOURCE
#include "../../inject/objtab.h"
#include "check.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* elfobj.c names the main program by its path (funchook.c in the library). */
const char *sp_fh_exe_path(void) { return "/proc/self/exe"; }

typedef struct {
    sp_ot_t *t;
    int rc;
} refresh_t;

/* sp_ot_refresh runs inside a walk, given its first object (as cudacopies.c calls it). */
static int first_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    refresh_t *r = arg;
    r->rc = sp_ot_refresh(r->t, info);
    return 1;
}

static int refresh(sp_ot_t *t)
{
    refresh_t r = {t, -1};
    dl_iterate_phdr(first_cb, &r);
    return r.rc;
}

static int count_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size;
    ++*(size_t *)arg;
    return 0;
}

static size_t loaded(void)
{
    size_t n = 0;
    dl_iterate_phdr(count_cb, &n);
    return n;
}

/* The entry of the object that defines sym (looked up in handle h). */
static size_t entry_of(sp_ot_t *t, void *h, const char *sym)
{
    void *f = dlsym(h, sym);
    return f ? sp_ot_find(t, (uintptr_t)f) : SP_OT_NONE;
}

/* Every entry's object points at the entry's own copy of its loader info (the table moves as it grows,
 * built here with a first table of 4 entries: unit.mk). */
static int infos_in_place(const sp_ot_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].o.info != &t->v[i].info)
            return 0;
    return 1;
}

/* Every entry is found by its first and last byte (the address order holds all of them, in order). */
static int all_found(sp_ot_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].lo < t->v[i].hi && sp_elf_contains(&t->v[i].info, t->v[i].lo) &&
            (sp_ot_find(t, t->v[i].lo) != i || sp_ot_find(t, t->v[i].hi - 1) != i))
            return 0;
    return 1;
}

static int named(const sp_ot_t *t, size_t i, const char *part)
{
    return i != SP_OT_NONE && i < t->n && strstr(t->v[i].o.name, part) != NULL;
}

int main(void)
{
    static const char *const probes[] = {"zlibVersion", "yaml_parser_initialize", "fopen"};
    sp_ot_t t = {.probes = probes, .nprobes = 3};
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(z != NULL, "dlopen libz.so.1: %s", dlerror());
    if (!z)
        return 1;

    CHECK(refresh(&t) == 0, "first fill");
    CHECK(t.n == loaded(), "%zu entries for %zu objects", t.n, loaded());
    CHECK(t.ours != SP_OT_NONE && t.ours < t.n, "the program itself is the table's 'ours'");
    CHECK(t.cap > 4 && infos_in_place(&t), "the table grew from 4 entries (%zu) and its entries' info moved with them",
          t.cap);
    CHECK(sp_ot_find(&t, (uintptr_t)&main) == t.ours, "main is in the program's entry");
    CHECK(sp_ot_find(&t, 16) == SP_OT_NONE, "an address in no object");
    CHECK(all_found(&t), "every entry found by address after the first fill (sorted)");

    /* libc's own strlen: through libc's handle, as a preloaded sanitizer runtime defines one first */
    void *c = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    size_t zi = entry_of(&t, z, "zlibVersion"), ci = c ? entry_of(&t, c, "strlen") : SP_OT_NONE;
    CHECK(named(&t, zi, "libz.so"), "zlibVersion is found in libz (%zu)", zi);
    CHECK(named(&t, ci, "libc.so"), "strlen is found in libc (%zu)", ci);
    CHECK(sp_ot_by_name(&t, "libz.so.1") == zi, "libz by its soname");
    CHECK(sp_ot_by_name(&t, "libc.so.6") == ci, "libc by its soname");
    CHECK(sp_ot_by_name(&t, "libnot-loaded.so.7") == SP_OT_NONE, "a name nothing loaded has");

    size_t n = sp_ot_scope(&t, zi);
    int has_c = 0, dup = 0;
    for (size_t i = 0; i < n; i++) {
        has_c += t.order[i] == ci;
        for (size_t k = 0; k < i; k++)
            dup += t.order[k] == t.order[i];
    }
    CHECK(n >= 2 && t.order[0] == zi && has_c == 1 && !dup, "libz's scope: itself first, libc once (%zu)", n);
    CHECK(sp_ot_scope_def(&t, n, "zlibVersion") == (uintptr_t)dlsym(z, "zlibVersion"), "zlibVersion in libz's scope");
    CHECK(sp_ot_scope_def(&t, n, "fopen") == (uintptr_t)dlsym(z, "fopen"), "fopen as libz binds it");
    CHECK(sp_ot_scope_def(&t, n, "yaml_parser_initialize") == 0, "libyaml is not in libz's scope");
    CHECK(t.nprobe[0] == 1 && t.nprobe[1] == 0 && t.nprobe[2] >= 1, "probes %d %d %d", t.nprobe[0], t.nprobe[1],
          t.nprobe[2]);

    /* Nothing loaded: nothing read again. */
    unsigned long long ver = t.ver;
    size_t before = t.n;
    CHECK(refresh(&t) == 0 && t.ver == ver && t.n == before, "refresh with no change");

    /* Loaded: appended, the known entries keep their index. */
    void *y = dlopen("libyaml-0.so.2", RTLD_NOW | RTLD_LOCAL);
    void *j = dlopen("libcjson.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(y && j, "dlopen libyaml, libcjson: %s", dlerror());
    if (!y || !j)
        return 1;
    CHECK(refresh(&t) == 0 && t.ver != ver && t.n == loaded() && t.n == before + 2, "%zu entries after two loads",
          t.n);
    CHECK(entry_of(&t, z, "zlibVersion") == zi && named(&t, zi, "libz.so"), "libz keeps its entry");
    CHECK(infos_in_place(&t), "entries' info in place after the loads");
    CHECK(all_found(&t), "every entry found by address after the loads (inserted)");
    size_t yi = entry_of(&t, y, "yaml_parser_initialize"), ji = entry_of(&t, j, "cJSON_Parse");
    CHECK(yi >= before && named(&t, yi, "libyaml"), "libyaml appended (%zu)", yi);
    CHECK(ji >= before && named(&t, ji, "libcjson"), "libcjson appended (%zu)", ji);
    CHECK(sp_ot_by_name(&t, "libyaml-0.so.2") == yi, "libyaml by its soname");
    CHECK(t.nprobe[1] == 1, "the probe counts libyaml");
    n = sp_ot_scope(&t, yi);
    CHECK(sp_ot_scope_def(&t, n, "yaml_parser_initialize") == (uintptr_t)dlsym(y, "yaml_parser_initialize"),
          "yaml_parser_initialize in libyaml's scope");

    /* Unloaded: read again; what is gone is not found. */
    uintptr_t yaddr = (uintptr_t)dlsym(y, "yaml_parser_initialize");
    CHECK(dlclose(y) == 0, "dlclose libyaml");
    CHECK(refresh(&t) == 0 && t.n == loaded() && t.n == before + 1, "%zu entries after an unload", t.n);
    CHECK(sp_ot_by_name(&t, "libyaml-0.so.2") == SP_OT_NONE, "libyaml is gone by name");
    CHECK(sp_ot_find(&t, yaddr) == SP_OT_NONE, "and by address");
    CHECK(t.nprobe[1] == 0, "and from the probe count");
    CHECK(named(&t, entry_of(&t, j, "cJSON_Parse"), "libcjson"), "libcjson is still found");
    CHECK(infos_in_place(&t), "entries' info in place after the unload");
    CHECK(all_found(&t), "every entry found by address after the unload (sorted)");

    sp_ot_free(&t);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
