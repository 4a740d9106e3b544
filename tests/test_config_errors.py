"""tests/test_config_errors.py — issue 3: every bad configuration or env value
gives one clear stepprof: error line, disables profiling for the run (no
files), and leaves the program's output and exit code untouched. Each case is
a real run of tests/programs/exitcode (exit 7) under the preload."""
import os
import tempfile

from harness import prog, run

# (profiling.yaml text or None, env, substrings the one error line must contain)
CASES = [
    ("profiling:\n  actve: 3\n", {}, ["profiling.yaml:2:3", "actve", "did you mean profiling.active"]),
    ("profling:\n  active: 3\n", {}, ["profling", "did you mean profiling"]),
    ("profiling:\n  active: abc\n", {}, ["profiling.yaml:2", "active"]),
    ("profiling:\n  active: 0\n  marker: nvtx:x\n", {}, ["active"]),
    ("profiling:\n  wait: -1\n  marker: nvtx:x\n", {}, ["wait"]),
    ("profiling:\n  active: [1, 2]\n", {}, ["active", "sequence"]),
    ("profiling:\n  enabled: maybe\n", {}, ["enabled"]),
    ("profiling:\n  marker: \"nvtx:\"\n", {}, ["marker", "needs an NVTX range name"]),
    ("profiling:\n  marker: kernel:gemm/0\n", {}, ["marker"]),
    ("profiling:\n  marker: bogus:thing\n", {}, ["marker"]),
    ("profiling:\n  marker: signal:SIGKILL\n", {}, ["SIGKILL"]),
    ("profiling:\n  log: loud\n", {}, ["log"]),
    ("profiling:\n  buffer_mb: 0\n", {}, ["buffer_mb"]),
    ("profiling:\n  table:\n    sort_by: fastest\n", {}, ["table.sort_by"]),
    ("profiling:\n  active: 3\n  active: 4\n", {}, ["twice"]),
    ("profiling: [1, 2]\n", {}, ["mapping"]),
    ("profiling:\n  active: 3\n wait: 1\n", {}, ["profiling.yaml:3:", "invalid YAML"]),
    ("profiling:\n  marker: \"unterminated\n", {}, ["profiling.yaml:", "invalid YAML"]),
    ("profiling:\n  wait: 2\n", {}, ["needs a step marker", "PROF_MARKER"]),
    (None, {"PROF_ACTIVE": "x"}, ["PROF_ACTIVE", "x"]),
    (None, {"PROF_ACTIVE": "0", "PROF_MARKER": "nvtx:s"}, ["PROF_ACTIVE"]),
    (None, {"PROF_WAIT": "-2", "PROF_MARKER": "nvtx:s"}, ["PROF_WAIT"]),
    (None, {"PROF_USE_GZIP": "perhaps"}, ["PROF_USE_GZIP"]),
    (None, {"PROF_UNWINDER": "libgcc"}, ["PROF_UNWINDER"]),
    (None, {"PROF_ACTVE": "3"}, ["PROF_ACTVE", "PROF_ACTIVE"]),
    (None, {"PROF_MARKER": "function:"}, ["PROF_MARKER"]),
    (None, {"PROF_BUFFER_MB": "99999999999999999999"}, ["PROF_BUFFER_MB"]),
    (None, {"PROF_TABLE_ROW_LIMIT": "-5"}, ["PROF_TABLE_ROW_LIMIT"]),
    (None, {"PROF_CONFIG": "/nonexistent/profiling.yaml"}, ["/nonexistent/profiling.yaml"]),
    # A control character in what the message quotes (a path, a key, a marker)
    # must not break the one line: it is shown as '?'.
    (None, {"PROF_CONFIG": "/nonexistent\nprofiling.yaml"}, ["/nonexistent?profiling.yaml"]),
    ("profiling:\n  \"act\\nive\": 3\n", {}, ["profiling.act?ive"]),
    (None, {"PROF_MARKER": "nv\ntx:s"}, ["PROF_MARKER", "unknown marker \"nv?tx\""]),
    (None, {"PROF_RANKS": "0,a\nb"}, ["PROF_RANKS", "a?b"]),
    # A long (legal) path must not push the reason and the outcome off the line.
    (None, {"PROF_CONFIG": "/nonexistent/" + "x" * 250 + "/" + "y" * 1000 + "/profiling.yaml"},
     ["/profiling.yaml: cannot open config file: No such file or directory"]),
]


def _baseline():
    return run([prog("exitcode")], preload=False)


def test_bad_configurations_each_one_message_program_unchanged():
    base = _baseline()
    assert base.returncode == 7
    failures = []
    for text, env, needles in CASES:
        d = tempfile.mkdtemp(prefix="sp-test-")
        if text is not None:
            with open(os.path.join(d, "profiling.yaml"), "w") as f:
                f.write(text)
        r = run([prog("exitcode")], cwd=d, env=env)
        label = f"{text!r} {env}"
        errors = [l for l in r.sp_lines if "disabled" in l]
        if r.returncode != 7 or r.stdout != base.stdout or r.other_stderr != base.stderr:
            failures.append(f"{label}: program changed (rc {r.returncode})")
        elif len(errors) != 1 or len(r.sp_lines) != 1:
            failures.append(f"{label}: expected exactly one stepprof: line, got {r.sp_lines}")
        elif not all(n in errors[0] for n in needles):
            failures.append(f"{label}: message {errors[0]!r} lacks {needles}")
        elif os.path.exists(r.outdir):
            failures.append(f"{label}: profiling should be off, but {r.outdir} exists")
    assert len(CASES) >= 20
    assert not failures, "\n".join(failures)


