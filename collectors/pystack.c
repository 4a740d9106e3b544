/* collectors/pystack.c — see pystack.h. The profile function runs on the
 * thread that executes Python, holding the GIL: on a call it pushes the
 * callee's frame-name id, on a return it pops (generators: a resume is a call,
 * a yield a return, so the stack stays paired). C functions are skipped:
 * torch's "<built-in method ...>" frames are not source locations. Names are
 * cached per code object in one table that only GIL holders touch (frames
 * already running when recording begins are named afresh, by their current
 * line, as torch names them); each cached
 * code object is kept alive so its address cannot name another one later.
 * The shadow stack has a fixed size (PY_MAX frames, outermost kept); it is
 * written by its own thread only, so a capture on that thread reads it with
 * plain loads. The API is reached through dlsym(RTLD_DEFAULT): the interpreter
 * that loaded us exports it. Free-threaded builds (no GIL) are not supported:
 * the name cache relies on the GIL.
 * In a record window each Python function that returns also leaves one
 * fixed-size record in the thread's event buffer (collectors/events.h: no
 * lock, no malloc; a full pool drops and counts): its start (the call's clock
 * read; a frame that began before the window starts at the step boundary that
 * opened it, which the Python side reports, else at the thread's first Python
 * event in the window, as torch.profiler starts such frames at its trace's
 * start), its end and its depth. No clock is read outside record windows.
 * Frames still open when a step ends are written then too, flagged
 * SP_PYF_CUT (torch ends frames still open at its trace's end); when the
 * frame returns inside the same window its own record supersedes the cut one
 * (exporters/py_trace.c). A frame under one of stepprof's own (hidden)
 * frames is not written, nor one deeper than PY_MAX.
 * nn.Module calls, as torch.profiler's python tracer finds them: a frame of
 * torch.nn.Module.__call__'s code object (learned once when turning on, from
 * the torch.nn already imported; one pointer compare per call) is a module
 * call; its "self" (the only frame whose locals are read) names the record
 * "nn.Module: <class __name__>" and the record carries self and its class,
 * which the exporter numbers per cycle. Names are cached in a table keyed by
 * the module's address (emptied when no thread records any more; past
 * MOD_MAX addresses, later ones are named per call). As in torch, which
 * keys by address too, a module is not kept alive: a later module at a dead
 * one's address is the same instance to the numbering when of the same class
 * (torch 2.15 even keeps the first class name for that address: stepprof
 * names the class it sees). Its shadow-stack name stays the frame's (the
 * operators' call stacks are unchanged). */
#define _GNU_SOURCE
#include "pystack.h"

#include "clock.h"
#include "events.h"
#include "log.h"
#include "strings.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PY_MAX 256
#define SEED_MAX 4096          /* frames read when turning on; deeper ones are lost */
#define CODE_SLOTS (1u << 17)
#define CODE_MAX (CODE_SLOTS / 2)
#define MAX_PREFIXES 64
#define MOD_SLOTS 4096u
#define MOD_MAX (MOD_SLOTS / 2)

enum { PY_CALL = 0, PY_RETURN = 3 }; /* CPython's PyTrace_CALL, PyTrace_RETURN */

typedef void *pyobj;
typedef int (*tracefunc)(pyobj obj, pyobj frame, int what, pyobj arg);

typedef struct py_api {
    void (*set_profile)(tracefunc, pyobj);
    pyobj (*get_frame)(void);          /* borrowed */
    pyobj (*frame_back)(pyobj);        /* new reference */
    pyobj (*frame_code)(pyobj);        /* new reference */
    int (*frame_line)(pyobj);
    pyobj (*getattr)(pyobj, const char *);
    const char *(*utf8)(pyobj);
    long (*as_long)(pyobj);
    void (*incref)(pyobj);
    void (*decref)(pyobj);
    void (*err_clear)(void);
    pyobj (*sys_object)(const char *);              /* borrowed */
    pyobj (*dict_item)(pyobj, const char *);        /* borrowed */
    pyobj (*frame_var)(pyobj, pyobj);               /* 3.12+: new reference; NULL before */
    pyobj (*intern)(const char *);                  /* new reference */
    pyobj (*frame_locals)(pyobj);                   /* 3.11: new reference (a dict) */
    pyobj (*dict_get)(pyobj, pyobj);                /* borrowed */
    pyobj (*type)(pyobj);                           /* new reference */
} py_api_t;
static py_api_t py;

