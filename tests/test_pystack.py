"""tests/test_pystack.py — issue 11 item 3: with with_stack, PyTorch operators carry the Python frames
torch.profiler shows ("file.py(42): fn"). tests/programs/torch_stack.py (a CPU loop whose model code
is in the program) runs under stepprof with with_stack and, separately, under torch.profiler with
with_stack=True and the same schedule (tests/programs/torch_stack_profiled.py); for the top
operators, the program's own frames that torch's python_function events show around each call are
the frames of that operator's "Call stack" in stepprof's trace, in its collapsed stacks and in the
table's Source Location; and stepprof's python_function events are torch's for the program's own
functions: the same names per step, nested alike around the same operators; and for nn.Module calls
("nn.Module: Linear_0", "Python module id"): the same per step, with the same parent and the same
Python functions under them, around the same operators, and TensorBoard's Module view the same. Without with_stack: no
Python frames and the profile function is never on; a Python process that never imports torch stays
inert with with_stack set. Python frames do not depend on the native unwinder (libunwind missing or
unwinder: glibc)."""
import collections
import functools
import glob
import json
import os
import re
import sys
import tempfile

from harness import assert_valid, load, run

from test_torch import SCHED, ITERS, program, steps

PROG = "torch_stack.py"
FRAME = re.compile(r"(?:.*/)?torch_stack\.py\((\d+)\): (\S+)")
# Frames of functions already running when recording began are named by their current line, by
# torch.profiler and by stepprof alike, and the two begin at different lines of train(): torch at
# prof.step(), stepprof after optimizer.step(). Those are compared by name.
RUNNING = {"train"}


def defs(name):
    """The program's frame names for function `name`: 'torch_stack.py(L): name', L its def lines in order."""
    with open(program(PROG)) as f:
        return ["torch_stack.py(%d): %s" % (i, name) for i, l in enumerate(f, 1) if re.match(r"\s*def %s\(" % name, l)]


BLOCK_FORWARD, NET_FORWARD = defs("forward")
SYNC_DEVICE, = defs("sync_device")


def program_frames(frames):
    """The program's own frames (not <module>: the reference runs it from another file), in order."""
    out = []
    for f in frames:
        m = FRAME.fullmatch(f)
        if m and m.group(2) != "<module>":
            out.append("torch_stack.py: %s" % m.group(2) if m.group(2) in RUNNING else
                       "torch_stack.py(%s): %s" % m.groups())
    return tuple(out)


def in_steps(trace, e):
    return any(a <= e["ts"] <= b for a, b in steps(trace).values())


def torch_stacks(trace):
    """{op name: Counter(program frames)} from torch.profiler's python_function events around each op."""
    ev = trace["traceEvents"]
    py = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") == "python_function" and e.get("ph") == "X":
            py[e["tid"]].append(e)
    out = collections.defaultdict(collections.Counter)
    for o in ev:
        if o.get("cat") != "cpu_op" or not in_steps(trace, o):
            continue
        around = sorted((p for p in py[o["tid"]] if p["ts"] <= o["ts"] and o["ts"] + o["dur"] <= p["ts"] + p["dur"]),
                        key=lambda p: (p["ts"], -p["dur"]))
        out[o["name"]][program_frames(p["name"] for p in around)] += 1
    return out


def stepprof_stacks(trace):
    """{op name: Counter(program frames)} from stepprof's "Call stack" argument (outermost first)."""
    out = collections.defaultdict(collections.Counter)
    for o in trace["traceEvents"]:
        if o.get("cat") == "cpu_op" and in_steps(trace, o):
            out[o["name"]][program_frames(o["args"].get("Call stack", "").split(";"))] += 1
    return out


def under_stepprof(env):
    e = dict(SCHED, PROF_TABLE_ROW_LIMIT=-1, STACK_PROBE=1)
    e.update(env)
    r = run([sys.executable, program(PROG), str(ITERS)], fake=False, env=e, timeout=300)
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
    return r


@functools.lru_cache(maxsize=None)
def reference():
    """The loop under torch.profiler(with_stack=True): (its trace, its output)."""
    r = under_stepprof({})  # only for a fresh directory: the reference itself runs without stepprof
    out = os.path.join(r.cwd, "ref")
    ref_run = run([sys.executable, program("torch_stack_profiled.py"), str(ITERS), out,
                   *(str(SCHED[k]) for k in ("PROF_WAIT", "PROF_WARMUP", "PROF_ACTIVE"))],
                  preload=False, fake=False, timeout=300)
    assert ref_run.returncode == 0, ref_run.stderr
    return load(os.path.join(out, "torch.pt.trace.json")), ref_run.stdout.strip()


