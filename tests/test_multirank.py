"""tests/test_multirank.py — issue 16 items 4-6: multi-rank jobs. Open MPI's
real mpirun starts 4 ranks of the CUDA stand-in training program under
`stepprof run`; the traces carry the launcher's ranks (distributedInfo, worker
names that sort by rank and that the real TensorBoard plugin loads as one
worker per rank), `ranks` keeps the
others inert, `stepprof merge` puts them on one timeline and HTA reads the
directory as 4 ranks. torchrun, Slurm and PMI are their environment
variables (what those launchers set), checked without a launcher; real
torchrun and torch.multiprocessing start PyTorch DDP ranks (rank and backend
from torch.distributed), and the real launchers of torchrun, HF accelerate and
DeepSpeed stay inert while their workers are profiled."""
import glob
import json
import os
import re
import shutil
import sys
import tempfile

from harness import BUILD, ROOT, assert_valid, load, prog, run, skip_under_sanitizer

CMD = os.path.join(BUILD, "stepprof")
PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", "4", "--oversubscribe"]
# Variables a launcher around the test runner could have set; each test says its own.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMIX_RANK", "PMI_SIZE", "SLURM_PROCID",
                 "SLURM_NTASKS", "SLURM_LOCALID")


def clean_env(**extra):
    env = {k: None for k in LAUNCHER_VARS}
    env.update(extra)
    return env


def mpi_job(*flags, steps=4):
    r = run(MPIRUN + [CMD, "run", "--marker", "nvtx:train_step", "--active", "2", *flags, "--",
                      prog("train_c"), str(steps)], preload=False, env=clean_env(), timeout=300)
    assert r.returncode == 0, f"mpirun exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.count("done\n") == 4, f"every rank's own output passes through:\n{r.stdout}"
    return r


def ranks_of(traces):
    return [load(t)["distributedInfo"]["rank"] for t in traces]


def by_name(traces):
    return sorted(traces, key=os.path.basename)


def tb_consts():
    import torch_tb_profiler.consts as c
    return c


def test_mpirun_four_ranks():
    r = mpi_job()
    traces = by_name(r.traces())
    assert len(traces) == 4, f"one trace per rank: {r.files()}\n{r.stderr}"
    assert ranks_of(traces) == [0, 1, 2, 3], "file names sort by rank"
    c = tb_consts()
    pids = set()
    for rank, t in enumerate(traces):
        tr = load(t)
        assert_valid(t)
        info = tr["distributedInfo"]
        assert info["world_size"] == 4 and "backend" not in info, info   # no NCCL in this program
        assert re.search(r'"rank":\s+%d' % rank, open(t).read()), "HTA's rank regex finds it"
        worker = c.WORKER_PATTERN.match(os.path.basename(t)).group(1)
        node, pid = c.NODE_PROCESS_PATTERN.match(worker).groups()
        assert worker.startswith(f"rank{rank}_") and int(pid) in {e["pid"] for e in tr["traceEvents"]}, worker
        pids.add(pid)
        assert tr["stepprof_steps"] == [1, 2]
    assert len(pids) == 4
    assert r.stderr.count("stepprof: key averages of the last cycle (rank0_") == 1, r.stderr
    # The real TensorBoard plugin loads the shared directory as 4 workers, in rank order.
    import tempfile
    from torch_tb_profiler import io
    from torch_tb_profiler.profiler.loader import RunLoader
    tb = RunLoader("run", r.outdir, io.Cache(tempfile.mkdtemp(prefix="sp-tb-"))).load()
    workers = list(tb.workers)
    assert [w.split("_")[0] for w in sorted(workers)] == ["rank0", "rank1", "rank2", "rank3"], workers
    for w in workers:
        prof = tb.get_profile(w, tb.get_spans(w)[0])
        assert prof.has_kernel and prof.overview is not None, w


