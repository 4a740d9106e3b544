# inject/python/_stepprof_torch.py — stepprof inside a Python process that
# imports torch. install() puts a finder on sys.meta_path; when the program
# imports torch it tells libstepprof.so (which then makes `torch` the default
# marker) and, once torch is loaded, activates it and registers a global
# optimizer step post hook. What the hook saw is acted on when the outermost
# Optimizer.step (or wrap_boundary's GradScaler.step, DeepSpeed model step)
# returns (torch runs post hooks inside the step's
# record_function, where the profiler must not be switched off): the step
# ends there (the rule below) and PyTorch's autograd profiler goes on in NVTX
# mode only while stepprof's window is warmup or record, so operators reach
# the library as NVTX ranges (collectors/ops.c) and cost nothing outside
# windows (it goes off once the program's record_functions that began with it
# on have ended: torch asserts when one ends with it off; inside code that
# torch.compile made, once that code's caller resumes). The autograd
# profiler is per thread: it is switched on and off on the thread that steps
# the optimizer; when the whole run is one window, on the main thread only
# (from import to exit). torch carries it into
# autograd's threads. A program that starts torch.profiler itself gets it:
# just before Kineto sets up, stepprof turns its operators off and hands
# CUPTI over for good (inject/torch.c, collectors/cupti.c) and says so once;
# emit_nvtx gets the operators. A multiprocessing child (a DataLoader worker,
# an mp.spawn rank) stays dormant until its first optimizer step: hooks only,
# no activation and no plan line (a forked one switches off the operators and
# frames it inherited). A DataLoader worker never steps; a rank wakes at that
# step and counts it as the end of step 0, which ran unseen. At its first
# optimizer step every process tells torch.distributed's rank (used when no
# launcher variable names one, as under mp.spawn) and backend, if a group is
# up. The launchers of torchrun / torch.distributed.launch, accelerate and
# DeepSpeed stay inert (their workers, each a rank, are profiled; a launcher
# trains nothing).
# Ops and answer bits are the numbers of inject/torch.c. With with_stack the
# operator switch also switches stepprof's Python frame recording on that
# thread (inject/pystack.c). With record_shapes the operators that take tensor
# lists are handed over once (inject/torch_lists.c).
#
# Which optimizer step ends a step (prof.step() sits after optimizer.step()):
# with one optimizer, each of its steps, so with gradient accumulation steps
# are optimizer steps, as in torch.profiler's recipe. A step that a GradScaler
# skipped (overflowed gradients) counts as made; so does a DeepSpeed engine's
# model step, once, however often its optimizer steps inside (ZeRO-3 steps
# it once per parameter sub-group). With several optimizers
# per iteration (GANs, per-module optimizers) a step ends at the last
# optimizer of the iteration: the first optimizer ever to step opens
# iterations, and the optimizer that stepped last before it stepped again
# closes them (learned once, on its second step). Until then the opener's
# first step counts as a step end, so with several optimizers step 0 (begun
# when torch is imported, as prof.start() before the loop) ends inside
# iteration 0, step 1 is the rest of it and iteration 1, and from step 2 on
# steps are torch.profiler's (a schedule with wait + warmup >= 2
# records only exact steps). An optimizer that first steps later never ends
# steps. An opener that steps k times per iteration (a WGAN critic) counts
# k steps in the first iteration.
import atexit
import functools
import os
import sys
import threading

_IMPORTING, _READY, _STEP, _YIELD, _STATE, _YIELD_OPS, _WAKE, _IMPORTING_DORMANT = 1, 2, 3, 4, 5, 6, 7, 8
_ON, _STEPS, _SHAPES, _STACK, _OPS_NOW, _WHOLE_RUN, _DORMANT = 1, 2, 4, 8, 16, 32, 64


def _lib(name, argtypes, restype, gil=False):
    """libstepprof.so's exported name as a ctypes function (PyDLL: called with the GIL held)."""
    import ctypes
    f = getattr((ctypes.PyDLL if gil else ctypes.CDLL)(None), name)
    f.argtypes = [getattr(ctypes, "c_" + a) for a in argtypes]
    f.restype = getattr(ctypes, "c_" + restype) if restype else None
    return f