def test_operators_carry_the_python_frames_torch_profiler_shows():
    mine = under_stepprof({"PROF_WITH_STACK": 1, "PROF_TABLE_GROUP_BY_STACK_N": 8})
    ref, ref_out = reference()
    loss = mine.stdout.splitlines()
    assert loss[-1] == ref_out, "the program's output changed under stepprof"
    # The profile function is on only in the warmup and record steps (1-4), off after. The program
    # probes after each optimizer step, so probe i sees step i + 1 (the one that begins there): 0-3 on.
    assert loss[0] == "profile function on per step: 1111000", loss
    assert_valid(mine.trace())
    trace = load(mine.trace())
    assert sorted(steps(trace)) == sorted(steps(ref)) == [2, 3, 4]
    want, got = torch_stacks(ref), stepprof_stacks(trace)
    top = [n for n, _ in collections.Counter({n: sum(c.values()) for n, c in want.items()
                                              if n.startswith("aten::")}).most_common(10)]
    assert "aten::addmm" in top and "aten::relu" in {n for n in want}
    for name in top + ["aten::relu", "aten::cross_entropy_loss"]:
        assert any(want[name]), f"torch.profiler shows no program frame around {name}: {want[name]}"
        assert got[name] == want[name], f"{name}: stepprof {dict(got[name])}, torch.profiler {dict(want[name])}"
    # What the frames look like: the module's forward, called from the program's own code.
    forward = [f for f in next(iter(got["aten::relu"])) if f.endswith(": forward")]
    assert forward == [NET_FORWARD, BLOCK_FORWARD], got["aten::relu"]
    # Collapsed stacks end with the operator, below the same frames.
    stacks = glob.glob(os.path.join(mine.outdir, "*.stacks.txt"))
    assert len(stacks) == 1, mine.files()
    collapsed = collections.defaultdict(set)
    for line in open(stacks[0]).read().splitlines():
        frames, _, us = line.rpartition(" ")
        assert int(us) > 0, line
        parts = frames.split(";")
        collapsed[parts[-1]].add(program_frames(p.replace("):_", "): ") for p in parts[:-1]))  # spaces became _
    for name in top:
        assert collapsed[name] and collapsed[name] <= set(want[name]), (name, collapsed[name], set(want[name]))
    # The key-average table's Source Location names the program's frames.
    table = open(glob.glob(os.path.join(mine.outdir, "*.key_averages.txt"))[0]).read()
    assert "Source Location" in table and BLOCK_FORWARD in table
    # TensorBoard's Operator view has the call stacks ("View CallStack").
    from torch_tb_profiler.profiler.data import RunProfileData
    d = RunProfileData.parse("worker", "0", mine.trace(), None)
    d = d[0] if isinstance(d, tuple) else d
    d.process()
    shown = {a.callstacks.copy().pop() for a in d.stack_lists_group_by_name["aten::addmm"]}
    assert shown and all(NET_FORWARD in c for c in shown), shown


def program_calls(trace):
    """{step: Counter(name)} of the python_function events of the program's own functions that start in
    each step (not those already running when the window opened: checked apart)."""
    out = collections.defaultdict(collections.Counter)
    for e in trace["traceEvents"]:
        if e.get("cat") != "python_function" or not program_frames([e["name"]]) or \
                program_frames([e["name"]])[0].startswith("torch_stack.py: "):
            continue
        for n, (a, b) in steps(trace).items():
            if a <= e["ts"] <= b:
                out[n][program_frames([e["name"]])[0]] += 1
    return out


