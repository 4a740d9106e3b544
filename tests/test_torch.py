"""tests/test_torch.py — issue 11: unmodified PyTorch programs (tests/programs/torch_*.py, CPU
loops with no profiler code) under stepprof get torch.profiler's operator view. Each loop also
runs under real torch.profiler with the same schedule (tests/programs/torch_profiled.py, the
recipe's prof.step() after optimizer.step()), and the two traces are compared: the same
ProfilerStep#N numbers, the same aten op names and counts per step, the same Input Dims, and
the key-average # of Calls of the top ops, TensorBoard's Operator view (also for steps GradScaler
skipped). A real DeepSpeed ZeRO-3 loop's model steps are its steps. Also: the program's output and exit code, the
torch marker's plan line, DataLoader workers left inert, a program that runs torch.profiler
itself keeps it, Python processes that never import torch stay inert."""
import collections
import glob
import json
import os
import re
import signal
import sys

import test_reports as reports
from harness import LIB, ROOT, assert_valid, load, prog, run, runtime_events, skip_under_sanitizer

PROGRAMS = os.path.join(ROOT, "tests", "programs")
SCHED = {"PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 3}
ITERS = 7  # steps 0..6: wait 0, warmup 1, record 2-4, then two steps outside the window


def program(name):
    return os.path.join(PROGRAMS, name)


def under_stepprof(name, env=None, args=(str(ITERS),)):
    e = dict(SCHED, PROF_RECORD_SHAPES=1, PROF_TABLE_ROW_LIMIT=-1)
    e.update(env or {})
    return run([sys.executable, program(name), *args], fake=False, env=e, timeout=300)


def under_torch_profiler(name, out):
    r = run([sys.executable, program("torch_profiled.py"), program(name), str(ITERS), out,
             str(SCHED["PROF_WAIT"]), str(SCHED["PROF_WARMUP"]), str(SCHED["PROF_ACTIVE"])],
            preload=False, fake=False, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "key_averages.json")) as f:
        ka = json.load(f)
    return r, load(os.path.join(out, "torch.pt.trace.json")), ka