def test_mpirun_ranks_key():
    r = mpi_job("--ranks", "1,3")
    traces = by_name(r.traces())
    assert ranks_of(traces) == [1, 3], f"only ranks 1 and 3 record: {r.files()}"
    assert all(os.path.basename(t).startswith(("rank1_", "rank3_")) for t in r.files())
    assert r.stderr.count("stepprof: marker nvtx:train_step;") == 2, "ranks 0 and 2 say nothing:\n" + r.stderr
    # The lowest recording rank prints the end report, with its own files only.
    assert r.stderr.count("stepprof: files in ") == 1, r.stderr
    listed = re.findall(r"^  (rank\d_\S+)$", r.stderr, re.M)
    assert listed and all(n.startswith("rank1_") for n in listed), listed


def test_merge_one_timeline_and_hta():
    r = mpi_job()
    traces = by_name(r.traces())
    merged = os.path.join(r.cwd, "merged.pt.trace.json")
    m = run([CMD, "merge", r.outdir, "-o", merged], preload=False, fake=False)
    assert m.returncode == 0, m.stderr
    with open(merged) as f:
        doc = json.load(f)     # one valid JSON document
    ev = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"}
    assert names == {k: f"rank {k}" for k in range(4)}, names
    assert {e["pid"] for e in ev} == {0, 1, 2, 3}, "one process group per rank"
    bases = [load(t)["baseTimeNanoseconds"] for t in traces]
    assert doc["baseTimeNanoseconds"] == min(bases)
    for rank, t in enumerate(traces):
        orig = [e for e in load(t)["traceEvents"] if e.get("name") == "ProfilerStep#1" and e.get("ph") == "X"]
        got = [e for e in ev if e["pid"] == rank and e.get("name") == "ProfilerStep#1" and e.get("ph") == "X"]
        assert len(orig) == len(got) >= 1
        want = orig[0]["ts"] + (bases[rank] - min(bases)) / 1000.0
        assert abs(got[0]["ts"] - want) < 0.002, (rank, got[0]["ts"], want)
    per_rank = [sum(1 for e in load(t)["traceEvents"] if e.get("ph") != "M") for t in traces]
    merged_n = [sum(1 for e in ev if e["pid"] == k and e.get("ph") != "M") for k in range(4)]
    assert merged_n[1:] == per_rank[1:] and merged_n[0] == per_rank[0] + 1, (merged_n, per_rank)

    # HTA reads the run's directory as written (every *.json in it is a trace: the summary is
    # *.summary.json.txt, and the merged file went elsewhere).
    from hta.trace_analysis import TraceAnalysis
    ta = TraceAnalysis(trace_dir=r.outdir)
    assert sorted(ta.t.get_ranks()) == [0, 1, 2, 3]
    assert all(len(ta.t.get_trace(k)) > 0 for k in range(4))


def test_merge_restarted_rank_keeps_flows_apart():
    # A rank restarted into the same directory (or a process forked from one) is a second trace of
    # that rank, from a process whose correlation ids start again at 1: its launch -> kernel arrows
    # once took the same flow ids as the first run's, and each arrow joined two launches.
    import collections
    import tempfile
    cwd = tempfile.mkdtemp(prefix="sp-test-")
    for rank in (0, 0, 1):
        r = run([prog("train_c"), "3"], cwd=cwd, env=clean_env(PROF_MARKER="nvtx:train_step", RANK=str(rank),
                                                                 WORLD_SIZE="2"))
        assert r.returncode == 0, r.stderr
    assert len(r.traces()) == 3, r.files()
    merged = os.path.join(cwd, "merged.pt.trace.json")
    m = run([CMD, "merge", r.outdir, "-o", merged], preload=False, fake=False)
    assert m.returncode == 0, m.stderr
    ends = collections.Counter((e["cat"], e["id"], e["ph"]) for e in load(merged)["traceEvents"]
                               if e.get("ph") in ("s", "f"))
    want = sum(1 for t in r.traces() for e in load(t)["traceEvents"] if e.get("ph") in ("s", "f"))
    assert len(ends) == want and set(ends.values()) == {1}, [k for k, n in ends.items() if n > 1][:5]