def test_python_function_events_are_torch_profilers():
    mine = under_stepprof({"PROF_WITH_STACK": 1})
    trace = load(mine.trace())
    ref, _ = reference()
    assert_valid(mine.trace())
    # The program's functions, called in each step: the same names, as often.
    got, want = program_calls(trace), program_calls(ref)
    assert sorted(got) == [2, 3, 4] and got == want, (dict(got), dict(want))
    assert want[3][NET_FORWARD] == 1 and want[3][BLOCK_FORWARD] == 2, want[3]
    # Nested alike around the same operators: the program's python_function events enclosing each op.
    theirs, ours = torch_stacks(ref), torch_stacks(trace)
    top = [n for n, _ in collections.Counter({n: sum(c.values()) for n, c in theirs.items()
                                              if n.startswith("aten::")}).most_common(10)]
    for name in top + ["aten::relu", "aten::cross_entropy_loss"]:
        assert any(theirs[name]) and ours[name] == theirs[name], (name, dict(ours[name]), dict(theirs[name]))
    # Kineto's args: a unique "Python id" each; a parent is an enclosing frame on the same thread.
    py = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    by_id = {e["args"]["Python id"]: e for e in py}
    assert len(by_id) == len(py) > 0
    first, last = min(a for a, _ in steps(trace).values()), max(b for _, b in steps(trace).values())
    end = [e["ts"] for e in trace["traceEvents"] if e.get("name") == "Record Window End"][0]
    for e in py:
        assert e["ph"] == "X" and e["ts"] + e["dur"] <= end + 0.001, e
        if "Python parent id" in e["args"]:
            p = by_id[e["args"]["Python parent id"]]
            assert p["tid"] == e["tid"] and p["ts"] <= e["ts"], (p, e)
            assert e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 0.001, (p, e)
    # Functions already running when the window opened begin at the step boundary that opened it and,
    # still running when it closed, end with the last step: train() is one event enclosing the recorded
    # steps, as in torch.profiler's trace; nothing else begins before the window.
    running = [e for e in py if FRAME.fullmatch(e["name"]) and e["name"].endswith(": train")]
    assert len(running) == 1 and "Python parent id" in running[0]["args"], running
    t = running[0]
    assert first - 1000 < t["ts"] <= first and t["ts"] + t["dur"] >= last - 0.001, (t, first, last)
    assert not [e for e in py if e["ts"] < t["ts"]]
    assert not [e for e in py if "_stepprof_torch" in e["name"]]


ADDRESS = re.compile(r" at 0x[0-9a-f]+>$")


def masked(name):
    """A python_function name with the address in a C call's name masked (torch names a C method by the
    repr of its first call: "<built-in method relu of type object at 0x7f..>") and a frame running when
    the window opened named without its line (see RUNNING)."""
    name = ADDRESS.sub(" at 0x?>", name)
    m = FRAME.fullmatch(name)
    return "torch_stack.py: %s" % m.group(2) if m and m.group(2) in RUNNING else name


def all_calls(trace):
    """{step: Counter((name, parent's name, "CallFrom"))} of every python_function event starting in each
    step, names masked, but for what only one of the two runs has: torch.profiler's own frames (prof.step() and what
    it calls: the reference) and probe() (it finds stepprof's entry point only under stepprof)."""
    py = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    by_id = {e["args"]["Python id"]: e for e in py}
    out = collections.defaultdict(collections.Counter)
    for e in py:
        chain = [e]
        while "Python parent id" in chain[-1]["args"]:
            chain.append(by_id[chain[-1]["args"]["Python parent id"]])
        if any(c["name"].startswith("torch/profiler/") or c["name"].endswith(": probe") for c in chain):
            continue
        step = [n for n, (a, b) in steps(trace).items() if a <= e["ts"] <= b]
        if step:
            parent = masked(chain[1]["name"]) if len(chain) > 1 else None
            out[step[0]][masked(e["name"]), parent, e["args"].get("CallFrom")] += 1
    return out


def test_python_function_events_are_all_of_torch_profilers():
    """Every python_function event torch.profiler writes for the loop, stepprof writes too: C function
    calls ("<built-in method relu of type object at 0x..>", "<built-in function linear>"), named as torch
    names them, and the frames of torch's own Python (torch/nn/modules, torch/optim: the optimizer's step
    once ran under stepprof's hidden wrapper and was lost); per step the same names, as often, with the
    same parents and the same "CallFrom" (the caller's file and line, "torch_stack.py:27")."""
    mine = under_stepprof({"PROF_WITH_STACK": 1})
    trace = load(mine.trace())
    ref, _ = reference()
    got, want = all_calls(trace), all_calls(ref)
    assert sorted(got) == [2, 3, 4], sorted(got)
    for step in (2, 3, 4):
        assert got[step] == want[step], (step, sorted((got[step] - want[step]).items()),
                                         sorted((want[step] - got[step]).items()))
    names = {n for n, _, _ in want[3]}
    for c_call, parent in (("<built-in method relu of type object at 0x?>", BLOCK_FORWARD),
                           ("<built-in function isinstance>", None), ("<built-in function linear>", None)):
        assert [p for n, p, _ in want[3] if n == c_call and (parent is None or p == parent)], (c_call, want[3])
    relu = [(f, k) for (n, _, f), k in want[3].items() if n.startswith("<built-in method relu of")]
    assert relu == [("torch_stack.py:%d" % (int(re.search(r"\((\d+)\)", BLOCK_FORWARD).group(1)) + 1), 2)], relu
    assert [n for n in names if n.startswith("torch/optim/sgd.py(")], names
    assert [n for n in names if n.startswith("torch/nn/modules/linear.py(")], names
    # A C call is no source location: operators' call stacks leave it out.
    for o in trace["traceEvents"]:
        assert "<built-in" not in o.get("args", {}).get("Call stack", ""), o


