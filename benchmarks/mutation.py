"""Mutation testing of ttgnn's core logic with mutmut (a benchmark, not part of CI).

Each module is mutated in a scratch copy of the committed tree (``git worktree`` of ``HEAD``), so
no mutated file ever appears in the working tree, and only the module's own test files run
against its mutants::

    python benchmarks/mutation.py                       # every module, one after another
    python benchmarks/mutation.py --modules init smoothing --max-children 2
    python benchmarks/mutation.py --modules train --sample 120    # 120 mutants drawn at random
    python benchmarks/mutation.py --modules train --resume        # go on with a run that was stopped

Where a module's tests are too slow to run every mutant (``ttgnn/train.py``: each test trains
models), ``--sample N`` runs N of its mutants drawn uniformly at random (``--sample-seed``) and
reports the score with a 95% Wilson interval for the whole module.

mutmut 3.8.1 is installed into the running interpreter's environment when it is missing (it is
not a dependency of ttgnn). The copy differs from the tree in two ways that change no behaviour:

* ``partition/`` is moved to ``ttgnn/partition/``, where ``ttgnn.partition`` is imported from
  (mutmut derives a mutant's module from its file path and puts its copy first on ``sys.path``);
* a decorator of a module- or class-level function (``@torch.no_grad()``, ``@property``,
  ``@contextlib.contextmanager``) becomes an assignment after the function
  (``f = torch.no_grad()(f)``), because mutmut leaves decorated functions unmutated.

The table gives per module: mutants, killed (a test failed or timed out), survived, no tests (no
selected test calls the function), and the score killed / (all - no tests). Survivors' diffs
go to ``<workdir>/survivors-<module>.txt``; the figures to ``<workdir>/mutation.json``. The
equivalent survivors (no behaviour change) are listed with their reasons in docs/testing.md.
"""
from __future__ import annotations

import argparse
import ast
import collections
import fnmatch
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
MUTMUT = "mutmut==3.8.1"

# module -> (files to mutate, relative to the copy's root, and the tests that run against them).
# ttgnn/train.py comes last: it is the slowest, each of its tests trains a few small models.
MODULES = {
    "partition": (["ttgnn/partition/*"],
                  ["tests/test_partition_graph.py", "tests/test_partition_split.py", "tests/test_partition_reorder.py",
                   "tests/test_partition_cache.py", "tests/test_partition_quality.py", "tests/test_partition_kaminpar.py",
                   "tests/test_partition_coarsen.py"]),
    "embedding": (["ttgnn/embedding.py"], ["tests/test_embedding.py"]),
    "init": (["ttgnn/init.py"], ["tests/test_init.py"]),
    "smoothing": (["ttgnn/smoothing.py"], ["tests/test_smoothing.py"]),
    "distributed": (["ttgnn/distributed.py"], ["tests/test_distributed.py", "tests/test_distributed_group.py"]),
    "shapes": (["ttgnn/shapes.py"], ["tests/test_shapes.py", "tests/test_embedding.py"]),
    "inference": (["ttgnn/inference.py"], ["tests/test_inference.py"]),
    "spectral": (["ttgnn/spectral.py"], ["tests/test_spectral.py"]),
    "losses": (["ttgnn/losses.py"], ["tests/test_losses.py", "tests/test_from_full.py"]),
    "averaging": (["ttgnn/averaging.py"], ["tests/test_averaging.py"]),
    "layers": (["ttgnn/layers.py"], ["tests/test_layers.py", "tests/test_models.py"]),
    "models": (["ttgnn/models.py"], ["tests/test_models.py", "tests/test_layers.py", "tests/test_label_reuse.py"]),
    "plan": (["ttgnn/plan.py"], ["tests/test_plan.py"]),
    "checkpoint": (["ttgnn/checkpoint.py"], ["tests/test_checkpoint.py", "tests/test_train_resume.py"]),
    "fileio": (["ttgnn/fileio.py"], ["tests/test_fileio.py", "tests/test_partition_cache.py", "tests/test_checkpoint.py"]),
    "evaluation": (["ttgnn/evaluation.py"], ["tests/test_evaluation.py", "tests/test_label_reuse.py",
                                             "tests/test_sampled_eval.py"]),
    "seeding": (["ttgnn/seeding.py"], ["tests/test_seeding.py"]),
    "synthetic": (["ttgnn/synthetic.py"], ["tests/test_synthetic.py"]),
    "allocator": (["ttgnn/allocator.py"], ["tests/test_allocator.py"]),
    "choices": (["ttgnn/choices.py"], ["tests/test_config.py"]),
    # sampled batches for the GNN: the pinned, non-blocking copies are GPU-only
    "batches": (["ttgnn/batches.py"], ["tests/test_batches.py", "tests/test_train_steps.py",
                                       "tests/test_sampled_eval.py", "tests/test_evaluation.py"]),
    # the tests on real graphs (marked data) stay out as everywhere: small graphs in OGB's layouts test the
    # loaders; the whole module: about 25 minutes on 2 cores
    "data": (["ttgnn/data.py"], ["tests/test_data.py", "tests/test_data_ogb.py"]),
    "config": (["ttgnn/config.py"], ["tests/test_config.py", "tests/test_sampled_eval.py", "tests/test_from_full.py",
                                     "tests/test_train_resume.py"]),
    # the command line: its own tests and those that call main() (plan, predict, upgrade-checkpoint); the
    # tests that run it in a subprocess import the mutated copy (PYTHONPATH), but mutmut, which picks the
    # tests of a mutant by the calls it recorded in-process, does not know they do: use --sample
    "cli": (["ttgnn/cli.py"], ["tests/test_cli.py", "tests/test_plan.py", "tests/test_inference.py",
                               "tests/test_checkpoint.py"]),
    # finding, building and loading the kernels' library: compilers and loaders are fakes in test_ext.py and
    # test_build_recipe.py; test_cuda_build.py compiles the CUDA source for real (about 30 s) where a mutant
    # reaches nvcc's flags. The two tests of which line a warning names stay out: mutmut's trampolines are
    # frames between ttgnn's own, so the warning names one of them
    "ext": (["ttgnn/_ext.py", "ttgnn/_build.py", "ttgnn/build_kernels.py"],
            ["tests/test_ext.py", "tests/test_build_recipe.py", "tests/test_cuda_build.py", "-k",
             "not test_every_loading_warning_points_at and not test_a_warning_while_ttgnn_is_imported"]),
    # mutmut's call recording is a graph break to torch.compile(fullgraph=True): that test stays out
    "ops": (["ttgnn/ops.py"], ["tests/test_ops.py", "-k", "not test_compile_fullgraph"]),
    "train": (["ttgnn/train.py"], ["tests/test_train.py", "tests/test_train_resume.py", "tests/test_train_steps.py",
                                   "tests/test_distributed.py", "tests/test_cli.py", "tests/test_gpu_path.py"]),
}
# mutmut's exit codes of a mutant's test run (see `mutmut results`).
STATUS_BY_EXIT_CODE = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
                       36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout",
                       -11: "segfault", -9: "segfault", -6: "aborted", 37: "caught by type check", None: "not checked",
                       2: "interrupted"}