def test_torchrun_slurm_pmi_environments():
    cases = [  # (variables a launcher sets, rank, world size, worker prefix)
        ({"RANK": "2", "WORLD_SIZE": "16", "LOCAL_RANK": "2", "SLURM_PROCID": "9", "SLURM_NTASKS": "10"}, 2, 16,
         "rank02_"),
        ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1"}, 5, 6, "rank5_"),
        ({"PMI_RANK": "3", "PMI_SIZE": "4"}, 3, 4, "rank3_"),
        ({"PMIX_RANK": "1"}, 1, 2, "rank1_"),
    ]
    for env, rank, world, prefix in cases:
        r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", **env))
        assert r.returncode == 0 and r.stdout.endswith("done\n"), r.stderr
        t = r.trace()
        assert os.path.basename(t).startswith(prefix), (env, t)
        assert load(t)["distributedInfo"] == {"rank": rank, "world_size": world}, (env, load(t)["distributedInfo"])
    # No launcher: no distributedInfo, <host>_<pid> as before.
    r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step"))
    assert "distributedInfo" not in load(r.trace()) and not os.path.basename(r.trace()).startswith("rank")



def test_malformed_rank_variables_said_once():
    # A launcher variable set to something that is not a number is skipped, and said: one line each,
    # program output and exit code unchanged; another launcher's rank still names the trace.
    bare = run([prog("train_c"), "3"], preload=False)
    cases = [({"RANK": "abc"}, ['RANK="abc" (torchrun) is not a non-negative integer; ignored (the trace has no '
                                'rank: HTA reads it as rank 0\'s)'], None),
             ({"RANK": "abc", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"},
              ['RANK="abc" (torchrun) is not a non-negative integer; ignored'], {"rank": 2, "world_size": 4}),
             ({"RANK": "1", "WORLD_SIZE": "x"}, ['WORLD_SIZE="x" (torchrun) is not a non-negative integer; ignored'],
              {"rank": 1, "world_size": 2}),
             ({"RANK": ""}, [], None)]
    for env, said, info in cases:
        r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", **env))
        assert r.returncode == 0 and r.stdout == bare.stdout, (env, r.stderr)
        warned = [l[len("stepprof: "):] for l in r.sp_lines if "integer" in l]
        assert warned == said, (env, r.sp_lines)
        assert load(r.trace()).get("distributedInfo") == info, (env, load(r.trace()).get("distributedInfo"))


def test_srun_pmix_size_from_slurm():
    # srun --mpi=pmix sets PMIX_RANK and Slurm's variables, but no PMI_SIZE: the job's size is
    # SLURM_NTASKS (same rank, same job), so world_size and the names' padding are the job's.
    for rank in (3, 12):
        env = clean_env(PROF_MARKER="nvtx:train_step", PMIX_RANK=str(rank), SLURM_PROCID=str(rank),
                        SLURM_NTASKS="16", SLURM_LOCALID=str(rank % 8))
        r = run([prog("train_c"), "3"], env=env)
        assert r.returncode == 0, r.stderr
        info = load(r.trace())["distributedInfo"]
        assert info == {"rank": rank, "world_size": 16}, info
        assert os.path.basename(r.trace()).startswith(f"rank{rank:02d}_"), r.trace()
    # A Slurm rank that says another rank is another job's (torchrun's RANK under srun): not used.
    r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", PMIX_RANK="3",
                                                  SLURM_PROCID="0", SLURM_NTASKS="16"))
    assert load(r.trace())["distributedInfo"] == {"rank": 3, "world_size": 4}