static const struct {
    const char *name;
    size_t off;
} syms[] = {
#define SYM(n, f) {n, offsetof(py_api_t, f)}
    SYM("PyEval_SetProfile", set_profile), SYM("PyEval_GetFrame", get_frame),
    SYM("PyFrame_GetBack", frame_back),    SYM("PyFrame_GetCode", frame_code),
    SYM("PyFrame_GetLineNumber", frame_line),
    SYM("PyObject_GetAttrString", getattr), SYM("PyUnicode_AsUTF8", utf8),
    SYM("PyLong_AsLong", as_long),         SYM("Py_IncRef", incref),
    SYM("Py_DecRef", decref),              SYM("PyErr_Clear", err_clear),
    SYM("PySys_GetObject", sys_object),    SYM("PyDict_GetItemString", dict_item),
#undef SYM
};

typedef struct shadow {
    int on;
    int depth;                 /* frames open since the seed; > PY_MAX: the deepest are not kept */
    int hidden;                /* depth of the outermost open hidden frame (id 0); PY_MAX when none */
    uint32_t win;              /* the gate value at the last event */
    uint64_t win_t;            /* when win began for this thread's frames */
    uint64_t boundary_t;       /* sp_pystack_step_end(0)'s time and gate */
    uint32_t boundary_gate;
    uint64_t gen;              /* bumped by every push and pop */
    uint64_t memo_gen;         /* sp_pystack_memo: the stack id captured at this gen */
    uint32_t memo;
    uint32_t id[PY_MAX];       /* outermost first */
    uint64_t t0[PY_MAX];       /* when each began */
    uint32_t mod[PY_MAX];      /* an nn.Module call: its "nn.Module: Cls" name id, else 0 */
    pyobj mod_self[PY_MAX], mod_cls[PY_MAX];
} shadow_t;

/* One TLS pointer (TLS descriptors, as everywhere: no initial-exec TLS); the
 * stack itself is heap memory, allocated once per thread (when it first turns
 * on) and freed when the thread ends. */
static __thread shadow_t *self;
static pthread_key_t self_key;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

typedef struct code_slot {
    pyobj code;
    uint32_t id;
} code_slot_t;
static code_slot_t *codes;     /* GIL holders only */
static uint32_t ncodes;
typedef struct mod_slot {
    pyobj self, cls;
    uint32_t name;
} mod_slot_t;
static mod_slot_t *mods;       /* GIL holders only; each holds a reference to its cls */
static uint32_t nmods;
static pyobj module_code;      /* torch.nn.Module.__call__.__code__, NULL when unknown */
static pyobj self_name;        /* "self", for PyFrame_GetVar */
static int threads_on;         /* threads with the profile function on */
static char *prefix_buf;
static const char *prefix[MAX_PREFIXES];
static size_t prefix_len[MAX_PREFIXES];
static int nprefix;

static void make_key(void)
{
    pthread_key_create(&self_key, free);
}

static int load_api(void)
{
    static int state; /* 0 untried, 1 ok, -1 failed; GIL holders only */
    if (state)
        return state;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(RTLD_DEFAULT, syms[i].name);
        if (!f) {
            sp_log(SP_LOG_ERROR, "with_stack: the Python C API has no %s in this process; Python frames are not "
                                 "recorded", syms[i].name);
            return state = -1;
        }
        memcpy((char *)&py + syms[i].off, &f, sizeof f);
    }
    *(void **)&py.frame_var = dlsym(RTLD_DEFAULT, "PyFrame_GetVar");
    *(void **)&py.intern = dlsym(RTLD_DEFAULT, "PyUnicode_InternFromString");
    *(void **)&py.dict_get = dlsym(RTLD_DEFAULT, "PyDict_GetItem");
    *(void **)&py.type = dlsym(RTLD_DEFAULT, "PyObject_Type");
    *(void **)&py.frame_locals = dlsym(RTLD_DEFAULT, "PyFrame_GetLocals");
    codes = calloc(CODE_SLOTS, sizeof *codes);
    mods = calloc(MOD_SLOTS, sizeof *mods);
    if (!codes || !mods) {
        sp_log(SP_LOG_ERROR, "with_stack: out of memory for the Python frame names; Python frames are not recorded");
        return state = -1;
    }
    return state = 1;
}