# A test process that aborts (SIGABRT: KaMinPar's own checks on a malformed graph file) fails CI too.
KILLED = {"killed", "timeout", "segfault", "aborted", "caught by type check"}
NOT_RUN = {"no tests", "skipped", "not checked"}


def ensure_mutmut() -> str:
    """Path of the ``mutmut`` command next to this interpreter, installed when missing."""
    command = Path(sys.executable).parent / "mutmut"
    if not command.exists():
        print(f"installing {MUTMUT} into {sys.prefix}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", MUTMUT], check=True)
    return str(command)


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def undecorate(path: Path) -> int:
    """Rewrite decorated module- and class-level functions of ``path`` as plain functions followed
    by ``name = decorator(name)``; returns how many functions were rewritten."""
    source = path.read_text()
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    edits = []  # (first decorator line, def line, end line, indent, name, decorator sources)

    def visit(body):
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
                names = [ast.get_source_segment(source, d) for d in node.decorator_list]
                if names in (["staticmethod"], ["classmethod"]):
                    continue  # mutmut handles these itself
                first = min(d.lineno for d in node.decorator_list)
                indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
                edits.append((first, node.lineno, node.end_lineno, indent, node.name, names))

    visit(tree.body)
    for first, def_line, end, indent, name, names in sorted(edits, reverse=True):
        wrapped = name
        for decorator in reversed(names):  # the decorator nearest to `def` applies first
            wrapped = f"{decorator}({wrapped})"
        lines[end:end] = [f"{indent}{name} = {wrapped}\n"]
        del lines[first - 1:def_line - 1]
    path.write_text("".join(lines))
    ast.parse(path.read_text())  # still valid Python
    return len(edits)


def prepare_copy(workdir: Path) -> Path:
    """A worktree of HEAD with partition/ under ttgnn/ and the compiled kernels copied in."""
    copy = workdir / "tree"
    if copy.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(copy)], cwd=REPO, check=False,
                       capture_output=True)
        shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=True)
    _git("worktree", "add", "--detach", str(copy), "HEAD")
    # Ignored build output: the kernels of this tree and their build record, without which the
    # copy would not load them (tests that read a command's stderr then see the fallback warning).
    for built in [*(REPO / "ttgnn").glob("_C*.so"), *(REPO / "ttgnn").glob("_C.build.json")]:
        shutil.copy2(built, copy / "ttgnn" / built.name)
    shutil.move(str(copy / "partition"), str(copy / "ttgnn" / "partition"))
    return copy