def _entry():
    try:
        return _lib("stepprof_torch", ["int"], "int")
    except (OSError, AttributeError):
        return None  # PYTHONPATH inherited by a process that was not preloaded


def _pystack():
    """stepprof_pystack(on) for this thread's Python frames (with_stack), with torch's file-name prefixes."""
    f = _lib("stepprof_pystack", ["int", "char_p"], "int", gil=True)
    try:
        from torch.profiler.python_tracer import _prefix_regex
        prefixes = _prefix_regex()
    except Exception:
        prefixes = sorted({os.path.abspath(p) + os.sep for p in sys.path})  # the longest match wins (pystack.c)
    hide = "!" + os.path.dirname(os.path.abspath(__file__)) + os.sep  # this file's frames are not the program's
    # ... but what the wrappers of the optimizer step and record_function call is (torch's trace has their
    # frames, not the wrappers')
    pending = ["\n".join([hide, "=step_through", "=boundary_through", "=rf_enter_through", "=rf_exit_through"] +
                         prefixes).encode()]

    def switch(on):  # the prefixes go down once; NULL afterwards keeps them (no copy per switch)
        if on in (3, 4):  # step-end notices (pystack.c) take no prefixes: keep them for the first switch
            return f(on, None)
        data, pending[0] = pending[0], None
        return f(on, data)
    return switch


def _tensor_lists(torch):
    """Tells the library which operators take tensor lists (record_shapes): torch's NVTX sizes text
    flattens them and Kineto's Input Dims nest them (collectors/ops.h). One line per operator:
    name, then per overload one letter per argument (L Tensor[], O Tensor?[], T Tensor or Tensor?,
    . no tensor), after a "!" for an out= overload."""
    kinds = {}
    for schema in torch._C._jit_get_all_schemas():
        types = [str(a.type) for a in schema.arguments]
        if "List[Tensor]" not in types and "List[Optional[Tensor]]" not in types:
            continue
        try:  # only what the dispatcher runs (not TorchScript's own list operators): what records ops
            torch._C._dispatch_find_schema_or_throw(schema.name, schema.overload_name)
        except RuntimeError:
            continue
        k = "!" * any(a.is_out for a in schema.arguments) + "".join({"List[Tensor]": "L", "List[Optional[Tensor]]": "O", "Tensor": "T",
                     "Optional[Tensor]": "T"}.get(t, ".") for t in types)
        if k not in kinds.setdefault(schema.name, []):
            kinds[schema.name].append(k)
    lines = [name + "\t" + "\t".join(ks) for name, ks in kinds.items()]
    _lib("stepprof_torch_lists", ["char_p"], None)("\n".join(lines).encode())


def _child_of_multiprocessing():
    if "--multiprocessing-fork" in sys.argv:
        return True
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return False
    proc = mp.current_process()
    return mp.parent_process() is not None or getattr(proc, "_inheriting", False)


# Launchers that import torch and train nothing: their workers are the ranks. Console scripts (with
# the package whose script it is, being imported; torchrun's is torch itself, not imported yet) and
# `python -m` modules.
_LAUNCHER_SCRIPTS = {"torchrun": None, "accelerate": "accelerate", "accelerate-launch": "accelerate",
                     "deepspeed": "deepspeed", "deepspeed.pt": "deepspeed", "ds": "deepspeed"}
_LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch",
              "accelerate.commands.accelerate_cli", "deepspeed.launcher.runner", "deepspeed.launcher.launch")


