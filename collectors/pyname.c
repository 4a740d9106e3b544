/* collectors/pyname.c — see pyname.h. Names are built on a cache miss only:
 * per code object (each cached code object is kept alive so its address
 * cannot name another one later), per nn.Module instance (by address, as
 * torch does: a module is not kept alive, a later module at a dead one's
 * address is the same instance to the numbering when of the same class; torch
 * 2.15 even keeps the first class name for that address, stepprof names the
 * class it sees; each slot keeps a reference to its class; forgotten when no
 * thread records) and per C method definition (the PyMethodDef a C function
 * object points to, torch's key; kept for the process, where torch's cache
 * lives for a profiling session: a name holds the address of the first call's
 * object, so naming afresh per window would intern new strings in every
 * window of a long run; a method definition lives as long as its module).
 * A generator's or coroutine's frame is named by its current line at each
 * call, as torch names it (a resume is a call): a fourth table keeps those
 * names per (code object, line).
 * The four tables are open-addressed by address and double when a quarter
 * full as a thread turns recording on, else when half full on the thread
 * that misses (a miss already calls into Python and builds a string); past their
 * limit, or without memory, one stepprof: line says so and later ones are
 * named per call. Only GIL holders touch them (free-threaded builds are not
 * supported). */
#define _GNU_SOURCE
#include "pyname.h"

#include "log.h"
#include "strings.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PREFIXES 64

sp_py_api_t sp_py;

static const struct {
    const char *name;
    size_t off;
} syms[] = {
#define SYM(n, f) {n, offsetof(sp_py_api_t, f)}
    SYM("PyEval_SetProfile", set_profile), SYM("PyEval_GetFrame", get_frame),
    SYM("PyFrame_GetBack", frame_back),    SYM("PyFrame_GetCode", frame_code),
    SYM("PyFrame_GetLineNumber", frame_line),
    SYM("PyObject_GetAttrString", getattr), SYM("PyUnicode_AsUTF8", utf8),
    SYM("PyLong_AsLong", as_long),         SYM("Py_IncRef", incref),
    SYM("Py_DecRef", decref),              SYM("PyErr_Clear", err_clear),
    SYM("PySys_GetObject", sys_object),    SYM("PyDict_GetItemString", dict_item),
    SYM("PyObject_Repr", repr),            SYM("PyCFunction_GetFunction", cfunc_meth),
    SYM("PyCFunction_Type", cfunc_type),
#undef SYM
};

/* An address-keyed table: key (the address), aux (a module's class; for a code object, whether it is
 * resumable), val (a name id). */
typedef struct slot {
    uintptr_t key, aux;
    uint32_t val;
} slot_t;
typedef struct table {
    slot_t *s;
    uint32_t cap, n, max;
    const char *what;
    int said;
} table_t;

static table_t codes = {.max = 1u << 20, .what = "Python functions"};
static table_t mods = {.max = 1u << 20, .what = "nn.Module instances"};
static table_t cfuncs = {.max = 1u << 18, .what = "C functions"};
/* A generator's (coroutine's) frame is named by its current line at each call, as torch names it (its
 * first line at the first call, the line it last yielded at on a resume): key code | line << 48. */
static table_t gens = {.max = 1u << 20, .what = "generator lines"};

static sp_pyobj module_code;      /* torch.nn.Module.__call__.__code__, NULL when unknown */
static sp_pyobj self_name;        /* "self", for PyFrame_GetVar */
static char *prefix_buf;
static const char *prefix[MAX_PREFIXES];
static size_t prefix_len[MAX_PREFIXES];
static int nprefix;

