/* tests/programs/pystack_bench.c — make bench's Python stack lines
 * (scripts/bench.sh): an embedded interpreter calls, at Python depths 10 and
 * 50, a C function that captures the thread's Python frames N times
 * (sp_stack_capture_py: the shadow stack copy and the lookup of a known
 * stack, what each operator pays with with_stack; and the memo hit when the
 * frames did not change since the last capture), then times N calls of an
 * empty Python function, and N calls of a C function (len), with stepprof's
 * profile function off, on outside a record window, and on in one (each call
 * then writes a python_function record into the event buffer; the window's
 * records are taken and let go after each run, as the exporter does). The
 * collectors come from libreport_stacks.so, as in libstepprof.so; only this
 * test program links libpython. Usage: pystack_bench [N]. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../../collectors/bigmem.h"
#include "../../collectors/events.h"
#include "../../collectors/pystack.h"
#include "../../collectors/stacks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static PyObject *set(PyObject *self, PyObject *on)
{
    (void)self;
    return PyLong_FromLong(sp_pystack_set(PyObject_IsTrue(on), ""));
}

/* capture(n, repeat): (ns per capture, frames in the stack), or None when
 * captures disagree. repeat: the frames did not change since the last capture
 * (operators called from one line); else each capture reads and looks up the
 * whole stack. */
static PyObject *capture(PyObject *self, PyObject *args)
{
    (void)self;
    long n, repeat;
    if (!PyArg_ParseTuple(args, "ll", &n, &repeat))
        return NULL;
    uint32_t id = 0;
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (!repeat)
            sp_pystack_set_memo(0); /* as after a Python call or return */
        uint32_t got = sp_stack_capture_py();
        if (!id)
            id = got;
        else if (got != id)
            Py_RETURN_NONE;
    }
    double per = (double)(now_ns() - t0) / (double)(n > 0 ? n : 1);
    size_t frames = 0;
    if (!id || !sp_stack_get(id, &frames))
        Py_RETURN_NONE;
    return Py_BuildValue("(dn)", per, (Py_ssize_t)frames);
}

/* recording(fn): fn() run inside a record window of its own. */
static PyObject *recording(PyObject *self, PyObject *fn)
{
    (void)self;
    static uint32_t window;
    sp_ev_set_gate(++window);
    PyObject *r = PyObject_CallNoArgs(fn);
    sp_ev_set_gate(0);
    sp_event_ref_t *ev = NULL;
    sp_ev_collect(window, 0, &ev);
    sp_big_free(ev);
    sp_ev_release();
    return r;
}

static PyMethodDef methods[] = {
    {"recording", recording, METH_O, NULL},
    {"set", set, METH_O, NULL},
    {"capture", capture, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bench", NULL, -1, methods, NULL, NULL, NULL, NULL};

static PyObject *init_module(void)
{
    return PyModule_Create(&module);
}

static const char code[] = /* run after N = ... */
    "import time, _bench\n"
    "def empty(a):\n"
    "    pass\n"
    "def calls(f=empty):\n"
    "    t0 = time.perf_counter_ns()\n"
    "    for _ in range(N):\n"
    "        f(())\n"
    "    return (time.perf_counter_ns() - t0) / N\n"
    "def ccalls():\n"
    "    return calls(len)\n"
    "def capture():\n"
    "    _bench.set(True)\n"
    "    r = _bench.capture(N, 0), _bench.capture(N, 1)\n"
    "    _bench.set(False)\n"
    "    return r\n"
    "def down(d):\n"
    "    return down(d - 1) if d > 1 else capture()\n"
    "for d in (10, 50):\n"
    "    (per, frames), (again, _) = down(d)\n"
    "    print('frames %d ns_per_capture %.1f ns_same_frames %.1f' % (frames, per, again))\n"
    "for what, f in (('call', calls), ('ccall', ccalls)):\n"
    "    off = min(f() for _ in range(3))\n"
    "    _bench.set(True)\n"
    "    on = min(f() for _ in range(3))\n"
    "    rec = min(_bench.recording(f) for _ in range(3))\n"
    "    _bench.set(False)\n"
    "    print('ns_per_%s_off %.1f ns_per_%s_on %.1f ns_per_%s_recording %.1f' % (what, off, what, on, what, rec))\n";

int main(int argc, char **argv)
{
    if (sp_stack_init(64, SP_STACK_UNWIND_AUTO) != 0 || sp_ev_pool_init(512) != 0)
        return 1;
    PyImport_AppendInittab("_bench", init_module);
    Py_Initialize();
    char n[64];
    snprintf(n, sizeof n, "N = %ld\n", argc > 1 ? strtol(argv[1], NULL, 10) : 1000000L);
    int rc = PyRun_SimpleString(n) || PyRun_SimpleString(code);
    return Py_FinalizeEx() < 0 || rc ? 1 : 0;
}