def _launcher():
    """torchrun's agent (or torch.distributed.launch's), accelerate's CLI, DeepSpeed's runner and its
    per-node launcher: a console script, or `python -m` of the module (while -m imports a module's
    packages, sys.argv[0] is still "-m": the module's name is then runpy's mod_name, on the stack).
    The caller catches what it raises (sys.argv may be empty or gone)."""
    script = os.path.basename(str(sys.argv[0]))
    if script in _LAUNCHER_SCRIPTS:
        package = _LAUNCHER_SCRIPTS[script]
        if package is None or package in sys.modules:
            return True
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_run_module_as_main" and f.f_globals.get("__name__") == "runpy":
            return f.f_locals.get("mod_name") in _LAUNCHERS
        f = f.f_back
    return False


class _State:
    def __init__(self, torch, entry, ans, dormant):
        self.torch = torch
        self.entry = entry
        self.dormant = dormant   # a multiprocessing child before its first optimizer step
        self.waking = threading.Lock()   # two threads' first steps wake it once
        self.dist_told = False   # torch.distributed's view went to the library (at the first step)
        self.off = False         # woken but not profiled: optimizer steps need nothing more
        self.lists_told = False  # _tensor_lists went to the library (it outlives a fork)
        self.configure(ans)
        self.ops_threads = set()  # threads where this module turned the autograd profiler on
        self.broken = False       # switching it failed once: operators stay off
        self.user_owns = 0     # _YIELD_OPS: the program has the operators; _YIELD: CUPTI too
        self.opener = None     # id() of the first optimizer to step (or engine: wrap_boundary's key)
        self.closer = None     # id() of the optimizer whose step ends a step
        self.learned = False   # the opener has stepped twice: closer is final
        self.other = None      # last optimizer other than the opener before that
        # Per thread (optimizers may step on several threads at once): .pending, the id()s of
        # optimizers whose step the post hook saw; .depth, the nesting of Optimizer.step calls and
        # wrap_boundary's calls;
        # .rf, the record_functions open that began with the autograd profiler on (torch asserts,
        # with a C++ trace on stderr, when one ends with it off); .off_due, switching it off waits
        # for them.
        self.tls = threading.local()
        os.register_at_fork(after_in_child=self.forked)

    def configure(self, ans):
        self.steps = bool(ans & _STEPS)
        self.shapes = bool(ans & _SHAPES)
        self.pystack = _pystack() if ans & _STACK else None
        # With no schedule the window never closes at a step: only the main
        # thread, switched off at exit, may have the profiler on (a thread
        # that ends with it on makes torch warn about a leaked callback).
        self.main_only = bool(ans & _WHOLE_RUN)

    def start(self, ans):
        if self.shapes and not self.lists_told:
            _tensor_lists(self.torch)
            self.lists_told = True
        self.apply(ans)

    def forked(self):
        """A forked child (a DataLoader worker, a rank started by fork) is dormant: the forking
        thread's autograd profiler and profile function, if on, go off there (torch's NVTX text cost
        it per operator), and its first optimizer step wakes it, as in a spawned child."""
        was_on = threading.get_ident() in self.ops_threads
        self.ops_threads.clear()
        self.dormant, self.off = True, False
        self.entry(_IMPORTING_DORMANT)   # the library's side: an activation by CUDA before the wake defers
        self.waking = threading.Lock()   # (another thread may have held it at the fork)
        self.dist_told = False
        self.opener = self.closer = self.other = None
        self.learned = False
        self.tls.pending = []
        if self.pystack:
            self.pystack(0)
        if was_on:
            try:
                self.torch.autograd.profiler._disable_profiler()
            except Exception as e:
                sys.stderr.write("stepprof: cannot switch PyTorch's autograd profiler off in a forked child "
                                 "(%s)\n" % e)

    def apply(self, ans, now=False):
        me = threading.get_ident()
        want = bool(ans & _OPS_NOW) and not self.user_owns and not self.broken and \
            (not self.main_only or me == threading.main_thread().ident)
        if want == (me in self.ops_threads):
            return
        prof = self.torch.autograd.profiler
        try:
            if want:
                if self.torch._C._autograd._profiler_enabled():
                    return
                from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig
                prof._enable_profiler(ProfilerConfig(ProfilerState.NVTX, self.shapes, False, False, False, False,
                                                     _ExperimentalConfig()), set())
                self.ops_threads.add(me)
                if self.pystack and sys.getprofile() is None:  # never over the program's own profiler
                    self.pystack(1)
            else:
                tls = self.mine()
                if tls.rf and not now:
                    tls.off_due = True
                    return
                if not now and self.off_after_region():
                    return
                tls.off_due = False
                self.ops_threads.discard(me)
                if self.pystack:  # -1: the program's own profile function replaced ours; it stays
                    self.pystack(0 if sys.getprofile() is None else -1)
                prof._disable_profiler()
        except Exception as e:  # the program goes on; operators stay off
            self.broken = True
            sys.stderr.write("stepprof: cannot switch PyTorch's autograd profiler (%s); operators are not "
                             "recorded from here on\n" % e)

    def off_after_region(self):
        """Inside code torch.compile made (a compiled optimizer step: the step's hooks run there), a
        C++ "Torch-Compiled Region" scope that began with the autograd profiler on is open, and switching
        it off there makes torch print an internal assert when the scope ends. Then the switch waits for
        the first Python event of the frame that called the outermost compiled code, which comes after
        the scope has ended: a trace function on that frame alone (as pdb attaches to a frame), unless
        the program has its own. True when the switch was put off."""
        utils = sys.modules.get("torch._dynamo.utils")
        compiled = getattr(utils, "orig_code_map", None)
        if compiled is None or sys.gettrace() is not None:
            return False
        outer, f = None, sys._getframe(1)
        while f is not None:
            if f.f_code in compiled:
                outer = f
            f = f.f_back
        if outer is None or outer.f_back is None:
            return False
        caller = outer.f_back

        def after(frame, event, arg):
            sys.settrace(None)
            caller.f_trace = None
            self.apply(self.entry(_STATE))
            return None
        caller.f_trace = after
        sys.settrace(lambda frame, event, arg: None)   # no other frame is traced
        return True

    def at_exit(self):
        """Off on the main thread before the interpreter ends, or torch warns about a leaked callback."""
        if threading.get_ident() in self.ops_threads:
            self.apply(0, now=True)

    def boundary(self):
        if not self.pystack or threading.get_ident() not in self.ops_threads:
            self.apply(self.entry(_STEP))
            return
        self.pystack(3)  # python_function events: the open frames end here if the record window closes,
        ans = self.entry(_STEP)
        self.pystack(4)  # and start here if one opens
        self.apply(ans)

    def mine(self):
        tls = self.tls
        if not hasattr(tls, "depth"):
            tls.depth, tls.pending, tls.rf, tls.off_due = 0, [], 0, False
        return tls

    def rf_entered(self, rf):
        if threading.get_ident() in self.ops_threads:
            rf._stepprof_counted = True
            self.mine().rf += 1

    def rf_exited(self, rf):
        if not rf.__dict__.pop("_stepprof_counted", False):
            return
        tls = self.mine()
        tls.rf = max(tls.rf - 1, 0)
        if not tls.rf and tls.off_due:
            self.apply(self.entry(_STATE))

    def post_hook(self, optimizer, args, kwargs):
        self.mine().pending.append(id(optimizer))

    def wrap_step(self, hooked):
        @functools.wraps(hooked)
        def step_through(*args, **kwargs):  # the name tells pystack.c (see _pystack)
            tls = self.mine()
            tls.depth += 1
            try:
                return hooked(*args, **kwargs)
            finally:
                tls.depth -= 1
                self.drain(tls)
        return step_through

    def drain(self, tls):
        """The outermost step returned: act on the optimizer steps it saw."""
        if tls.depth == 0 and tls.pending:
            done, tls.pending = tls.pending, []
            try:
                for k in done:
                    self.on_step(k)
            except Exception as e:  # never the program's problem
                sys.stderr.write("stepprof: optimizer step hook failed (%s)\n" % e)

    def wrap_boundary(self, cls, method, key):
        """cls.method ends one step however often, or whether, the optimizer inside it steps: GradScaler.step
        skips optimizer.step() on overflowed gradients (fp16 mixed precision, while the scale settles),
        and prof.step() after it still ends the iteration; DeepSpeed's engine steps ZeRO-3's inner
        optimizer once per parameter sub-group (and fp16 skips it). key(obj, args, kwargs): the id
        that stands for the stepping optimizer."""
        orig = getattr(cls, method)

        @functools.wraps(orig)
        def boundary_through(obj, *args, **kwargs):  # (pass-through name: see _pystack)
            tls = self.mine()
            tls.depth += 1
            mark, done = len(tls.pending), False
            try:
                r = orig(obj, *args, **kwargs)
                done = True
                return r
            finally:
                tls.depth -= 1
                del tls.pending[mark:]   # the optimizer steps inside it are this one
                if done:
                    tls.pending.append(key(obj, args, kwargs))
                self.drain(tls)
        setattr(cls, method, boundary_through)

    def wake(self, k):
        """A multiprocessing child's first optimizer step (k's) ended step 0: the library activates
        (if CUDA has not already), with this process's torch.distributed rank when its launcher set
        none, and begins step 1. The optimizer is the opener, as if its step had ended step 0 here."""
        self.dormant = False
        ans = self.entry(_WAKE)
        self.off = not ans & _ON   # left out (ranks) or disabled: later steps do nothing
        self.configure(ans if ans & _ON else 0)
        self.opener = self.closer = k
        self.start(ans)

    def tell_dist(self):
        """torch.distributed's rank and backend, if its default group is up (inject/torch.c); once, at
        the process's first optimizer step, whatever the marker."""
        self.dist_told = True
        try:
            dist = sys.modules.get("torch.distributed")
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return
            _lib("stepprof_torch_dist", ["int", "int", "char_p"], None)(
                dist.get_rank(), dist.get_world_size(), str(dist.get_backend()).encode())
        except Exception as e:  # the rank and backend stay the launcher's; steps go on
            sys.stderr.write("stepprof: cannot read torch.distributed's rank (%s)\n" % e)

    def woke(self, k):
        """True when this step woke a dormant child (it ended step 0): nothing more to do with it."""
        with self.waking:
            if not self.dormant:
                return False
            self.wake(k)
            return True

    def on_step(self, k):
        if not self.dist_told:   # before a dormant child wakes, and in every process
            self.tell_dist()
        if (self.dormant and self.woke(k)) or self.off:
            return
        if self.ends_step(k):
            self.boundary()
        else:   # another optimizer, maybe on another thread: operators there follow the window too
            self.apply(self.entry(_STATE))

    def ends_step(self, k):
        if not self.steps:
            return False
        if self.opener is None:
            self.opener = self.closer = k
            return True
        if not self.learned and k != self.opener:
            self.other = k
            return False
        if not self.learned:
            self.learned = True
            self.closer = self.other if self.other is not None else self.opener
            return self.closer == self.opener
        return k == self.closer

    def user_profiler(self, op):
        if self.user_owns == _YIELD or self.user_owns == op:
            return
        self.apply(0, now=True)
        self.user_owns = op
        self.entry(op)