static uint32_t slot_of(const table_t *t, uintptr_t key)
{
    uint64_t x = (uint64_t)key;   /* mixed (murmur3's finalizer): a line in a key's top bits moves every slot bit */
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    uint32_t i = (uint32_t)((x * 0x9E3779B97F4A7C15ull) >> 40) & (t->cap - 1);
    while (t->s[i].key && t->s[i].key != key)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static int grow(table_t *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : 1024;
    slot_t *old = t->s, *s = cap <= 2 * t->max ? calloc(cap, sizeof *s) : NULL;
    if (!s)
        return -1;
    uint32_t was = t->cap;
    t->s = s;
    t->cap = cap;
    for (uint32_t i = 0; i < was; i++)
        if (old[i].key)
            t->s[slot_of(t, old[i].key)] = old[i];
    free(old);
    return 0;
}

/* key's slot, or an empty one for it (key not yet set); NULL when the table is full. */
static slot_t *find(table_t *t, uintptr_t key)
{
    if (t->cap) {
        slot_t *s = &t->s[slot_of(t, key)];
        if (s->key)
            return s;
    }
    if ((t->n + 1) * 2 > t->cap && (t->n >= t->max || grow(t) < 0)) {
        if (!t->said++)
            sp_log(SP_LOG_WARN, "with_stack: more than %u %s seen (or no memory for more); the others are "
                                "named at each call, which costs more", t->n, t->what);
        return NULL;
    }
    return &t->s[slot_of(t, key)];
}

int sp_pyname_load(void)
{
    static int state; /* 0 untried, 1 ok, -1 failed */
    if (state)
        return state;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(RTLD_DEFAULT, syms[i].name);
        if (!f) {
            sp_log(SP_LOG_ERROR, "with_stack: the Python C API has no %s in this process; Python frames are not "
                                 "recorded", syms[i].name);
            return state = -1;
        }
        memcpy((char *)&sp_py + syms[i].off, &f, sizeof f);
    }
    *(void **)&sp_py.frame_var = dlsym(RTLD_DEFAULT, "PyFrame_GetVar");
    *(void **)&sp_py.intern = dlsym(RTLD_DEFAULT, "PyUnicode_InternFromString");
    *(void **)&sp_py.dict_get = dlsym(RTLD_DEFAULT, "PyDict_GetItem");
    *(void **)&sp_py.type = dlsym(RTLD_DEFAULT, "PyObject_Type");
    *(void **)&sp_py.frame_locals = dlsym(RTLD_DEFAULT, "PyFrame_GetLocals");
    sp_py.cmethod_type = dlsym(RTLD_DEFAULT, "PyCMethod_Type");
    return state = 1;
}

void sp_pyname_prefixes(const char *list)
{
    char *copy = strdup(list);
    if (!copy)
        return;
    free(prefix_buf);
    prefix_buf = copy;
    nprefix = 0;
    for (char *p = copy; *p && nprefix < MAX_PREFIXES;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        if (*p) {
            prefix[nprefix] = p;
            prefix_len[nprefix++] = strlen(p);
        }
        if (!nl)
            break;
        p = nl + 1;
    }
}

/* torch's python tracer: the file with the longest matching prefix cut; NULL
 * for a file under a hidden prefix ("!dir/": stepprof's own Python code). */
static const char *trim(const char *file)
{
    size_t best = 0;
    for (int i = 0; i < nprefix; i++) {
        int hide = prefix[i][0] == '!';
        size_t k = prefix_len[i] - (size_t)hide;
        if (prefix[i][0] == '=' || strncmp(file, prefix[i] + hide, k) != 0)
            continue;
        if (hide)
            return NULL;
        best = k > best ? k : best;
    }
    return file + best;
}

static int through(const char *fn)
{
    for (int i = 0; i < nprefix; i++)
        if (prefix[i][0] == '=' && strcmp(prefix[i] + 1, fn) == 0)
            return 1;
    return 0;
}

static const char *attr_text(sp_pyobj obj, const char *name, char *buf, size_t len)
{
    sp_pyobj v = sp_py.getattr(obj, name);
    const char *s = v ? sp_py.utf8(v) : NULL;
    snprintf(buf, len, "%s", s ? s : "?");
    if (v)
        sp_py.decref(v);
    return buf;
}

/* What name_of answers for a shown frame when asked not to intern its name. */
#define SHOWN 1u