MODULE = re.compile(r"nn\.Module: (\w+)_(\d+)")


def module_calls(trace):
    """{step: Counter((name, parent's name, names of the Python functions and C calls under it, masked))}
    of the nn.Module events starting in each step; asserts that each is in a step and that "Python module
    id" is its name's number."""
    py = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    by_id = {e["args"]["Python id"]: e for e in py}
    under = collections.defaultdict(list)
    for e in sorted(py, key=lambda e: (e["ts"], -e["dur"])):
        if "Python parent id" in e["args"]:
            under[e["args"]["Python parent id"]].append(masked(e["name"]))
    out = collections.defaultdict(collections.Counter)
    for e in py:
        m = MODULE.fullmatch(e["name"])
        if not m:
            continue
        assert e["args"]["Python module id"] == int(m.group(2)), e
        step = [n for n, (a, b) in steps(trace).items() if a <= e["ts"] <= b]
        assert len(step) == 1, e
        parent = by_id[e["args"]["Python parent id"]]["name"]
        out[step[0]][e["name"], parent, tuple(under[e["args"]["Python id"]])] += 1
    return out


def modules_around(trace):
    """{op name: Counter(the nn.Module events enclosing it, outermost first)} for the ops in steps."""
    ev = trace["traceEvents"]
    mods = [e for e in ev if e.get("cat") == "python_function" and MODULE.fullmatch(e["name"])]
    out = collections.defaultdict(collections.Counter)
    for o in ev:
        if o.get("cat") == "cpu_op" and in_steps(trace, o):
            around = sorted((m for m in mods if m["tid"] == o["tid"] and m["ts"] <= o["ts"] and
                             o["ts"] + o["dur"] <= m["ts"] + m["dur"]), key=lambda m: (m["ts"], -m["dur"]))
            out[o["name"]][tuple(m["name"] for m in around)] += 1
    return out


def test_frame_begun_before_the_window_carries_its_call_from():
    """A step function that steps the optimizer (the boundary) before it returns: the call that opens
    the window began in warmup, with no clock read and so no "CallFrom" then, and returns inside the
    window. It is written with its caller's line, as torch.profiler writes it; every python_function
    event of either trace has one."""
    mine = under_stepprof({"PROF_WITH_STACK": 1, "STACK_STEP_FN": 1})
    out = os.path.join(mine.cwd, "ref_step_fn")
    ref_run = run([sys.executable, program("torch_stack_profiled.py"), str(ITERS), out,
                   *(str(SCHED[k]) for k in ("PROF_WAIT", "PROF_WARMUP", "PROF_ACTIVE"))],
                  preload=False, fake=False, env={"STACK_STEP_FN": 1}, timeout=300)
    assert ref_run.returncode == 0, ref_run.stderr
    call_line = [i for i, l in enumerate(open(program(PROG)), 1) if "= one_step(" in l]
    assert len(call_line) == 1, call_line
    for trace in (load(mine.trace()), load(os.path.join(out, "torch.pt.trace.json"))):
        py = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
        assert py and all("CallFrom" in e["args"] for e in py), [e["name"] for e in py if "CallFrom" not in e["args"]]
        froms = [e["args"]["CallFrom"] for e in py if e["name"].endswith(": one_step")]
        assert froms == ["torch_stack.py:%d" % call_line[0]] * 4, froms