static void set_prefixes(const char *list)
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
        if (strncmp(file, prefix[i] + hide, k) != 0)
            continue;
        if (hide)
            return NULL;
        best = k > best ? k : best;
    }
    return file + best;
}

static const char *attr_text(pyobj code, const char *name, char *buf, size_t len)
{
    pyobj v = py.getattr(code, name);
    const char *s = v ? py.utf8(v) : NULL;
    snprintf(buf, len, "%s", s ? s : "?");
    if (v)
        py.decref(v);
    return buf;
}

/* The interned "file(line): name" of code; line < 0: its first line (a
 * function entered while recording, as torch names it). 0 for stepprof's
 * own frames. */
static uint32_t name_of(pyobj code, long line)
{
    char file[1024], fn[256], text[1400];
    attr_text(code, "co_filename", file, sizeof file);
    attr_text(code, "co_name", fn, sizeof fn);
    if (line < 0) {
        pyobj v = py.getattr(code, "co_firstlineno");
        line = v ? py.as_long(v) : 0;
        if (v)
            py.decref(v);
    }
    py.err_clear();
    const char *shown = trim(file);
    if (!shown)
        return 0;
    snprintf(text, sizeof text, "%s(%ld): %s", shown, line, fn);
    return sp_str_intern(text);
}

static uint32_t code_id(pyobj code)
{
    uint64_t h = (uint64_t)(uintptr_t)code * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 40) & (CODE_SLOTS - 1);
    for (;; i = (i + 1) & (CODE_SLOTS - 1)) {
        if (codes[i].code == code)
            return codes[i].id;
        if (!codes[i].code)
            break;
    }
    uint32_t id = name_of(code, -1);
    if (ncodes < CODE_MAX) {
        py.incref(code);
        codes[i] = (code_slot_t){code, id};
        ncodes++;
    }
    return id;
}

/* torch.nn.Module.__call__'s code object, from the torch.nn already in
 * sys.modules (not there yet: looked for again at the next switch on). */
static void learn_module_code(void)
{
    if (module_code || !py.intern || !py.type || (!py.frame_var && !(py.frame_locals && py.dict_get)))
        return;
    if (!self_name && !(self_name = py.intern("self"))) {
        py.err_clear();
        return;
    }
    pyobj modules = py.sys_object("modules");
    pyobj nn = modules ? py.dict_item(modules, "torch.nn") : NULL;
    pyobj cls = nn ? py.getattr(nn, "Module") : NULL;
    pyobj call = cls ? py.getattr(cls, "__call__") : NULL;
    module_code = call ? py.getattr(call, "__code__") : NULL;   /* the reference is kept */
    if (call)
        py.decref(call);
    if (cls)
        py.decref(cls);
    py.err_clear();
}

/* The instance whose Module.__call__ frame this is: its table slot, or *tmp
 * (nothing kept) when the table is full; NULL when its self is unreadable.
 * Instances are told apart by address, as torch does: a slot is renamed when
 * its address now holds a module of another class (the first one died). */