/* The interned "file(line): name" of code (line < 0: its first line), 0 for
 * a hidden frame, SP_PYNAME_THROUGH for a pass-through one; with intern 0,
 * SHOWN instead of a shown frame's name (a resumable code's frames are named
 * by their current line: its first-line name would never be used). */
static uint32_t name_of(sp_pyobj code, long line, int intern)
{
    char file[1024], fn[256], text[1400];
    attr_text(code, "co_filename", file, sizeof file);
    attr_text(code, "co_name", fn, sizeof fn);
    if (line < 0 && intern) {
        sp_pyobj v = sp_py.getattr(code, "co_firstlineno");
        line = v ? sp_py.as_long(v) : 0;
        if (v)
            sp_py.decref(v);
    }
    sp_py.err_clear();
    const char *shown = trim(file);
    if (!shown)
        return through(fn) ? SP_PYNAME_THROUGH : 0;
    if (!intern)
        return SHOWN;
    snprintf(text, sizeof text, "%s(%ld): %s", shown, line, fn);
    return sp_str_intern(text);
}

/* Whether code is a generator's, a coroutine's or an async generator's (CO_GENERATOR, CO_COROUTINE,
 * CO_ASYNC_GENERATOR): a call of its frame may be a resume. */
static int resumable(sp_pyobj code)
{
    sp_pyobj v = sp_py.getattr(code, "co_flags");
    long flags = v ? sp_py.as_long(v) : 0;
    if (v)
        sp_py.decref(v);
    sp_py.err_clear();
    return (flags & (0x20 | 0x80 | 0x200)) != 0;
}

/* The name of a resumable code's frame at its current line (the code's
 * entry in codes keeps it, and so the key, alive). */
static uint32_t line_id(sp_pyobj code, sp_pyobj frame)
{
    long line = sp_py.frame_line(frame);
    if (line < 0 || line >= 1l << 16 || (uintptr_t)code >> 48)
        return name_of(code, line, 1);   /* named at each call: a line or an address the key cannot hold */
    uintptr_t key = (uintptr_t)code | (uintptr_t)line << 48;   /* user addresses are below 2^48 */
    slot_t *s = find(&gens, key);
    if (s && s->key)
        return s->val;
    uint32_t id = name_of(code, line, 1);
    if (s) {
        *s = (slot_t){key, 0, id};
        gens.n++;
    }
    return id;
}

static uint32_t code_id(sp_pyobj code, sp_pyobj frame)
{
    slot_t *s = find(&codes, (uintptr_t)code);
    if (!s || !s->key) {
        uintptr_t res = resumable(code);
        uint32_t id = name_of(code, -1, !res);   /* hidden or pass-through whatever the line: no line lookups */
        uintptr_t gen = res && id && id != SP_PYNAME_THROUGH;
        if (!s)
            return gen ? name_of(code, sp_py.frame_line(frame), 1) : id;
        sp_py.incref(code);
        *s = (slot_t){(uintptr_t)code, gen, id};
        codes.n++;
    }
    return s->aux ? line_id(code, frame) : s->val;
}

void sp_pyname_reserve(void)
{
    table_t *all[] = {&codes, &mods, &cfuncs, &gens};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->n * 4 >= all[i]->cap && all[i]->n < all[i]->max)
            grow(all[i]);
}

void sp_pyname_learn_module(void)
{
    if (module_code || !sp_py.intern || !sp_py.type || (!sp_py.frame_var && !(sp_py.frame_locals && sp_py.dict_get)))
        return;
    if (!self_name && !(self_name = sp_py.intern("self"))) {
        sp_py.err_clear();
        return;
    }
    sp_pyobj modules = sp_py.sys_object("modules");
    sp_pyobj nn = modules ? sp_py.dict_item(modules, "torch.nn") : NULL;
    sp_pyobj cls = nn ? sp_py.getattr(nn, "Module") : NULL;
    sp_pyobj call = cls ? sp_py.getattr(cls, "__call__") : NULL;
    module_code = call ? sp_py.getattr(call, "__code__") : NULL;   /* the reference is kept */
    if (call)
        sp_py.decref(call);
    if (cls)
        sp_py.decref(cls);
    sp_py.err_clear();
}