def test_ranks_key_without_launcher_and_bad_list():
    # A lone process counts as rank 0.
    r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", PROF_RANKS="1-3"))
    assert r.returncode == 0 and r.stdout.endswith("done\n") and r.traces() == [], r.files()
    r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", PROF_RANKS="0,8-15"))
    assert len(r.traces()) == 1
    r = run([prog("train_c"), "3"], env=clean_env(PROF_MARKER="nvtx:train_step", PROF_RANKS="0,x", RANK="0"))
    assert r.returncode == 0 and r.stdout.endswith("done\n") and r.traces() == []
    assert r.sp_lines == ['stepprof: PROF_RANKS="0,x": expected a rank number at "x" (e.g. 0,8-15); '
                          'profiling disabled for this run'], r.sp_lines


def test_ranks_key_in_config_file_picks_the_reporting_rank():
    # `ranks` from profiling.yaml (no flag, no PROF_RANKS): the lowest recording rank prints the
    # end report; the inert rank 0 once said "no trace was written" and rank 1 said nothing.
    import tempfile
    cwd = tempfile.mkdtemp(prefix="sp-test-")
    with open(os.path.join(cwd, "profiling.yaml"), "w") as f:
        # A larger training config: another section's keys are not stepprof's.
        f.write('trainer:\n  ranks: "0"\n  output_dir: checkpoints\nprofiling:\n  ranks: "1,3"  # only these\n'
                'data:\n  output_dir: data\n')
    err = {}
    for rank in (0, 1):
        r = run([CMD, "run", "--marker", "nvtx:train_step", "--active", "2", "--", prog("train_c"), "4"],
                preload=False, cwd=cwd, env=clean_env(RANK=str(rank), WORLD_SIZE="4"))
        assert r.returncode == 0, r.stderr
        err[rank] = r.stderr
    assert [os.path.basename(t).split("_")[0] for t in r.traces()] == ["rank1"], r.files()
    assert "stepprof: " not in err[0], err[0]
    assert err[1].count("stepprof: files in ") == 1 and "key averages of the last cycle (rank1_" in err[1], err[1]
    # output_dir from the same file: the profiling section's, not another section's.
    r = run([CMD, "run", "--marker", "nvtx:train_step", "--active", "2", "--", prog("train_c"), "4"],
            preload=False, cwd=cwd, env=clean_env(RANK="1", WORLD_SIZE="4", PROF_OUTPUT_DIR=None))
    assert r.returncode == 0 and "stepprof: files in ./profiler_traces" in r.stderr, r.stderr


def test_backend_nccl_when_loaded():
    import nvidia.nccl
    lib = glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*"))
    assert lib, "pip's nvidia-nccl (a torch dependency) ships libnccl.so.2"
    r = run([CMD, "run", "--marker", "nvtx:train_step", "--", prog("train_c"), "3"], preload=False,
            env=clean_env(RANK="0", WORLD_SIZE="2",
                          LD_PRELOAD=(os.environ.get("SP_PRELOAD_FIRST", "") + " " + lib[0]).strip()))
    assert r.returncode == 0, r.stderr
    assert load(r.trace())["distributedInfo"] == {"backend": "nccl", "rank": 0, "world_size": 2}

def _torchrun(launcher):
    """torch_mlp.py as 2 workers of real torchrun, stepprof preloaded into the launcher (the workers
    inherit it). torchrun sets RANK / WORLD_SIZE / LOCAL_RANK for them."""
    argv = launcher + ["--nproc_per_node=2", "--master_port=0", os.path.join(PROGRAMS, "torch_mlp.py"), "5"]
    env = clean_env(PROF_WAIT=1, PROF_WARMUP=1, PROF_ACTIVE=1, OMP_NUM_THREADS=1)
    bare = run(argv, preload=False, fake=False, env=env, timeout=300)
    r = run(argv, fake=False, env=env, timeout=300)
    assert bare.returncode == r.returncode == 0, (bare.stderr, r.stderr)
    # Two workers share the launcher's stdout: their lines may interleave, so compare what they printed.
    printed = lambda out: sorted(re.findall(r"loss [0-9.]+", out))
    assert printed(r.stdout) == printed(bare.stdout) and len(printed(bare.stdout)) == 2, (r.stdout, bare.stdout)
    return r