static const mod_slot_t *module_of(pyobj frame, mod_slot_t *tmp)
{
    pyobj self = NULL;
    if (py.frame_var) {   /* 3.12+: read from the frame's own variables, nothing built */
        self = py.frame_var(frame, self_name);
    } else {              /* 3.11: the frame's locals dict, built once per call (as torch does) */
        pyobj locals = py.frame_locals(frame);
        if ((self = locals ? py.dict_get(locals, self_name) : NULL))
            py.incref(self);
        if (locals)
            py.decref(locals);
    }
    if (!self) {
        py.err_clear();
        return NULL;
    }
    pyobj cls = py.type(self);   /* a reference the slot keeps: the class outlives its entry */
    py.decref(self);             /* the frame holds it */
    uint64_t h = (uint64_t)(uintptr_t)self * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 40) & (MOD_SLOTS - 1);
    while (mods[i].self && mods[i].self != self)
        i = (i + 1) & (MOD_SLOTS - 1);
    mod_slot_t *m = mods[i].self || nmods < MOD_MAX ? &mods[i] : tmp;
    if (m->self == self && m->cls == cls) {
        py.decref(cls);
        return m;
    }
    char cls_name[256], text[300];
    snprintf(text, sizeof text, "nn.Module: %s", attr_text(cls, "__name__", cls_name, sizeof cls_name));
    py.err_clear();
    if (m == tmp)
        py.decref(cls);          /* self's class: alive while the frame runs */
    else if (m->self)
        py.decref(m->cls);
    else
        nmods++;
    *m = (mod_slot_t){self, cls, sp_str_intern(text)};
    return m;
}

/* Forgets the modules (no thread records Python frames now). */
static void forget_modules(void)
{
    for (uint32_t i = 0; i < MOD_SLOTS && nmods; i++)
        if (mods[i].self) {
            py.decref(mods[i].cls);
            mods[i] = (mod_slot_t){0};
            nmods--;
        }
}

/* seeded: the frame was running before recording began; torch names such a
 * frame by its current line, not its first. *m: the module of an nn.Module
 * call, else m->name = 0. */
static uint32_t frame_id(pyobj frame, int seeded, mod_slot_t *m)
{
    m->name = 0;
    pyobj code = py.frame_code(frame);
    if (!code)
        return 0;
    uint32_t id = seeded ? name_of(code, py.frame_line(frame)) : code_id(code);
    if (__builtin_expect(code == module_code, 0) && id) {
        mod_slot_t tmp;
        const mod_slot_t *k = module_of(frame, &tmp);
        if (k)
            *m = *k;
    }
    py.decref(code);
    return id;
}

/* The clock now in a record window, else 0 (no clock read: a frame that
 * began before the window starts at win_t whatever its t0); notes a new
 * window (the start of the frames that began before it). */
static uint64_t tick(shadow_t *s, uint32_t *gate)
{
    *gate = sp_ev_gate_load();
    uint64_t now = sp_win_records(*gate) ? sp_clock_ticks() : 0;
    if (__builtin_expect(*gate != s->win, 0)) {
        s->win = *gate;
        s->win_t = now;
    }
    return now;
}

/* Frame d as a python_function record of the current record window. */
static void write_frame(shadow_t *s, int d, uint32_t gate, uint64_t now, uint16_t flags)
{
    sp_thread_t *t = sp_ev_thread();
    if (!t || t->in_hook)  /* a signal handler's CUDA/NVTX call would take the same slot */
        return;
    t->in_hook = 1;
    sp_event_t *e = sp_ev_reserve(t, gate);
    if (e) {
        uint32_t mod = s->mod[d];
        *e = (sp_event_t){.t0 = s->t0[d] > s->win_t ? s->t0[d] : s->win_t, .t1 = now, .name = mod ? mod : s->id[d],
                          .window = gate, .kind = SP_EV_PYFUNC, .flags = flags | (mod ? SP_PYF_MODULE : 0),
                          .a = {(uint64_t)d, mod ? (uintptr_t)s->mod_self[d] : 0, mod ? (uintptr_t)s->mod_cls[d] : 0}};
        sp_ev_commit(t);
    }
    t->in_hook = 0;
}

static int on_event(pyobj obj, pyobj frame, int what, pyobj arg)
{
    (void)obj, (void)arg;
    shadow_t *s = self;
    if (!s)
        return 0;
    uint32_t gate;
    if (what == PY_CALL) {
        int d = s->depth;
        if (d < PY_MAX) {
            mod_slot_t m;
            uint32_t id = s->id[d] = frame_id(frame, 0, &m);
            if ((s->mod[d] = m.name))
                s->mod_self[d] = m.self, s->mod_cls[d] = m.cls;
            if (!id && d < s->hidden)
                s->hidden = d;
            s->t0[d] = tick(s, &gate);
        }
        s->depth++;
        s->gen++;
    } else if (what == PY_RETURN && s->depth > 0) {
        int d = --s->depth;
        s->gen++;
        if (d < PY_MAX) {
            uint64_t now = tick(s, &gate);
            if (d < s->hidden && sp_win_records(gate))
                write_frame(s, d, gate, now, 0);
            else if (d == s->hidden)
                s->hidden = PY_MAX;
        }
    }
    return 0;
}