def write_config(copy: Path, patterns: list[str], tests: list[str], timeout_multiplier: float) -> None:
    def lines(values):
        return "\n" + "\n".join(f"    {v}" for v in values)

    pytest_args = ["-p", "no:cacheprovider", "-m", "not data and not slow", "--hypothesis-seed=0"]
    (copy / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = ttgnn\n"
        # tests that run the example and benchmark scripts find them next to tests/, and the kernels'
        # tests find the sources and setup.py there
        "also_copy =\n    examples\n    benchmarks\n    kernels\n    setup.py\n"
        f"only_mutate ={lines(patterns)}\n"
        f"pytest_add_cli_args_test_selection ={lines(tests)}\n"
        f"pytest_add_cli_args ={lines(pytest_args)}\n"
        "process_isolation = forkserver\n"
        f"timeout_multiplier = {timeout_multiplier}\n"
    )


def read_results(copy: Path, patterns: list[str], only: list[str]) -> dict[str, str]:
    """Status of every mutant (of those whose names match a glob of ``only``, when given), from
    mutmut's ``.meta`` files."""
    statuses = {}
    for meta in sorted((copy / "mutants").rglob("*.py.meta")):
        relative = meta.relative_to(copy / "mutants").as_posix()[: -len(".meta")]
        if not any(Path(relative).match(p) or relative.startswith(p.rstrip("*")) for p in patterns):
            continue
        data = json.loads(meta.read_text())
        for key, code in data["exit_code_by_key"].items():
            if not only or any(fnmatch.fnmatch(key, p) for p in only):
                statuses[key] = STATUS_BY_EXIT_CODE.get(code, "suspicious")
    return statuses