def test_warmup_zero_warns_but_profiles():
    r = run([prog("train")], env={"STEPS": 4, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 0, "PROF_ACTIVE": 2})
    assert r.returncode == 0
    assert any("warmup" in l and "skew" in l for l in r.sp_lines), r.sp_lines
    assert len(r.traces()) == 1


def test_unwritable_output_dir_one_message_program_unchanged():
    base = _baseline()
    d = tempfile.mkdtemp(prefix="sp-test-")
    blocker = os.path.join(d, "file")
    open(blocker, "w").close()
    r = run([prog("exitcode")], env={"PROF_OUTPUT_DIR": os.path.join(blocker, "traces")})
    assert (r.returncode, r.stdout, r.other_stderr) == (7, base.stdout, base.stderr)
    errs = [l for l in r.sp_lines if "output directory" in l]
    assert len(errs) == 1 and "cannot create" in errs[0], r.sp_lines


def test_report_files_over_the_file_size_limit_one_message_per_run():
    """Files refused by the disk (here RLIMIT_FSIZE: EFBIG; ENOSPC alike)
    are one line for the run, the key-average table and summaries included:
    each report once said its own line in every cycle."""
    argv = ["prlimit", "--fsize=3000:3000", prog("train")]
    base = run(argv, preload=False, env={"STEPS": 8})
    r = run(argv, env={"STEPS": 8, "PROF_MARKER": "nvtx:train_step", "PROF_ACTIVE": 1, "PROF_REPEAT": 0,
                       "PROF_USE_GZIP": 1})
    assert (r.returncode, r.stdout, r.other_stderr) == (base.returncode, base.stdout, base.stderr)
    said = [l for l in r.sp_lines if "File too large" in l]
    assert len(said) == 1, r.sp_lines
    assert not [f for f in r.files() if ".tmp." in f], r.files()


def test_long_output_dir_message_keeps_its_reason():
    """A directory path longer than the message line: the line keeps the
    reason and what happens to the files, not only the start of the path."""
    base = _baseline()
    d = tempfile.mkdtemp(prefix="sp-test-")
    blocker = os.path.join(d, "file")
    open(blocker, "w").close()
    r = run([prog("exitcode")], env={"PROF_OUTPUT_DIR": os.path.join(blocker, "t" * 200, "u" * 1500)})
    assert (r.returncode, r.stdout, r.other_stderr) == (7, base.stdout, base.stderr)
    errs = [l for l in r.sp_lines if "output directory" in l]
    assert len(errs) == 1 and "Not a directory" in errs[0] and "dropped" in errs[0], r.sp_lines


def test_settings_without_profiling_section_are_said_ignored():
    """A profiling.yaml whose settings lack their profiling: parent was read
    as empty in silence: the run recorded with defaults, not the schedule
    written. One warning names the keys; profiling goes on with defaults.
    A training config whose own keys only look like settings below the top
    level gets no such line."""
    base = _baseline()
    d = tempfile.mkdtemp(prefix="sp-test-")
    with open(os.path.join(d, "profiling.yaml"), "w") as f:
        f.write("# stepprof settings\nactive: 3\nmarker: nvtx:train_step\ntable:\n  row_limit: 5\n")
    r = run([prog("exitcode")], cwd=d)
    assert (r.returncode, r.stdout, r.other_stderr) == (7, base.stdout, base.stderr)
    said = [l for l in r.sp_lines if "top level" in l]
    assert len(said) == 1 and "profiling.yaml:2:1: active, marker, table" in said[0] and "profiling:" in said[0], \
        r.sp_lines
    with open(os.path.join(d, "profiling.yaml"), "w") as f:
        f.write("trainer:\n  output_dir: ckpt\n  active: 3\nlr: 0.1\n")
    r = run([prog("exitcode")], cwd=d)
    assert not [l for l in r.sp_lines if "top level" in l], r.sp_lines


def test_plan_line_with_a_long_output_dir_ends_with_its_end():
    """The plan line names where the files go: with a long output_dir it
    keeps the directory's last part (the part that differs), not a cut
    after a fixed number of bytes."""
    d = tempfile.mkdtemp(prefix="sp-test-")
    out = os.path.join(d, "t" * 600, "last_part")
    r = run([prog("exitcode")], env={"PROF_OUTPUT_DIR": out})
    assert r.returncode == 7
    plan = [l for l in r.sp_lines if "traces ->" in l]
    assert len(plan) == 1 and plan[0].endswith("/last_part"), r.sp_lines


def test_enabled_false_is_inert():
    r = run([prog("train")], env={"STEPS": 2, "PROF_ENABLED": "off"})
    assert r.returncode == 0 and not os.path.exists(r.outdir) and r.sp_lines == []