/* The open frames as records ending now, flagged cut (a step ends); the time. */
static uint64_t cut(shadow_t *s)
{
    uint32_t gate;
    uint64_t now = tick(s, &gate);
    if (!now)
        now = sp_clock_ticks();
    int open = s->depth < s->hidden ? s->depth : s->hidden;
    for (int d = 0; d < open && sp_win_records(gate); d++)
        write_frame(s, d, gate, now, SP_PYF_CUT);
    return now;
}

/* The frames already running, outermost first. */
static void seed(shadow_t *s)
{
    static uint32_t inner[SEED_MAX]; /* GIL holders only */
    static mod_slot_t inner_mod[SEED_MAX];
    int n = 0;
    pyobj f = py.get_frame(), held = NULL;
    while (f && n < SEED_MAX) {
        inner[n] = frame_id(f, 1, &inner_mod[n]);
        n++;
        pyobj back = py.frame_back(f);
        if (held)
            py.decref(held);
        f = held = back;
    }
    if (held)
        py.decref(held);
    s->depth = n;
    s->gen++;
    s->hidden = PY_MAX;
    uint64_t now = tick(s, &(uint32_t){0});
    for (int k = 0; k < n && k < PY_MAX; k++) {
        s->id[k] = inner[n - 1 - k];
        const mod_slot_t *m = &inner_mod[n - 1 - k];
        if ((s->mod[k] = m->name))
            s->mod_self[k] = m->self, s->mod_cls[k] = m->cls;
        s->t0[k] = now;
        if (!s->id[k] && k < s->hidden)
            s->hidden = k;
    }
}

int sp_pystack_set(int on, const char *prefixes)
{
    if (load_api() < 0)
        return 0;
    if (prefixes)
        set_prefixes(prefixes);
    shadow_t *s = self;
    if (on <= 0) {
        if (s && s->on && on == 0) {
            cut(s);
            py.set_profile(NULL, NULL);
        }
        if (s && s->on && --threads_on == 0)
            forget_modules();
        if (s)
            s->on = 0;
        return 0;
    }
    if (!s) {
        pthread_once(&self_once, make_key);
        if (!(s = calloc(1, sizeof *s)))
            return 0;
        pthread_setspecific(self_key, s);
        self = s;
    }
    if (s->on)
        return 1;
    learn_module_code();
    seed(s);
    py.set_profile(on_event, NULL);
    s->on = 1;
    threads_on++;
    return 1;
}

void sp_pystack_step_end(int done)
{
    shadow_t *s = self;
    if (!s || !s->on)
        return;
    if (!done) {
        s->boundary_t = cut(s);
        s->boundary_gate = sp_ev_gate_load();
        return;
    }
    uint32_t gate = sp_ev_gate_load();
    if (s->boundary_t && gate != s->boundary_gate) {   /* a window opened here: the open frames start here */
        s->win = gate;
        s->win_t = s->boundary_t;
    }
    s->boundary_t = 0;
}

int sp_pystack_copy(void **out, int max)
{
    const shadow_t *s = self;
    if (!s || !s->on)
        return 0;
    int kept = s->depth < PY_MAX ? s->depth : PY_MAX, n = 0;
    for (int k = kept - 1; k >= 0 && n < max; k--)
        if (s->id[k])
            out[n++] = (void *)(SP_PYFRAME_BIT | s->id[k]);
    return n;
}

uint32_t sp_pystack_memo(void)
{
    const shadow_t *s = self;
    return s && s->on && s->memo_gen == s->gen ? s->memo : 0;
}

void sp_pystack_set_memo(uint32_t id)
{
    shadow_t *s = self;
    if (s) {
        s->memo = id;
        s->memo_gen = s->gen;
    }
}

int sp_pystack_on(void)
{
    return self && self->on;
}