def _wrap_yield(cls, name, state, op):
    orig = getattr(cls, name)

    def wrapper(self, *a, **kw):
        state.user_profiler(op)
        return orig(self, *a, **kw)

    setattr(cls, name, wrapper)


def _wrap_record_function(cls, state):
    enter, leave = cls.__enter__, cls.__exit__

    @functools.wraps(enter)
    def rf_enter_through(self):  # pass-through frames, like step_through (see _pystack)
        r = enter(self)
        state.rf_entered(self)
        return r

    @functools.wraps(leave)
    def rf_exit_through(self, *exc):
        try:
            return leave(self, *exc)
        finally:
            try:
                state.rf_exited(self)
            except Exception as e:  # never the program's problem
                sys.stderr.write("stepprof: record_function hook failed (%s)\n" % e)

    cls.__enter__, cls.__exit__ = rf_enter_through, rf_exit_through


def _attach(torch, entry, dormant):
    ans = 0 if dormant else entry(_READY)
    if not dormant and not ans & _ON:
        if not ans & _DORMANT:   # left out by `ranks` as rank 0 with no launcher rank: its forks may be ranks
            return
        dormant, ans = True, 0
    state = _State(torch, entry, ans, dormant)
    from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook
    register_optimizer_step_post_hook(state.post_hook)
    profile_hook_step = Optimizer.profile_hook_step
    Optimizer.profile_hook_step = staticmethod(lambda func: state.wrap_step(profile_hook_step(func)))
    _wrap_yield(torch.autograd.profiler.profile, "_prepare_trace", state, _YIELD)   # torch.profiler's Kineto
    _wrap_yield(torch.autograd.profiler.emit_nvtx, "__enter__", state, _YIELD_OPS)
    _wrap_record_function(torch.autograd.profiler.record_function, state)
    atexit.register(state.at_exit)
    try:   # torch.cuda.amp's and FSDP's ShardedGradScaler inherit its step
        state.wrap_boundary(torch.amp.GradScaler, "step",
                            lambda scaler, args, kwargs: id(args[0] if args else kwargs.get("optimizer")))
    except Exception as e:  # another torch: a skipped step then ends no step
        sys.stderr.write("stepprof: cannot hook GradScaler (%s); a step it skips ends no step\n" % e)
    sys.meta_path.insert(0, _DeepSpeedEngine(state))
    if not dormant:
        state.start(ans)