def steps(trace):
    """{N: (ts, end)} of the ProfilerStep#N annotations on the host."""
    out = {}
    for e in trace["traceEvents"]:
        m = re.fullmatch(r"ProfilerStep#(\d+)", e.get("name", ""))
        if m and e.get("cat") == "user_annotation" and e.get("ph") == "X":
            out[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
    return out


def ops_per_step(trace):
    """{N: Counter((name, Input Dims))} of aten cpu_op events inside ProfilerStep#N."""
    st = steps(trace)
    per = {n: collections.Counter() for n in st}
    for e in trace["traceEvents"]:
        if e.get("cat") != "cpu_op" or not e["name"].startswith("aten::"):
            continue
        for n, (a, b) in st.items():
            if a <= e["ts"] and e["ts"] + e["dur"] <= b:
                per[n][(e["name"], json.dumps(e["args"].get("Input Dims")))] += 1
    return per


def fwdbwd_links(trace):
    """[(forward op, backward op)] joined by the trace's fwdbwd flows."""
    at = {}
    for e in trace["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            at.setdefault((e["tid"], e["ts"]), e)
    ends = collections.defaultdict(dict)
    for e in trace["traceEvents"]:
        if e.get("cat") == "fwdbwd":
            ends[e["id"]][e["ph"]] = at[(e["tid"], e["ts"])]
    return [(p["s"], p["f"]) for p in ends.values()]


def fwdbwd_pairs(trace):
    """Counter of (forward op, backward op) names joined by Kineto's fwdbwd flows."""
    links = fwdbwd_links(trace)
    for f, g in links:
        assert f["args"]["Fwd thread id"] == 0 and g["args"]["Fwd thread id"] > 0
        assert f["args"]["Sequence number"] == g["args"]["Sequence number"]
    return collections.Counter((f["name"], g["name"]) for f, g in links)


def tensorboard_operators(path):
    """{operator: calls} of the TensorBoard profiler plugin's Operator view for one trace."""
    from torch_tb_profiler.profiler.data import RunProfileData
    d = RunProfileData.parse("worker", "0", path, None)
    d = d[0] if isinstance(d, tuple) else d
    d.process()
    return {op.name: op.calls for op in d.op_list_groupby_name}


def table_calls(path, by_shape=False):
    """{Name: # of Calls} (by_shape: {(Name, Input Shapes): # of Calls}) from a key-average table file."""
    with open(path) as f:
        lines = f.read().splitlines()
    header = next(l for l in lines if l.strip().startswith("Name"))
    cols = re.split(r"\s{2,}", header.strip())
    calls = {}
    for l in lines:
        if l.startswith("-") or l is header or not l.strip() or l.startswith(("Self ", "stepprof")):
            continue
        cells = re.split(r"\s{2,}", l.strip())
        if len(cells) == len(cols) and cells[0] != "Name":
            key = (cells[0], cells[cols.index("Input Shapes")]) if by_shape else cells[0]
            calls[key] = int(cells[cols.index("# of Calls")])
    return calls


def compare(name):
    mine = under_stepprof(name)
    assert mine.returncode == 0, mine.stderr
    assert mine.other_stderr == "", mine.other_stderr
    assert any("marker torch; recording steps 2-4" in l for l in mine.sp_lines), mine.sp_lines
    ref_run, ref, ref_ka = under_torch_profiler(name, os.path.join(mine.cwd, "ref"))
    assert mine.stdout == ref_run.stdout, "the program's output changed under stepprof"
    assert_valid(mine.trace())
    trace = load(mine.trace())
    assert sorted(steps(trace)) == sorted(steps(ref)) == [2, 3, 4]
    a, b = ops_per_step(trace), ops_per_step(ref)
    for n in (2, 3, 4):
        assert sum(b[n].values()) > 20, f"reference step {n} has too few aten ops: {b[n]}"
        assert a[n] == b[n], f"step {n}: only stepprof {a[n] - b[n]}, only torch.profiler {b[n] - a[n]}"
    pairs = fwdbwd_pairs(trace)
    assert sum(pairs.values()) >= 3 * 5 and pairs == fwdbwd_pairs(ref), (pairs, fwdbwd_pairs(ref))
    # TensorBoard's Operator view lists the same operators with the same calls.
    tb = tensorboard_operators(mine.trace())
    assert len(tb) > 20 and tb == tensorboard_operators(os.path.join(mine.cwd, "ref", "torch.pt.trace.json"))
    table = glob.glob(os.path.join(mine.outdir, "*.key_averages.txt"))
    assert len(table) == 1, mine.files()
    calls = table_calls(table[0])
    top = sorted((k for k in ref_ka["calls"] if k.startswith("aten::")), key=lambda k: -ref_ka["calls"][k])[:10]
    assert top
    for k in top:
        assert calls.get(k) == ref_ka["calls"][k], f"{k}: stepprof {calls.get(k)}, torch.profiler {ref_ka['calls'][k]}"
    return mine, trace


def test_mlp_adam_matches_torch_profiler():
    mine, trace = compare("torch_mlp.py")
    # key_averages(group_by_input_shape=True): the same rows, offline too.
    ref_ka = json.load(open(os.path.join(mine.cwd, "ref", "key_averages.json")))
    r = run([os.path.join(os.path.dirname(LIB), "stepprof-report"), mine.trace(), "--group-by-input-shape",
             "--row-limit", "-1"], preload=False, fake=False)
    assert r.returncode == 0, r.stderr
    table = os.path.join(mine.cwd, "by_shape.txt")
    with open(table, "w") as f:
        f.write(r.stdout)
    calls = table_calls(table, by_shape=True)
    want = sorted((row for row in ref_ka["shapes"] if row[0].startswith("aten::")), key=lambda row: -row[2])[:12]
    assert len(want) == 12
    for name, shape, count in want:
        assert calls.get((name, shape)) == count, (name, shape, count, calls.get((name, shape)))
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert addmm and all(e["args"]["Input Dims"] == [[64], [16, 32], [32, 64], [], []] or
                         e["args"]["Input Dims"] == [[10], [16, 64], [64, 10], [], []] for e in addmm)
    assert all("Sequence number" in e["args"] for e in ops if e["name"] == "aten::linear")
    assert "Optimizer.step#Adam.step" in {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}


def test_conv_net_matches_torch_profiler():
    mine, trace = compare("torch_conv.py")  # gradient accumulation: a step is an optimizer step
    # TensorList inputs (torch.cat, torch.stack) nest as Kineto writes them (compare() matched them to
    # torch.profiler's): one list of the tensors' sizes, not each tensor as an input of its own.
    dims = collections.defaultdict(set)
    for e in trace["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::cat", "aten::stack"):
            dims[e["name"]].add(json.dumps(e["args"].get("Input Dims")))
    assert dims["aten::stack"] == {"[[[4, 16], [4, 16]], []]"}, dims
    assert "[[[4, 16], [4, 16]], []]" in dims["aten::cat"], dims


def test_two_optimizers_match_torch_profiler():
    compare("torch_two_opt.py")


def test_hf_trainer_with_gradient_accumulation_matches_torch_profiler():
    # The Trainer steps AdamW through accelerate's optimizer wrapper once per two forward and backward
    # passes: one step each, as its callbacks' on_step_end, where torch.profiler's recipe for it steps.
    compare("torch_hf_trainer.py")


def test_foreach_optimizer_input_dims_match_torch_profiler():
    # A GPU run's default optimizer path, forced on the CPU: foreach AdamW over two parameter groups and
    # foreach gradient clipping. Their tensor lists (flattened in torch's NVTX text) nest as Kineto writes
    # them: the step counts' _foreach_add_ (its Tensor overload; the fused one uses the Scalar overload on
    # the same flattened count: tests/programs/torch_hf_trainer.py; here groups of 4, 3 and 1, where 5 step
    # counts' "[]" also read as the Scalar overload on 4), and _foreach_add_(denom, eps) on a group whose
    # sizes repeat halfway ([A, B, A, B] also reads as the List overload on [A, B] twice).
    mine, trace = compare("torch_foreach.py")
    dims = collections.defaultdict(set)
    for e in trace["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"].startswith("aten::_foreach_"):
            dims[e["name"]].add(json.dumps(e["args"]["Input Dims"]))
    assert dims["aten::_foreach_norm"] == {json.dumps([[[64, 32], [64], [64, 64], [64], [64, 64], [64], [10, 64], [10]],
                                                       [], []])}, dims
    assert json.dumps([[[64, 64], [64], [64, 64], [64]], []]) in dims["aten::_foreach_add_"], dims["aten::_foreach_add_"]
    assert json.dumps([[[], [], []], [], []]) in dims["aten::_foreach_add_"], dims["aten::_foreach_add_"]


def test_probe_for_torch_before_importing_it_leaves_the_hook():
    # transformers (and accelerate) ask importlib.util.find_spec("torch") before importing torch: the
    # probe used up stepprof's import hook, so the real import was never hooked (no plan line, no steps,
    # no trace). Probed twice, then imported: the window is written with its step.
    code = ("import importlib.util\n"
            "assert importlib.util.find_spec('torch') and importlib.util.find_spec('torch')\n"
            "import torch\n"
            "m = torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for i in range(6):\n"
            "    opt.zero_grad(); m(torch.ones(3, 4)).sum().backward(); opt.step()\n"
            "print('done')\n")
    r = run([sys.executable, "-c", code], fake=False, env=SCHED, timeout=300)
    assert r.returncode == 0 and r.stdout == "done\n" and r.other_stderr == "", r.stderr
    assert sorted(steps(load(r.trace()))) == [2, 3, 4], r.sp_lines


def test_steps_skipped_by_grad_scaler_still_end():
    # GradScaler.step skips optimizer.step() on overflowed gradients (fp16 AMP's first iterations): the
    # iteration still ends a step, as prof.step() after scaler.step() ends it. Step 3 overflows here.
    compare("torch_amp.py")


def test_deepspeed_engine_step_is_one_step():
    # DeepSpeed's ZeRO-3 steps its inner torch optimizer once per parameter sub-group: each engine.step()
    # was counted as several steps (5 iterations made steps 0-10). Its model step is one step now.
    # DeepSpeed, from its sdist, is a private copy (scripts/pydeps.sh); its CPU comm op is built once
    # into build/pydeps/torch_extensions.
    skip_under_sanitizer("DeepSpeed's import asks torch.mps, which throws a C++ exception, and ASan's __cxa_throw "
                         "interceptor, set up before Python loaded libstdc++, has no real function: the bare run aborts too")
    ds = os.path.join(ROOT, "build", "pydeps", "deepspeed")
    assert os.path.isdir(os.path.join(ds, "deepspeed")), f"{ds} missing: scripts/pydeps.sh installs DeepSpeed there"
    env = {"PYTHONPATH": ds, "LOCAL_RANK": 0, "OMP_NUM_THREADS": 1, "DS_ACCELERATOR": "cpu",
           "TORCH_EXTENSIONS_DIR": os.path.join(ROOT, "build", "pydeps", "torch_extensions")}
    argv = [sys.executable, program("torch_deepspeed.py"), "5", "."]
    bare = run(argv, preload=False, fake=False, env=env, timeout=170)
    m = re.search(r"loss .* global steps 5 inner optimizer steps (\d+)", bare.stdout)
    assert bare.returncode == 0 and m and int(m.group(1)) > 5, (bare.stdout, bare.stderr)
    r = run(argv, fake=False, env=env, timeout=170)   # (DeepSpeed prints what it built or loaded: the last line)
    assert r.returncode == 0 and m.group(0) in r.stdout, r.stderr
    trace = load(r.trace())
    assert sorted(steps(trace)) == [0, 1, 2, 3, 4, 5]   # 5 iterations, then what follows to exit
    # one process, no launcher rank: its torch.distributed backend, not the libnccl guess
    assert trace["distributedInfo"] == {"backend": "gloo", "rank": 0, "world_size": 1}, trace.get("distributedInfo")
    r = run(argv, fake=False, env=dict(env, PROF_RECORD_SHAPES=1, **SCHED), timeout=170)
    assert r.returncode == 0 and m.group(0) in r.stdout, r.stderr
    per = ops_per_step(load(r.trace()))
    assert sorted(per) == [2, 3, 4], sorted(per)
    for n in (2, 3, 4):   # iteration n sums torch.ones(n + 1, 7), and no other iteration's
        marks = {k: c for k, c in per[n].items() if k[0] == "aten::sum" and re.fullmatch(r"\[\[\d+, 7\], \[\]\]", k[1])}
        assert marks == {("aten::sum", "[[%d, 7], []]" % (n + 1)): 1}, (n, marks)


def _one_process_trace(r):
    trace = load(r.trace())
    pids = {e["pid"] for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    assert len(pids) == 1, pids
    return trace


def _dataloader_workers_stay_inert(method):
    ref = run([sys.executable, program("torch_loader.py"), method], preload=False, fake=False, timeout=300)
    r = under_stepprof("torch_loader.py", args=(method,))
    assert r.returncode == ref.returncode == 0, r.stderr
    assert r.stdout == ref.stdout
    assert r.other_stderr == "", r.other_stderr
    # One plan line and one set of files: the workers never started stepprof.
    assert len([l for l in r.sp_lines if "marker torch" in l]) == 1, r.sp_lines
    trace = _one_process_trace(r)
    assert sorted(steps(trace)) == [2, 3, 4]


def test_dataloader_fork_workers_stay_inert():
    _dataloader_workers_stay_inert("fork")


def test_dataloader_spawn_workers_stay_inert():
    _dataloader_workers_stay_inert("spawn")


def test_forked_child_has_no_autograd_profiler():
    # A child forked while the operators are on (a DataLoader fork worker made in a window, or at any
    # time with no schedule) must not carry the autograd profiler: torch's NVTX text costs it per op.
    code = ("import os, sys, warnings\n"
            "import torch\n"
            "warnings.simplefilter('ignore', DeprecationWarning)\n"
            "m = torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for i in range(4):\n"
            "    opt.zero_grad(); m(torch.ones(3, 4)).sum().backward(); opt.step()\n"
            "    if i == 2:\n"
            "        print('parent', torch._C._autograd._profiler_enabled(), flush=True)\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            torch.ones(2).sum()\n"
            "            print('child', torch._C._autograd._profiler_enabled(), flush=True)\n"
            "            os._exit(0)\n"
            "        os.waitpid(pid, 0)\n")
    for env in (SCHED, {}):   # step 3 is recorded; no schedule: the whole run is
        r = run([sys.executable, "-c", code], fake=False, env=env, timeout=300)
        assert r.returncode == 0 and r.other_stderr == "", r.stderr
        assert r.stdout == "parent True\nchild False\n", r.stdout
        assert len(r.traces()) == 1


def test_record_function_around_the_step_leaves_stderr_alone():
    # A program's record_function around each iteration is still open when the optimizer step ends
    # a window: torch asserts (a C++ trace on stderr) if the autograd profiler is off when it ends,
    # so stepprof switches it off when that record_function ends, within the same iteration.
    code = ("import sys, contextlib\n"
            "import torch\n"
            "m = torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "on = ''\n"
            "for i in range(7):\n"
            "    with (torch.autograd.profiler.record_function('train_step') if sys.argv[1] == 'rf'\n"
            "          else contextlib.nullcontext()):\n"
            "        opt.zero_grad(); m(torch.ones(3, 4)).sum().backward(); opt.step()\n"
            "    on += str(int(torch._C._autograd._profiler_enabled()))\n"
            "print(on)\n")
    plain = run([sys.executable, "-c", code, "plain"], fake=False, env=SCHED, timeout=300)
    r = run([sys.executable, "-c", code, "rf"], fake=False, env=SCHED, timeout=300)
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
    assert r.stdout == plain.stdout == "1111000\n", (r.stdout, plain.stdout)
    trace = load(r.trace())
    assert sorted(steps(trace)) == [2, 3, 4]
    per = ops_per_step(trace)
    assert all(sum(c for (name, _), c in per[n].items() if name == "aten::addmm") == 1 for n in (2, 3, 4)), per


def test_compiled_optimizer_step_leaves_stderr_alone():
    # PyTorch's compiled-optimizer recipe: the step runs inside torch.compile'd code, whose C++
    # "Torch-Compiled Region" scope is open when the step's hooks end a window. Switching the autograd
    # profiler off there made torch print an internal assert (a 20-line C++ trace) at every window
    # close; it now goes off as the caller resumes, after the scope.
    skip_under_sanitizer("inductor's CUDA probe throws a C++ exception, and ASan's __cxa_throw interceptor, "
                         "set up before Python loaded libstdc++, has no real function: the bare run aborts too")
    code = ("import sys, torch\n"
            "m = torch.nn.Linear(16, 16)\n"
            "opt = torch.optim.Adam(m.parameters(), lr=1e-3)\n"
            "@torch.compile\n"
            "def opt_step():\n"
            "    opt.step()\n"
            "on = ''\n"
            "for i in range(7):\n"
            "    m(torch.randn(8, 16)).sum().backward()\n"
            "    opt_step()\n"
            "    opt.zero_grad()\n"
            "    on += str(int(torch._C._autograd._profiler_enabled())) + ('t' if sys.gettrace() else '')\n"
            "print(on)\n")
    bare = run([sys.executable, "-c", code], preload=False, fake=False, timeout=300)
    r = run([sys.executable, "-c", code], fake=False, env=SCHED, timeout=300)
    assert bare.returncode == r.returncode == 0, r.stderr
    assert bare.stdout == "0000000\n" and r.stdout == "1111000\n", (bare.stdout, r.stdout)
    def plain(err):   # torch's own warnings, without their time and pid
        return [re.sub(r"^W\d+ [\d:.]+ \d+ ", "W ", line) for line in err.splitlines()]
    assert "INTERNAL ASSERT" not in r.stderr and plain(r.other_stderr) == plain(bare.stderr), r.stderr
    trace = load(r.trace())
    assert sorted(steps(trace)) == [2, 3, 4]
    assert any(e["name"].startswith("Torch-Compiled Region") for e in trace["traceEvents"]), "compiled scopes drawn"


def test_keyboard_interrupt_keeps_the_cycle_in_progress():
    # Ctrl-C: Python finalizes, then ends itself by SIGINT with the default action (no atexit, and
    # stepprof's signal handler is never installed over Python's): the cycle in progress is written
    # anyway, truncated, as a terminating signal leaves it; the exit is still the signal's.
    code = ("import torch\n"
            "m = torch.nn.Linear(4, 2)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "for i in range(8):\n"
            "    opt.zero_grad(); m(torch.ones(3, 4)).sum().backward(); opt.step()\n"
            "    if i == 3:\n"
            "        raise KeyboardInterrupt\n")
    ref = run([sys.executable, "-c", code], preload=False, fake=False, timeout=300)
    for env, recorded in ((SCHED, [2, 3, 4]), ({}, [0, 1, 2, 3, 4])):
        r = run([sys.executable, "-c", code], fake=False, env=env, timeout=300)
        assert (r.returncode, r.stdout, r.other_stderr) == (ref.returncode, ref.stdout, ref.stderr), r.stderr
        assert r.returncode == -signal.SIGINT
        trace = load(r.trace())
        assert sorted(steps(trace)) == recorded and trace["stepprof_truncated"] is True, r.stderr


def test_program_running_torch_profiler_keeps_it():
    for env in ({}, SCHED):
        mine_dir = os.path.join(run([sys.executable, "-c", "pass"], preload=False, fake=False).cwd, "own")
        r = run([sys.executable, program("torch_own_profiler.py"), mine_dir], fake=False,
                env={k: v for k, v in env.items()} or None, timeout=300)
        assert r.returncode == 0, r.stderr
        said = [l for l in r.sp_lines if "runs torch.profiler itself" in l]
        assert len(said) == 1, r.sp_lines
        own = glob.glob(os.path.join(mine_dir, "*.pt.trace.json"))
        assert len(own) == 1, os.listdir(mine_dir)
        t = load(own[0])
        assert sorted(steps(t)) == [2, 3]
        assert sum(1 for e in t["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm") == 2
        # stepprof's own trace has the steps but no operators once torch.profiler took them.
        assert len(r.traces()) == 1
        mine = load(r.traces()[0])
        st = steps(mine)
        # Without a schedule: the program's 6 iterations are steps 0-5 (step 0 begins at import), and
        # step 6 is what follows the last optimizer step, until exit.
        assert sorted(st) == ([0, 1, 2, 3, 4, 5, 6] if not env else [2, 3, 4])
        # The program's profiler waits through step 0 (schedule wait=1) and sets up Kineto when step 1
        # begins: step 0's operators are stepprof's, none from step 1 on.
        first = min(a for n, (a, _) in st.items() if n >= 1)
        assert not [e for e in mine["traceEvents"] if e.get("cat") == "cpu_op" and e["ts"] >= first]


def test_python_without_torch_stays_inert_and_user_sitecustomize_runs():
    site = os.path.join(run([sys.executable, "-c", "pass"], preload=False, fake=False).cwd, "site")
    os.makedirs(site)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write("import sys\nsys.stdout.write('user sitecustomize\\n')\n")
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    ref = run([sys.executable, "-c", code, "a b"], preload=False, fake=False, env={"PYTHONPATH": site})
    r = run([sys.executable, "-c", code, "a b"], fake=False, env={"PYTHONPATH": site})
    assert ref.stdout == "user sitecustomize\n[\"a b\"]\n"
    assert (r.returncode, r.stdout, r.stderr) == (ref.returncode, ref.stdout, ref.stderr)
    assert r.files() == []
    # The program's sys.path is its own: stepprof's folder is not left on it.
    p = run([sys.executable, "-c", "import sys; print([x for x in sys.path if 'python' == x.rsplit('/', 1)[-1]])"],
            fake=False)
    assert p.stdout == "[]\n", p.stdout


def test_program_and_its_children_see_their_own_pythonpath():
    # The constructor puts stepprof's folder on PYTHONPATH for the interpreter's start only: the
    # program's environment (printed, or handed to a shell and its children) is its own, and a
    # preloaded Python child still gets the bootstrap.
    code = ("import os, subprocess, sys\n"
            "print(os.environ.get('PYTHONPATH'))\n"
            "sys.stdout.flush()\n"
            "subprocess.run('echo \"sh $PYTHONPATH\"', shell=True)\n"
            "subprocess.run([sys.executable, '-c', 'import os, sys; "
            "print(os.environ.get(\"PYTHONPATH\")); print(sys.argv[1] in sys.modules)', sys.argv[1]])\n")
    for pp in (None, "/x:/y"):
        env = {"PYTHONPATH": pp}
        ref = run([sys.executable, "-c", code, "os"], preload=False, fake=False, env=env)
        r = run([sys.executable, "-c", code, "_stepprof_torch"], fake=False, env=env)
        assert ref.stdout == "%s\nsh %s\n%s\nTrue\n" % (pp, pp or "", pp), ref.stdout
        assert (r.returncode, r.stdout, r.stderr) == (ref.returncode, ref.stdout, ref.stderr), r.stdout


def test_isolated_and_no_site_interpreters_are_left_alone():
    # -E and -I ignore PYTHONPATH and -S skips site.py: no bootstrap runs there, so stepprof's folder
    # must not be left in their environment or on their sys.path. An -S after -c is the program's.
    code = "import os, sys; print(os.environ.get('PYTHONPATH'), sys.path, '_stepprof_torch' in sys.modules)"
    for opts in (["-S"], ["-E"], ["-I"], ["-uS"], ["-W", "ignore", "-S"], ["-Wignore", "-E"], ["-X", "dev", "-I"]):
        ref = run([sys.executable, *opts, "-c", code], preload=False, fake=False)
        r = run([sys.executable, *opts, "-c", code], fake=False)
        assert ref.stdout.endswith(" False\n"), ref.stdout
        assert (r.returncode, r.stdout, r.stderr) == (ref.returncode, ref.stdout, ref.stderr), (opts, r.stdout)
    r = run([sys.executable, "-c", code, "-S"], fake=False)
    assert r.returncode == 0 and r.stdout.startswith("None [") and r.stdout.endswith(" True\n"), r.stdout


def test_isolated_interpreter_with_torch_and_a_cuda_call_without_driver():
    # No bootstrap under -E / -I, so nothing tells stepprof that torch (and its pip CUPTI 13.2, which
    # overflows the stack in cuptiSubscribe without a driver) is loaded: the CUDA call activates stepprof
    # as in a C program, which must find no driver before it subscribes. It crashed with SIGSEGV.
    code = ("import ctypes, torch; print(ctypes.CDLL(None).cudaMalloc(ctypes.byref(ctypes.c_void_p()), "
            "ctypes.c_size_t(16)) != 0, torch.ones(2).sum().item())")
    for opt in ("-E", "-I"):
        ref = run([sys.executable, opt, "-c", code], preload=False, fake=False, timeout=300)
        r = run([sys.executable, opt, "-c", code], fake=False, timeout=300)
        assert ref.returncode == 0 and ref.stdout == "True 2.0\n", (ref.returncode, ref.stdout, ref.stderr)
        assert (r.returncode, r.stdout) == (ref.returncode, ref.stdout), (opt, r.returncode, r.stderr[-2000:])
        assert len([l for l in r.sp_lines if "CUPTI" in l]) == 1, r.sp_lines
        assert [l for l in r.sp_lines if "CUPTI" in l and "no GPU or driver" in l], r.sp_lines
        assert [e["name"] for e in runtime_events(load(r.trace()))] == ["cudaMalloc"]


def test_explicit_marker_and_record_shapes_off():
    r = under_stepprof("torch_mlp.py", env={"PROF_MARKER": "torch", "PROF_RECORD_SHAPES": 0})
    assert r.returncode == 0, r.stderr
    trace = load(r.trace())
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    assert ops and not [e for e in ops if "Input Dims" in e["args"]]
    assert sorted(steps(trace)) == [2, 3, 4]


def test_kernels_and_copies_carry_their_operators_external_id():
    """On the CUDA stand-in (real PyTorch cannot use it), torch_ops_c pushes the NVTX messages torch's
    NVTX observer writes around the CUDA work its operators would do."""
    r = run([prog("torch_ops_c"), "3"], env={"PROF_MARKER": "nvtx:train_step"})
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert_valid(r.trace())
    ev = load(r.trace())["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    assert [e["name"] for e in ops[:4]] == ["aten::mm", "aten::copy_",
                                            "autograd::engine::evaluate_function: MmBackward0", "MmBackward0"]
    assert len(ops) == 12
    assert {json.dumps(e["args"].get("Input Dims")) for e in ops if e["name"] == "aten::mm"} == \
        {"[[64, 32], [32, 16]]"}
    user = {e["name"] for e in ev if e.get("cat") == "user_annotation"}
    assert "Optimizer.step#SGD.step" in user and not [n for n in user if "op_id" in n]
    ext = {e["args"]["External id"]: e for e in ops}
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert len(gpu) == 9
    launched_by = collections.Counter(ext[e["args"]["External id"]]["name"] for e in gpu)
    assert launched_by == {"aten::mm": 3, "aten::copy_": 3, "MmBackward0": 3}, launched_by
    calls = [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] in ("cudaLaunchKernel", "cudaMemcpy")]
    assert all(ext[e["args"]["External id"]]["name"] != "Optimizer.step#SGD.step" for e in calls)
    # Operators get no gpu_user_annotation of their own (Kineto draws those for user ranges only).
    assert not [e for e in ev if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("aten::")]
    flows = [e for e in ev if e.get("cat") == "fwdbwd"]
    assert len(flows) == 6 and {ext_name for ext_name in fwdbwd_pairs({"traceEvents": ev})} == \
        {("aten::mm", "MmBackward0")}


def test_library_and_user_ranges_inside_an_operator_leave_its_kernels_to_it():
    """torch.profiler never sees NVTX ranges: a kernel launched inside CUB's own range (domain "CCCL") or
    a user's range, both within aten::embedding_dense_backward, belongs to the operator (issue 17: on an
    H200, 140 of the op's 190 kernels carried a cub::DeviceRadixSort range's External id). The ranges
    are still drawn; a user range around the operator keeps the kernels launched outside it, and so
    does a start/end range begun inside the operator once the operator has ended."""
    r = run([prog("torch_ops_c"), "3", "cccl"], env={"PROF_MARKER": "nvtx:train_step", "PROF_TABLE_ROW_LIMIT": -1})
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert_valid(r.trace())
    ev = load(r.trace())["traceEvents"]
    scopes = {e["args"]["External id"]: e for e in ev if e.get("cat") in ("cpu_op", "user_annotation")}
    assert len(scopes) == sum(1 for e in ev if e.get("cat") in ("cpu_op", "user_annotation")), "unique ids"
    cub = [e for e in ev if e.get("name") == "cub::DeviceRadixSort::SortPairs" and e["pid"] == e["tid"]]
    assert len(cub) == 3 and all(e["cat"] == "user_annotation" for e in cub), cub
    op_ids = {i for i, e in scopes.items() if e["name"] == "aten::embedding_dense_backward"}
    assert len(op_ids) == 3 and all(scopes[i]["cat"] == "cpu_op" for i in op_ids)

    def inside(e, name):
        return [s for s in scopes.values() if s["name"] == name and s["tid"] == e["tid"] and
                s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
    # Every call inside a CUB range, intercepted or seen by CUPTI alone, carries its operator's id.
    calls = [e for e in runtime_events({"traceEvents": ev}, all_sources=True) if inside(e, "cub::DeviceRadixSort::SortPairs")]
    assert collections.Counter((e["name"], e["args"].get("stepprof_source", "")) for e in calls) == \
        {("cudaLaunchKernel", ""): 3, ("cudaMemsetAsync", ""): 3, ("cudaMemsetAsync", "cupti"): 3}, calls
    for e in calls:
        assert e["args"]["External id"] == inside(e, "aten::embedding_dense_backward")[0]["args"]["External id"], e
    # GPU work: the operator's kernels (its own, CUB's, the one in user_inner) and sets; user_block keeps
    # the kernel launched outside the operator (no operator open there: the innermost range's, as before).
    work = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by = collections.Counter((scopes[e["args"]["External id"]]["name"], e["cat"]) for e in work)
    assert by == {("aten::mm", "kernel"): 3, ("aten::copy_", "gpu_memcpy"): 3, ("MmBackward0", "kernel"): 3,
                  ("user_block", "kernel"): 3, ("io", "kernel"): 3, ("aten::embedding_dense_backward", "kernel"): 9,
                  ("aten::embedding_dense_backward", "gpu_memset"): 6}, by
    # The ranges inside the operator are still drawn on the GPU around the work launched in them.
    spans = collections.Counter(e["name"] for e in ev if e.get("cat") == "gpu_user_annotation")
    assert spans == {"train_step": 3, "user_block": 3, "cub::DeviceRadixSort::SortPairs": 3, "user_inner": 3,
                     "io": 3}, spans
    for g in (e for e in ev if e.get("cat") == "gpu_user_annotation"):
        assert scopes[g["args"]["External id"]]["name"] == g["name"], g
    # The key-average table charges the operator with the same work: its CUDA total is the GPU time that
    # carries its External id; the offline tool agrees byte for byte.
    text = reports.outputs(r, ".key_averages.txt")
    _, rows = reports.parse_table(text)
    row = next(x for x in rows if x["Name"] == "aten::embedding_dense_backward")
    owned = sum(e["dur"] for e in work if e["args"]["External id"] in op_ids)
    assert int(row["# of Calls"]) == 3 and abs(reports.ns(row["CUDA total"]) / 1e3 - owned) < 0.001 * len(work), \
        (row, owned)
    assert reports.tool(r.trace(), "--row-limit", "-1").stdout == text


def test_whole_run_and_training_thread_leave_stderr_alone():
    # No schedule: the whole run is one window; the autograd profiler goes off at exit (torch would
    # warn about a leaked callback otherwise), and operators come from the main thread.
    r = run([sys.executable, program("torch_mlp.py"), "3"], fake=False, timeout=300)
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
    trace = load(r.trace())
    # Iterations 0-2 are steps 0-2 (step 0 begins when torch is imported); step 3 is the rest, until exit.
    st = steps(trace)
    assert sorted(st) == [0, 1, 2, 3]
    addmm = [e["ts"] for e in trace["traceEvents"] if e.get("name") == "aten::addmm"]
    assert len(addmm) == 6 and all(sum(a <= ts <= b for ts in addmm) == 2 for n, (a, b) in st.items() if n < 3)
    # Training in another thread: with a schedule its windows are recorded on that thread.
    r = under_stepprof("torch_thread.py", args=())
    assert r.returncode == 0 and r.stdout == "ok\n" and r.other_stderr == "", r.stderr
    trace = load(r.trace())
    assert sorted(steps(trace)) == [2, 3, 4]
    tids = {e["tid"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op"}
    step_tids = {e["tid"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
    assert tids == step_tids and len(tids) == 1 and tids != {trace["traceEvents"][0].get("pid")}
    r = run([sys.executable, program("torch_thread.py")], fake=False, timeout=300)
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
