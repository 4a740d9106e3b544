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
 * frames is not written, nor one deeper than PY_MAX. */
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
    codes = calloc(CODE_SLOTS, sizeof *codes);
    if (!codes) {
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

/* seeded: the frame was running before recording began; torch names such a
 * frame by its current line, not its first. */
static uint32_t frame_id(pyobj frame, int seeded)
{
    pyobj code = py.frame_code(frame);
    if (!code)
        return 0;
    uint32_t id = seeded ? name_of(code, py.frame_line(frame)) : code_id(code);
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
        *e = (sp_event_t){.t0 = s->t0[d] > s->win_t ? s->t0[d] : s->win_t, .t1 = now, .name = s->id[d],
                          .window = gate, .kind = SP_EV_PYFUNC, .flags = flags, .a = {(uint64_t)d}};
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
            uint32_t id = s->id[d] = frame_id(frame, 0);
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
    int n = 0;
    pyobj f = py.get_frame(), held = NULL;
    while (f && n < SEED_MAX) {
        inner[n++] = frame_id(f, 1);
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
    seed(s);
    py.set_profile(on_event, NULL);
    s->on = 1;
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