def test_torchrun_launcher_stays_inert_and_its_workers_are_ranks():
    # The launcher imports torch but trains nothing: no plan line and no files of its own (it printed a
    # third plan line before), one trace per worker, named and labelled by torchrun's ranks, each with the
    # window's step. Both spellings: the console script, and python -m (whose torch import happens while
    # sys.argv[0] is still "-m"), also with options before -m.
    script = os.path.join(os.path.dirname(sys.executable), "torchrun")   # pip's, beside this Python
    script = script if os.path.exists(script) else shutil.which("torchrun")
    assert script, "torchrun is not installed beside %s nor on PATH" % sys.executable
    for launcher in ([script], [sys.executable, "-u", "-m", "torch.distributed.run"]):
        r = _torchrun(launcher)
        plans = [l for l in r.sp_lines if "marker torch" in l]
        assert len(plans) == 2, (launcher, r.sp_lines)
        traces = r.traces()
        assert sorted(os.path.basename(t)[:6] for t in traces) == ["rank0_", "rank1_"], (launcher, r.files())
        for t in traces:
            trace = load(t)
            assert trace["distributedInfo"]["world_size"] == 2, trace["distributedInfo"]
            steps = sorted({e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")})
            assert steps == ["ProfilerStep#2"], (t, steps)
        assert len([f for f in r.files() if f.endswith(".pt.trace.json")]) == 2, r.files()


def _step_numbers(trace):
    return sorted(int(e["name"].split("#")[1]) for e in trace["traceEvents"]
                  if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X")


def _only_the_worker_profiled(argv, env, worker_prefix=""):
    """argv, a launcher that imports torch and starts torch_mlp.py (5 iterations) as its one worker:
    bare and preloaded (the whole run, then steps 2 of a schedule), the same losses, one plan line
    and one trace, the worker's, with its steps."""
    loss = lambda out: re.findall(r"loss [0-9.]+", out)
    bare = run(argv, preload=False, fake=False, env=clean_env(**env), timeout=300)
    assert bare.returncode == 0 and len(loss(bare.stdout)) == 1, bare.stderr
    for sched, want in (({}, [0, 1, 2, 3, 4, 5]), ({"PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 1}, [2])):
        r = run(argv, fake=False, env=clean_env(**env, **sched), timeout=300)
        assert r.returncode == 0 and loss(r.stdout) == loss(bare.stdout), (argv, r.stderr)
        assert len([l for l in r.sp_lines if "marker torch" in l]) == 1, (argv, r.sp_lines)
        trace = r.trace()   # exactly one: the worker's
        assert os.path.basename(trace).startswith(worker_prefix), r.files()
        assert _step_numbers(load(trace)) == want, (argv, sched, _step_numbers(load(trace)))


def test_accelerate_launcher_stays_inert():
    # HF accelerate's CLI imports torch and starts the program as its worker: before, it printed a plan
    # line of its own and, recording the whole run, wrote a trace of its own (ProfilerStep#0, no
    # operators) beside the worker's. Both spellings: the console script and python -m.
    script = os.path.join(os.path.dirname(sys.executable), "accelerate")
    script = script if os.path.exists(script) else shutil.which("accelerate")
    assert script, "accelerate is not installed beside %s nor on PATH" % sys.executable
    opts = ["--cpu", "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--num_cpu_threads_per_process", "1", os.path.join(PROGRAMS, "torch_mlp.py"), "5"]
    for launcher in ([script, "launch"], [sys.executable, "-m", "accelerate.commands.launch"]):
        _only_the_worker_profiled(launcher + opts, {})


def test_deepspeed_launchers_stay_inert():
    # DeepSpeed's runner (the deepspeed script) starts `python -m deepspeed.launcher.launch`, which starts
    # the worker with RANK / WORLD_SIZE: both import torch and train nothing, so only the worker prints a
    # plan line and writes a trace (rank0_). DeepSpeed, from its sdist, is a private copy (pydeps.sh).
    skip_under_sanitizer("DeepSpeed's import asks torch.mps, which throws a C++ exception, and ASan's __cxa_throw "
                         "interceptor, set up before Python loaded libstdc++, has no real function: the bare run aborts too")
    ds = os.path.join(ROOT, "build", "pydeps", "deepspeed")
    assert os.path.exists(os.path.join(ds, "bin", "deepspeed")), f"{ds} missing: scripts/pydeps.sh installs DeepSpeed there"
    argv = [sys.executable, os.path.join(ds, "bin", "deepspeed"), "--num_gpus", "1", "--master_port", "0",
            os.path.join(PROGRAMS, "torch_mlp.py"), "5"]
    _only_the_worker_profiled(argv, {"PYTHONPATH": ds, "OMP_NUM_THREADS": 1, "DS_ACCELERATOR": "cpu"}, "rank0_")


def _spawned(method, *args, preload=True, **env):
    """tests/programs/torch_spawn.py: 2 DDP ranks (gloo) started by torch.multiprocessing, whose
    launcher sets no rank variable. Record shapes: the step's ops tell which iteration it was."""
    spawn = os.path.join(PROGRAMS, "torch_spawn.py")
    cwd = tempfile.mkdtemp(prefix="sp-test-")
    e = clean_env(PROF_WAIT=1, PROF_WARMUP=1, PROF_ACTIVE=1, PROF_RECORD_SHAPES=1, OMP_NUM_THREADS=1)
    e.update(env)
    return run([sys.executable, spawn, "5", method, cwd, *args], preload=preload, fake=False, env=e, timeout=300,
               cwd=cwd)


def _step_ops(trace):
    """{ProfilerStep#N: Input Dims of its aten::sum(Tensor, dtype) calls}: iteration N sums
    torch.ones(N + 1) (the loss's backward sums with more arguments)."""
    steps = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
             if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"}
    return {name: sorted(json.dumps(e["args"].get("Input Dims")) for e in trace["traceEvents"]
                         if e.get("name") == "aten::sum" and len(e["args"].get("Input Dims", ())) == 2 and
                         t0 <= e["ts"] < t1)
            for name, (t0, t1) in steps.items()}


def test_multiprocessing_ranks_wake_at_their_first_optimizer_step():
    # mp.spawn / start_processes children are multiprocessing children, as DataLoader workers are: they
    # stayed inert, so a DDP job started that way got no trace. Now each stays dormant (no plan line, no
    # activation) until its first optimizer step, which ends step 0, and takes its rank and backend from
    # torch.distributed: one trace per rank with torch.profiler's step numbers (iteration 2 sums ones(3)).
    bare = _spawned("spawn", preload=False)
    assert bare.returncode == 0 and not bare.sp_lines, bare.stderr
    losses = sorted(re.findall(r"rank \d loss [0-9.]+", bare.stdout))
    assert len(losses) == 2, bare.stdout
    for method in ("spawn", "fork"):
        r = _spawned(method)
        assert r.returncode == 0 and r.other_stderr == "", (method, r.stderr)
        assert sorted(re.findall(r"rank \d loss [0-9.]+", r.stdout)) == losses, (method, r.stdout)
        # The parent imports torch (it prints the plan too; it never steps, so it writes nothing).
        assert len([l for l in r.sp_lines if "marker torch" in l]) == 3, (method, r.sp_lines)
        traces = r.traces()
        assert sorted(os.path.basename(t)[:6] for t in traces) == ["rank0_", "rank1_"], (method, r.files())
        for t in traces:
            trace = load(t)
            rank = int(os.path.basename(t)[4])
            assert trace["distributedInfo"] == {"backend": "gloo", "rank": rank, "world_size": 2}, trace["distributedInfo"]
            assert _step_ops(trace) == {"ProfilerStep#2": ['[[3], []]']}, (method, t, _step_ops(trace))
    # `ranks` applies to a rank learned from torch.distributed: rank 0 stays silent and writes nothing
    # (the parent counts as rank 0). Also when a CUDA call activated stepprof in the ranks before their
    # first step ("probe", as a GPU rank's model.to() does): the plan line and the decision wait for it.
    for method, opts in (("fork", ()), ("spawn", ("probe",)), ("fork", ("probe",))):
        r = _spawned(method, *opts, PROF_RANKS="1")
        assert r.returncode == 0 and r.other_stderr == "", (method, opts, r.stderr)
        assert [os.path.basename(t)[:6] for t in r.traces()] == ["rank1_"], (method, opts, r.files())
        assert len([l for l in r.sp_lines if "marker torch" in l]) == 1, (method, opts, r.sp_lines)
    # Activated before its first step and recording the whole run: the window opens at that step.
    r = _spawned("spawn", "probe", PROF_WAIT=None, PROF_WARMUP=None, PROF_ACTIVE=None)
    assert r.returncode == 0 and len([l for l in r.sp_lines if "marker torch" in l]) == 3, \
        (r.returncode, r.sp_lines, r.stdout[-1000:], r.stderr[-3000:])
    ranks = [t for t in r.traces() if os.path.basename(t).startswith("rank")]
    assert len(ranks) == 2, r.files()
    for t in ranks:
        assert sorted(_step_ops(load(t))) == ["ProfilerStep#%d" % n for n in range(1, 6)], (t, _step_ops(load(t)))
    # A schedule that records step 0 cannot have it in a child (it ran before the wake-up): said once per
    # rank, and recording begins at step 1.
    r = _spawned("fork", PROF_WAIT=0, PROF_WARMUP=0, PROF_ACTIVE=2)
    assert r.returncode == 0, r.stderr
    assert len([l for l in r.sp_lines if "step 0 ran before" in l]) == 2, r.sp_lines
    ranks = [t for t in r.traces() if os.path.basename(t).startswith("rank")]   # (the parent records step 0)
    assert len(ranks) == 2, r.files()
    for t in ranks:
        assert _step_ops(load(t)) == {"ProfilerStep#1": ['[[2], []]']}, (t, _step_ops(load(t)))



def test_multiprocessing_rank_running_torch_profiler_keeps_it():
    # A rank that starts torch.profiler before its first optimizer step does so while stepprof is
    # dormant there: the hand-over (said once per rank) must still hold when the step wakes stepprof,
    # so torch.profiler keeps the operators (and CUPTI, on a GPU) and stepprof records the rest.
    r = _spawned("spawn", "own")
    assert r.returncode == 0, r.stderr   # (Kineto logs to stderr of its own)
    # (counted in the whole stderr: the other rank's Kineto log lines may break a line in two)
    assert r.stderr.count("runs torch.profiler itself") == 2, r.stderr
    own = glob.glob(os.path.join(r.cwd, "own", "*.pt.trace.json"))
    assert len(own) == 2, r.files()
    for t in own:
        ev = load(t)["traceEvents"]
        assert {e["name"] for e in ev if e.get("name", "").startswith("ProfilerStep#")} == {"ProfilerStep#2"}
        assert [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"], t
    traces = r.traces()
    assert sorted(os.path.basename(t)[:6] for t in traces) == ["rank0_", "rank1_"], r.files()
    for t in traces:
        ev = load(t)["traceEvents"]
        assert {e["name"] for e in ev if e.get("name", "").startswith("ProfilerStep#")} == {"ProfilerStep#2"}, t
        assert not [e for e in ev if e.get("cat") == "cpu_op"], t


if __name__ == "__main__":
    sys.exit("run through tests/run_tests.py")