def wilson_interval(successes: int, trials: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a binomial proportion (scipy's ``binomtest``)."""
    if trials == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    interval = binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


# A mutant name that matches nothing: ``mutmut run`` with it generates every mutant and collects
# which tests call which function, then stops (it refuses a filter without a match).
_NO_MUTANT = "no.such.module.x__mutmut_0"


def sample_names(copy: Path, patterns: list[str], only: list[str], size: int, seed: int, mutmut: str,
                 env: dict, log) -> tuple[list[str], int]:
    """Generate the module's mutants without running them and draw ``size`` names at random;
    returns the names and how many there were to draw from."""
    subprocess.run([mutmut, "run", "--max-children", "1", _NO_MUTANT], cwd=copy, env=env, stdout=log,
                   stderr=subprocess.STDOUT)
    names = sorted(read_results(copy, patterns, only))
    if not names:
        raise RuntimeError(f"mutmut generated no mutants for {patterns} (see {log.name})")
    return sorted(random.Random(seed).sample(names, min(size, len(names)))), len(names)


def run_module(name: str, copy: Path, workdir: Path, mutmut: str, max_children: int,
               timeout_multiplier: float, only: list[str], tests: Optional[list[str]] = None,
               sample: int = 0, sample_seed: int = 0, resume: bool = False) -> dict:
    patterns, module_tests = MODULES[name]
    tests = tests or module_tests
    if not resume:  # a resumed run keeps the copy's mutants, configuration and recorded results
        shutil.rmtree(copy / "mutants", ignore_errors=True)
        (copy / "mutants").mkdir()
        for pattern in patterns:
            files = sorted(copy.glob(pattern)) if "*" in pattern else [copy / pattern]
            for path in files:
                if path.suffix == ".py":
                    undecorate(path)
    write_config(copy, patterns, tests, timeout_multiplier)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               # subprocesses of the tests (CLI, torchrun) import the mutated copy too
               PYTHONPATH=str(copy / "mutants"),
               # a mutant that drops a --cache-dir writes here, not into the user's cache
               TTGNN_CACHE=str(workdir / "cache"))
    env.pop("MUTANT_UNDER_TEST", None)
    started = time.perf_counter()
    log_path = workdir / f"mutmut-{name}.log"
    population = None
    with open(log_path, "a" if resume else "w") as log:
        selected = only
        if sample:
            selected, population = sample_names(copy, patterns, only, sample, sample_seed, mutmut, env, log)
        proc = subprocess.run([mutmut, "run", "--max-children", str(max_children), *selected], cwd=copy, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    statuses = read_results(copy, patterns, selected)
    counts = dict(collections.Counter(statuses.values()))
    killed = sum(counts.get(s, 0) for s in KILLED)
    not_run = sum(counts.get(s, 0) for s in NOT_RUN)
    survivors = sorted(k for k, s in statuses.items() if s not in KILLED and s not in NOT_RUN)
    with open(workdir / f"survivors-{name}.txt", "w") as out:
        for key in survivors + sorted(k for k, s in statuses.items() if s in NOT_RUN):
            shown = subprocess.run([mutmut, "show", key], cwd=copy, env=env, capture_output=True, text=True)
            out.write(shown.stdout + "\n")
    tested = len(statuses) - not_run
    row = {"module": name, "mutants": len(statuses), "killed": killed, "survived": len(survivors),
           "no_tests": not_run, "score": killed / tested if tested else float("nan"), "counts": counts,
           "seconds": round(seconds, 1), "mutmut_exit_code": proc.returncode, "tests": tests,
           "survivors": survivors}
    if sample:
        row.update(sampled_from=population, sample_seed=sample_seed, score_95ci=wilson_interval(killed, tested))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--modules", nargs="+", choices=list(MODULES), default=list(MODULES),
                        help="modules to mutate, in this order")
    parser.add_argument("--workdir", type=Path, default=REPO.parent / "wt-mutation",
                        help="scratch folder: the copy of the tree, logs, survivors, mutation.json")
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested in parallel")
    parser.add_argument("--timeout-multiplier", type=float, default=10.0,
                        help="a mutant times out (and counts as killed) after this many times its tests' clean duration")
    parser.add_argument("--only", nargs="+", default=[], metavar="GLOB",
                        help="mutate only the functions whose mutant names match, e.g. 'ttgnn.partition.split.*' "
                             "(with one module)")
    parser.add_argument("--tests", nargs="+", default=None, metavar="FILE",
                        help="run these test files against the mutants instead of the module's (e.g. "
                             "partition/graph.py, whose functions every partition test calls, with "
                             "tests/test_partition_graph.py alone)")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="run N mutants drawn at random from the module's (0: all of them)")
    parser.add_argument("--sample-seed", type=int, default=0, help="seed of the --sample draw")
    parser.add_argument("--resume", action="store_true",
                        help="continue a run that was stopped (of one module), in the same --workdir: its copy of the "
                             "tree (at the commit it was made from) and the results mutmut recorded there are kept, "
                             "and only the mutants without a result run")
    parser.add_argument("--summarize", action="store_true",
                        help="only count the results mutmut has recorded so far in the copy (of one module: give "
                             "the one whose run was cut off) and print them; nothing is run")
    args = parser.parse_args(argv)
    if args.summarize:
        copy = args.workdir / "tree"
        for name in args.modules:
            statuses = read_results(copy, MODULES[name][0], args.only)
            print(name, json.dumps(dict(collections.Counter(statuses.values()))))
        return 0

    if args.resume and (len(args.modules) != 1 or args.sample):
        parser.error("--resume continues the run of one module (give it with --modules), without --sample")
    mutmut = ensure_mutmut()
    args.workdir.mkdir(parents=True, exist_ok=True)
    copy = args.workdir / "tree"
    if args.resume and not (copy / "mutants").is_dir():
        parser.error(f"--resume: no stopped run in {args.workdir} (its tree/mutants folder is missing)")
    if not args.resume:
        copy = prepare_copy(args.workdir)
    commit = _git("rev-parse", "--short", "HEAD", cwd=copy)
    print(f"mutating a copy of {commit} in {copy}", flush=True)
    results_path = args.workdir / "mutation.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    header = f"{'module':<12} {'mutants':>8} {'killed':>7} {'survived':>9} {'no tests':>9} {'score':>7} {'minutes':>8}"
    print(header, flush=True)
    for name in args.modules:
        row = run_module(name, copy, args.workdir, mutmut, args.max_children, args.timeout_multiplier, args.only,
                         args.tests, args.sample, args.sample_seed, args.resume)
        row["only"] = args.only
        row["commit"] = commit
        results[name] = row
        results_path.write_text(json.dumps(results, indent=2))
        print(f"{name:<12} {row['mutants']:>8} {row['killed']:>7} {row['survived']:>9} {row['no_tests']:>9} "
              f"{row['score']:>7.1%} {row['seconds'] / 60:>8.1f}", flush=True)
        if args.sample:
            low, high = row["score_95ci"]
            print(f"{'':<12} a sample of {row['mutants']} of {row['sampled_from']} mutants: score 95% interval "
                  f"{low:.1%} - {high:.1%}", flush=True)
    print(f"details: {results_path}, survivors-<module>.txt and mutmut-<module>.log in {args.workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