/* The instance whose Module.__call__ frame this is, into *m (m->name 0 when
 * its self is unreadable). A slot is renamed when its address now holds a
 * module of another class (the first one died). */
static void module_of(sp_pyobj frame, sp_pymod_t *m)
{
    sp_pyobj self = NULL;
    if (sp_py.frame_var) {   /* 3.12+: read from the frame's own variables, nothing built */
        self = sp_py.frame_var(frame, self_name);
    } else {                 /* 3.11: the frame's locals dict, built once per call (as torch does) */
        sp_pyobj locals = sp_py.frame_locals(frame);
        if ((self = locals ? sp_py.dict_get(locals, self_name) : NULL))
            sp_py.incref(self);
        if (locals)
            sp_py.decref(locals);
    }
    if (!self) {
        sp_py.err_clear();
        return;
    }
    sp_pyobj cls = sp_py.type(self);   /* a reference the slot keeps: the class outlives its entry */
    sp_py.decref(self);                /* the frame holds it */
    slot_t *s = find(&mods, (uintptr_t)self);
    if (s && s->key && s->aux == (uintptr_t)cls) {
        sp_py.decref(cls);
        *m = (sp_pymod_t){self, cls, s->val};
        return;
    }
    char cls_name[256], text[300];
    snprintf(text, sizeof text, "nn.Module: %s", attr_text(cls, "__name__", cls_name, sizeof cls_name));
    sp_py.err_clear();
    *m = (sp_pymod_t){self, cls, sp_str_intern(text)};
    if (!s) {
        sp_py.decref(cls);             /* self's class: alive while the frame runs */
        return;
    }
    if (s->key)
        sp_py.decref((sp_pyobj)s->aux);
    else
        mods.n++;
    *s = (slot_t){(uintptr_t)self, (uintptr_t)cls, m->name};
}

uint32_t sp_pyname_frame(sp_pyobj frame, int seeded, sp_pymod_t *m)
{
    m->name = 0;
    sp_pyobj code = sp_py.frame_code(frame);
    if (!code)
        return 0;
    uint32_t id = seeded ? name_of(code, sp_py.frame_line(frame), 1) : code_id(code, frame);
    if (__builtin_expect(code == module_code, 0) && id && id != SP_PYNAME_THROUGH)
        module_of(frame, m);
    sp_py.decref(code);
    return id;
}

/* PyCFunctionObject's first field after the object header: its PyMethodDef. */
struct cfunc_head {
    intptr_t refcnt;
    void *type;
    struct {
        const char *name;
        void *meth;
    } *ml;
};

uint32_t sp_pyname_cfunc(sp_pyobj fn)
{
    const struct cfunc_head *f = fn;
    if (f->type != sp_py.cfunc_type && (!f->type || f->type != sp_py.cmethod_type))
        return 0;
    slot_t *s = find(&cfuncs, (uintptr_t)f->ml);
    if (s && s->key)
        return s->val;
    if (f->ml->meth != sp_py.cfunc_meth(fn))   /* not the layout this was written for */
        return 0;
    sp_pyobj r = sp_py.repr(fn);
    const char *text = r ? sp_py.utf8(r) : NULL;
    uint32_t id = sp_str_intern(text ? text : "<built-in function ?>");
    if (r)
        sp_py.decref(r);
    sp_py.err_clear();
    if (s) {
        *s = (slot_t){(uintptr_t)f->ml, 0, id};
        cfuncs.n++;
    }
    return id;
}

void sp_pyname_forget(void)
{
    for (uint32_t i = 0; i < mods.cap && mods.n; i++)
        if (mods.s[i].key) {
            sp_py.decref((sp_pyobj)mods.s[i].aux);
            mods.s[i] = (slot_t){0};
            mods.n--;
        }
}