class _OnImport:
    """A finder for one module: claim() decides first (False leaves the import alone), starting() runs
    just before the module first executes, loaded(module) right after. A probe that only asks for the
    spec (importlib.util.find_spec("torch"), as transformers does before importing torch) gets one whose
    execution, if any, is hooked; the finder leaves sys.meta_path when the module executes."""
    name = None

    def __init__(self):
        self.busy = False   # inside our own find_spec of the name (it asks the other finders)
        self.done = False   # the module executed: no other spec of it runs the hooks

    def claim(self):
        return True

    def starting(self):
        pass

    def loaded(self, module):
        pass

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.busy or self.done:
            return None
        import importlib.util
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then(module):
            if self.done:
                return exec_module(module)
            self.done = True
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            if not self.claim():
                return exec_module(module)
            self.starting()
            exec_module(module)
            self.loaded(module)

        spec.loader.exec_module = exec_then
        return spec


class _Finder(_OnImport):
    name = "torch"

    def claim(self):
        try:
            if _launcher():
                return False
            self.dormant = _child_of_multiprocessing()
        except Exception:   # never the program's import's error (sys.argv may be empty or gone)
            self.dormant = False
        self.entry = _entry()
        return self.entry is not None

    def starting(self):
        self.entry(_IMPORTING_DORMANT if self.dormant else _IMPORTING)

    def loaded(self, module):
        try:
            _attach(module, self.entry, self.dormant)
        except Exception as e:  # the program goes on without operators
            sys.stderr.write("stepprof: cannot hook torch (%s); operators and optimizer steps are not "
                             "recorded\n" % e)


class _DeepSpeedEngine(_OnImport):
    """DeepSpeed's engine, when the program imports it: each _take_model_step (the accumulation
    boundary's model step, where engine.global_steps counts) is one step (wrap_boundary)."""
    name = "deepspeed.runtime.engine"

    def __init__(self, state):
        super().__init__()
        self.state = state

    def loaded(self, module):
        try:
            self.state.wrap_boundary(module.DeepSpeedEngine, "_take_model_step", lambda engine, args, kwargs: id(engine))
        except Exception as e:  # another DeepSpeed: its optimizer's steps count as they come
            sys.stderr.write("stepprof: cannot hook DeepSpeed's engine (%s); its optimizer's steps are the "
                             "steps\n" % e)


def install():
    sys.meta_path.insert(0, _Finder())