def test_nn_module_events_are_torch_profilers():
    """torch.profiler writes each nn.Module call as a python_function event "nn.Module: <class>_<k>"
    (k: the instance's number among its class's, in first-call order), in place of Module.__call__'s
    frame; TensorBoard's Module view is built from them. stepprof writes the same."""
    from test_clients import clients
    mine = under_stepprof({"PROF_WITH_STACK": 1})
    ref, _ = reference()
    got, want = module_calls(load(mine.trace())), module_calls(ref)
    assert sorted(got) == [2, 3, 4] and got == want, (dict(got), dict(want))
    assert {n for n, _, _ in want[3]} == {"nn.Module: " + m for m in
                                          ("Net_0", "Block_0", "Block_1", "Linear_0", "Linear_1", "Linear_2")}
    assert sum(want[3].values()) == 6, want[3]
    # The same modules around the same operators.
    theirs, ours = modules_around(ref), modules_around(load(mine.trace()))
    for name in ("aten::addmm", "aten::relu", "aten::add", "aten::cross_entropy_loss"):
        assert ours[name] == theirs[name], (name, dict(ours[name]), dict(theirs[name]))
    assert theirs["aten::addmm"][("nn.Module: Net_0", "nn.Module: Block_1", "nn.Module: Linear_1")] == 3
    # TensorBoard's Module view: shown for both, the same tree (names, ids, calls, operators).
    ref_path = os.path.join(mine.cwd, "ref.pt.trace.json")  # the reference's run directory is gone by now
    with open(ref_path, "w") as f:
        json.dump(ref, f)
    tb_mine, tb_ref = clients("tb", mine.trace()), clients("tb", ref_path)
    assert "Module" in tb_ref["views"] and "Module" in tb_mine["views"], (tb_mine["views"], tb_ref["views"])
    assert tb_mine["modules"] == tb_ref["modules"] and tb_ref["modules"], (tb_mine["modules"], tb_ref["modules"])
    assert not tb_mine["errors"], tb_mine["errors"]


def test_more_modules_than_the_first_table_holds():
    """The nn.Module table (collectors/pyname.c) grows: 3000 modules, each called once per step (the
    table first holds 512), are each numbered once per step, Linear_0 to Linear_2999 in call order, as
    torch numbers them, with no stepprof: line."""
    n = 3000
    r = run([sys.executable, program("torch_wide_deep.py"), str(ITERS), str(n)], fake=False,
            env=dict(SCHED, PROF_WITH_STACK=1), timeout=300)
    assert r.returncode == 0 and r.other_stderr == "" and not [l for l in r.sp_lines if "with_stack" in l], \
        r.stderr
    trace = load(r.trace())
    for step, (a, b) in sorted(steps(trace).items()):
        mods = sorted((e for e in trace["traceEvents"] if e.get("cat") == "python_function" and
                       MODULE.fullmatch(e["name"]) and a <= e["ts"] <= b), key=lambda e: e["ts"])
        assert [e["name"] for e in mods] == ["nn.Module: Net_0"] + ["nn.Module: Linear_%d" % k for k in range(n)], \
            (step, [e["name"] for e in mods][:5], len(mods))


def test_calls_deeper_than_the_shadow_stack():
    """Recursion past the 256 frames stepprof keeps, with a C call at each level: the frames it keeps are
    written (the deepest are not), each deep() level's len() under it, and the stack is still paired
    after: after() and its len() are the loop's children, as in each step."""
    r = run([sys.executable, program("torch_wide_deep.py"), str(ITERS), "1", "300"], fake=False,
            env=dict(SCHED, PROF_WITH_STACK=1), timeout=300)
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
    trace = load(r.trace())
    py = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    by_id = {e["args"]["Python id"]: e for e in py}
    for step, (a, b) in sorted(steps(trace).items()):
        mine = [e for e in py if a <= e["ts"] <= b]
        deep = [e for e in mine if e["name"].endswith(": deep")]
        # main() and train's <module> are 2 frames: 254 of the 300 deep() frames fit.
        assert len(deep) == 254, (step, len(deep))
        lens = [e for e in mine if e["name"] == "<built-in function len>"]
        parents = collections.Counter(by_id[e["args"]["Python parent id"]]["name"].rpartition(": ")[2] for e in lens)
        # The deepest deep() kept calls len() one level too deep; torch's backward() calls len() too.
        assert parents == {"deep": 253, "after": 1, "backward": 1}, (step, parents)
        after = [e for e in mine if e["name"].endswith(": after")]
        assert len(after) == 1 and by_id[after[0]["args"]["Python parent id"]]["name"].endswith(": main"), after


def check_merged_frames(r, trace):
    """STACK_CUDA=1: each recorded step's CUDA call from Python has the Python frames, then native ones."""
    calls = [e for e in trace["traceEvents"] if e.get("name") == "cudaDeviceSynchronize" and in_steps(trace, e)]
    assert len(calls) == 3, len(calls)  # one per recorded step
    for e in calls:
        frames = e["args"]["Call stack"].split(";")
        # The Python frames come first (outermost) and end in the function that made the call ...
        py = [f for f in frames if FRAME.fullmatch(f)]
        assert frames[:len(py)] == py and program_frames(py) == ("torch_stack.py: train", SYNC_DEVICE), frames
        # ... then the native frames below it (ctypes, libffi), none of the interpreter's own.
        native = frames[len(py):]
        assert any("ffi_call" in f for f in native), native
        assert not [f for f in native if "libpython" in f or "_PyEval" in f or re.search(r"\(\d+\): ", f)], native
    stacks = open(glob.glob(os.path.join(r.outdir, "*.stacks.txt"))[0]).read()
    assert re.search(re.escape(SYNC_DEVICE.replace(" ", "_")) + r";.*ffi_call.*;cudaDeviceSynchronize \d+$", stacks,
                     re.M), stacks


def test_cuda_calls_from_python_merge_python_and_native_frames():
    r = under_stepprof({"PROF_WITH_STACK": 1, "STACK_CUDA": 1})
    check_merged_frames(r, load(r.trace()))


def test_python_frames_do_not_need_libunwind():
    """On a machine without libunwind8, with_stack once recorded no Python frame at all. Native frames
    now come from glibc's backtrace() there (unwinder: glibc names it; auto falls back to it when
    libunwind.so.8 cannot be loaded: an empty file of that name first on LD_LIBRARY_PATH stands for a
    machine without it), and Python frames never depend on the native unwinder: python_function
    events, operators' frames and CUDA calls' merged stacks are as with libunwind."""
    ref, _ = reference()
    d = tempfile.mkdtemp(prefix="sp-test-")
    open(os.path.join(d, "libunwind.so.8"), "w").close()
    for env, said in (({"PROF_UNWINDER": "glibc"}, 0), ({"LD_LIBRARY_PATH": d}, 1)):
        r = under_stepprof(dict(env, PROF_WITH_STACK=1, STACK_CUDA=1))
        assert len([l for l in r.sp_lines if "native frames come from glibc's backtrace()" in l]) == said, \
            (env, r.sp_lines)
        assert r.stdout.splitlines()[0] == "profile function on per step: 1111000", (env, r.stdout)
        trace = load(r.trace())
        # sync_device (STACK_CUDA) is the one program function the reference does not call.
        got = program_calls(trace)
        for c in got.values():
            assert c.pop(SYNC_DEVICE) == 1, (env, c)
        assert got == program_calls(ref), (env, dict(got), dict(program_calls(ref)))
        want, mine = torch_stacks(ref), stepprof_stacks(trace)
        for name in ("aten::addmm", "aten::relu", "aten::cross_entropy_loss"):
            assert any(want[name]) and mine[name] == want[name], (env, name, dict(mine[name]), dict(want[name]))
        check_merged_frames(r, trace)


def test_without_with_stack_no_python_frames_and_no_profile_function():
    r = under_stepprof({})
    assert r.stdout.splitlines()[0] == "profile function on per step: 0000000"
    trace = load(r.trace())
    assert [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    assert not [e for e in trace["traceEvents"] if "Call stack" in e.get("args", {})]
    assert not glob.glob(os.path.join(r.outdir, "*.stacks.txt"))


def test_forked_child_has_no_profile_function():
    r = under_stepprof({"PROF_WITH_STACK": 1, "STACK_FORK": 1})
    lines = r.stdout.splitlines()
    assert "forked child: profile function on: 0" in lines and "profile function on per step: 1111000" in lines, lines


def test_program_with_its_own_profile_function_keeps_it():
    r = under_stepprof({"PROF_WITH_STACK": 1, "STACK_SETPROFILE": 1})
    lines = r.stdout.splitlines()
    assert "own profile function kept: True" in lines and "profile function on per step: 0000000" in lines, lines
    ev = load(r.trace())["traceEvents"]
    assert [e for e in ev if e.get("cat") == "cpu_op"] and not [e for e in ev if "Call stack" in e.get("args", {})]


def test_python_without_torch_stays_inert_with_with_stack():
    code = ("import ctypes, sys; f = ctypes.PyDLL(None).stepprof_pystack; f.argtypes = [ctypes.c_int, "
            "ctypes.c_char_p]; print(f(2, None), sys.getprofile())")
    r = run([sys.executable, "-c", code], fake=False, env={"PROF_WITH_STACK": 1})
    assert (r.returncode, r.stdout, r.stderr) == (0, "0 None\n", "")
    assert r.files() == []
