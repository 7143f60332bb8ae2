"""Running the manifest's runs: commands, status and cost, jobs on cores, shards, resume.

A run's output directory is `<results>/<figure>/<run>/`; `reproduce` records the flags it
runs with in `command.json`, and the run's log in `log.txt`.

* A run is finished when it has done its planned rounds (`run_files.rounds_done`); a finished run
  is skipped. A run with fewer rounds is resumed by the same command on the same directory,
  from its checkpoint. A run directory whose `command.json` holds other flags (other than
  where the data is) is refused (`ReproduceError`): it would mix two configurations.
* `execute(runs, jobs=k)` runs k runs at a time, each pinned to its own core (`taskset`) with
  one client thread, as the committed runs were made; `shard_runs` keeps every n-th run in
  manifest order whatever the status, so a job array splits a figure.
* `status` and `format_list` give each run's rounds done / planned and its cost: seconds a
  round measured by the run itself, else by runs of the same configuration (the flags but
  the seeds), labelled estimated; runs with none have no estimate.
* The data directory (`data_dir`) replaces the `DATA_DIR` placeholder of a run's flags (the
  manifest says `{data}/mnist.npz`), so the commands run wherever the data is.
"""

import collections
from collections.abc import Callable, Sequence
import dataclasses
import json
import os
import pathlib
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

from experiments import config_flags
from experiments import presets
from experiments import spec
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import run_files
from tff_flare.execution import cleanup
from tff_flare.simulation import files
from tff_flare.simulation import memory
from tff_flare.tasks import registry as tasks

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = pathlib.Path('experiments') / 'results'  # The committed results, in the repository.
REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
COMMAND_FILE = 'command.json'
LOG_FILE = 'log.txt'
DATA_DIR = '{data}'  # In a run's flags: the data directory (`--data_dir` of reproduce).
# Flags that say where the data is, not what it is (a resume checks the data itself).
LOCATION_FLAGS = ('data_path', 'data_dir')
# One core each, in-process: as the committed evidence runs were made.
ONE_CORE = ('--execution=inprocess', '--client_threads=1')


class ReproduceError(ValueError):
  """A bad selection, or a run directory that belongs to another configuration."""


def flag_args(flags, data_dir: str = '') -> list[str]:
  """`--name=value` arguments (a bool as `--name` / `--noname`, a sequence comma-joined)."""
  args = []
  for name, value in flags.items():
    if isinstance(value, str):
      value = value.replace(DATA_DIR, data_dir.rstrip('/') or '.')
    if value is True:
      args.append(f'--{name}')
    elif value is False:
      args.append(f'--no{name}')
    elif isinstance(value, (list, tuple)):
      args.append(f'--{name}={",".join(str(v) for v in value)}')
    else:
      args.append(f'--{name}={value}')
  return args


def command(run: spec.Run,
            run_dir: pathlib.Path,
            data_dir: str,
            execution_args: Sequence[str] = ONE_CORE,
            until_round: int | None = None) -> list[str]:
  """The command line of `run` into `run_dir`, to its planned rounds or, in pieces, to
  `until_round` where that is fewer."""
  rounds = run.rounds if until_round is None else min(run.rounds, until_round)
  return ([sys.executable, '-m', run.binary] + flag_args(run.flags, data_dir) +
          [f'--rounds={rounds}', f'--output_dir={run_dir}'] + list(execution_args))


def check_configuration(run: spec.Run,
                        run_dir: pathlib.Path,
                        data_dir: str,
                        rounds: int,
                        execution_args: Sequence[str] = ONE_CORE) -> None:
  """Refuses a run whose binary would refuse its flags (a value out of range, an unknown
  algorithm, ...), without starting it: a grid's NaN learning rate of its last cells is found
  before its first cells run for hours.

  Raises:
    ReproduceError: naming the run and what its binary would say.
  """
  defaults = presets.MASKING_STUDY if run.binary == spec.RUN_MASKING else {}
  try:
    config = config_flags.config_of_args(flag_args(run.flags, data_dir) + list(execution_args) +
                                         [f'--rounds={rounds}'],
                                         output_dir=str(run_dir),
                                         defaults=defaults)
    config_lib.validate(config, writable=False)
    # The population the task will have (the runner checks again on the data's own).
    config_lib.validate_run(config, config.num_clients or tasks.default_num_clients(config.task))
  except config_lib.ConfigError as e:
    raise ReproduceError(f'{run_dir.parent.name}/{run.name}: {e}') from e


def printable(args: Sequence[str]) -> str:
  """A command as a user types it: `python -m ...`."""
  return shlex.join(['python'] + list(args[args.index(sys.executable) + 1:]))


def _comparable(flags) -> dict:
  return {
      k: v
      for k, v in json.loads(json.dumps(dict(flags), default=str)).items()
      if k not in LOCATION_FLAGS
  }


def check_recorded_flags(run: spec.Run, run_dir: pathlib.Path) -> None:
  """Raises `ReproduceError` when `run_dir` holds a run made with other flags, or a log this
  process would append to that is not a file (a pipe would hold the append forever)."""
  try:
    files.check_file(run_dir / LOG_FILE)
  except OSError as e:
    raise ReproduceError(str(e)) from None
  path = run_dir / COMMAND_FILE
  if not path.exists():
    return
  try:
    recorded = json.loads(files.read_text(path))
  except (OSError, ValueError) as e:
    raise ReproduceError(f'{path} cannot be read ({e}).') from e
  if not isinstance(recorded, dict) or not isinstance(recorded.get('flags', {}), dict):
    raise ReproduceError(f'{path} is not the record of a run\'s command (an object with its '
                         '"binary" and its "flags"). Remove the directory to run it again.')
  wanted = _comparable(run.flags)
  then = _comparable(recorded.get('flags', {}))
  if recorded.get('binary') != run.binary or then != wanted:
    changed = sorted(
        set(then) ^ set(wanted) | {k for k in wanted if k in then and then[k] != wanted[k]})
    raise ReproduceError(
        f'{run_dir} holds a run made with other flags ({", ".join(changed) or "binary"}); the '
        'manifest would mix two configurations. Remove the directory to run it again, or '
        'restore the manifest.')


def _record_flags(run: spec.Run, run_dir: pathlib.Path) -> None:
  run_dir.mkdir(parents=True, exist_ok=True)
  files.write_file(
      run_dir / COMMAND_FILE,
      json.dumps(dict(binary=run.binary, flags=dict(run.flags)), indent=2, default=str) + '\n')


def cost_key(run: spec.Run) -> str:
  """Runs with the same key cost the same a round: the flags but the seeds."""
  return json.dumps({k: v for k, v in sorted(run.flags.items()) if k not in ('seed', 'model_seed')},
                    default=str)


@dataclasses.dataclass
class RunStatus:
  """A run of a figure, where it stands and what it costs (seconds a round, measured)."""

  figure: spec.Figure
  run: spec.Run
  done: int
  seconds_per_round: float | None
  peak_gib: float | None = None

  @property
  def finished(self) -> bool:
    return self.done >= self.run.rounds


def status(figures: Sequence[spec.Figure], results: pathlib.Path) -> list[RunStatus]:
  result = []
  for figure in figures:
    for run in figure.runs:
      run_dir = results / figure.name / run.name
      try:
        seconds = run_files.seconds_per_round(run_dir)
        peak = run_files.peak_gib(run_dir)
      except run_files.RunFileError:
        seconds = peak = None
      result.append(RunStatus(figure, run, run_files.rounds_done(run_dir), seconds, peak))
  return result


@dataclasses.dataclass(frozen=True)
class Cost:
  """Seconds of a run: all of it from scratch, and what is left; `measured` when the run's own
  rounds give its rate, else from runs of the same cost key; NaN where none has rounds.
  `peak_gib`: its peak memory, measured by the run or else by runs of the same cost key
  (`peak_measured` says which); None where none has measured it."""

  from_scratch: float
  left: float
  measured: bool
  peak_gib: float | None = None
  peak_measured: bool = False


def costs(statuses: Sequence[RunStatus]) -> dict[tuple[str, str], Cost]:
  by_key = collections.defaultdict(list)
  peaks = collections.defaultdict(list)
  for s in statuses:
    if s.seconds_per_round is not None:
      by_key[cost_key(s.run)].append(s.seconds_per_round)
    if s.peak_gib is not None:
      peaks[cost_key(s.run)].append(s.peak_gib)
  result = {}
  for s in statuses:
    left = max(0, s.run.rounds - s.done)
    if s.seconds_per_round is not None:
      rate, measured = s.seconds_per_round, True
    elif by_key.get(cost_key(s.run)):
      rate, measured = statistics.median(by_key[cost_key(s.run)]), False
    else:
      rate, measured = float('nan'), False
    peak = s.peak_gib if s.peak_gib is not None else (
        max(peaks[cost_key(s.run)]) if peaks.get(cost_key(s.run)) else None)
    result[(s.figure.name, s.run.name)] = Cost(rate * s.run.rounds,
                                               0.0 if not left else rate * left, measured, peak,
                                               s.peak_gib is not None)
  return result


def hours(seconds: float) -> str:
  if seconds != seconds:  # NaN
    return '?'
  return f'{seconds / 3600:.1f} h'


def format_list(figures: Sequence[spec.Figure], results: pathlib.Path) -> str:
  """The `--list` table: every run's rounds done / planned, its rate and its costs."""
  statuses = status(figures, results)
  estimates = costs(statuses)
  lines = []
  for figure in figures:
    runs = [s for s in statuses if s.figure is figure]
    if not runs:
      lines.append(f'{figure.name}: {figure.title} (no runs of its own)')
      continue
    cost = [estimates[(figure.name, s.run.name)] for s in runs]
    exact = all(c.measured for c in cost)
    lines.append(f'{figure.name}: {figure.title} ({sum(s.finished for s in runs)}/{len(runs)} runs '
                 f'finished; {hours(sum(c.left for c in cost))} left, '
                 f'{hours(sum(c.from_scratch for c in cost))} from scratch'
                 f'{"" if exact else ", estimated"})')
    for s, c in zip(runs, cost):
      rate = (f'{s.seconds_per_round:.2f} s/round'
              if s.seconds_per_round is not None else 'no rounds yet')
      label = '' if c.measured else ' (estimated)'
      peak = ('peak ?' if c.peak_gib is None else
              f'peak {c.peak_gib:.1f} GiB{"" if c.peak_measured else " (its kind)"}')
      lines.append(f'  {s.run.name:<32} {s.done:>5} / {s.run.rounds:<5} {rate:<16} '
                   f'{hours(c.left)} left, {hours(c.from_scratch)} from scratch{label}; '
                   f'{peak}')
  return '\n'.join(lines)


def select(figures: Sequence[spec.Figure], names: Sequence[str]) -> list[spec.Figure]:
  """The figures named (all for an empty list); an unknown name raises `ReproduceError`."""
  known = {f.name: f for f in figures}
  unknown = [n for n in names if n not in known]
  if unknown:
    raise ReproduceError(f'Unknown figures {unknown}; known: {", ".join(known)}.')
  return [known[n] for n in names] if names else list(figures)


def parse_shard(text: str | None) -> tuple[int, int]:
  """`'i/n'` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
  if not text:
    return 0, 1
  match = re.fullmatch(r'(\d+)/(\d+)', text.strip())
  if not match or not 0 <= int(match.group(1)) < int(match.group(2)):
    raise ReproduceError(f'--shard must be i/n with 0 <= i < n, got {text!r}.')
  return int(match.group(1)), int(match.group(2))


def runs_shown(figures: Sequence[spec.Figure],
               manifest: Sequence[spec.Figure]) -> list[tuple[spec.Figure, spec.Run]]:
  """Every run the figures show: each figure's own, then the runs of other figures it reads
  (each run once, under the figure that declares it), in manifest order."""
  owners = {f.name: f for f in manifest}
  result = []
  for figure in figures:
    pairs = [(figure, run) for run in figure.runs]
    for ref in figure.reads:
      name, run_name = ref.split('/', 1)
      owner = owners.get(name)
      run = next((r for r in owner.runs if r.name == run_name), None) if owner else None
      if owner is None or run is None:
        raise ReproduceError(f'{figure.name} reads {ref}, which no figure declares.')
      pairs.append((owner, run))
    result += [p for p in pairs if p not in result]
  return result


def shard_runs(runs: Sequence[tuple[spec.Figure, spec.Run]],
               shard: tuple[int, int]) -> list[tuple[spec.Figure, spec.Run]]:
  """Every n-th run, from the i-th, in the given order (status not consulted)."""
  index, count = shard
  return list(runs)[index::count]


def _cores() -> list[int]:
  try:
    return sorted(os.sched_getaffinity(0))
  except AttributeError:
    return list(range(os.cpu_count() or 1))


def failure(returncode: int, log_path: pathlib.Path) -> str:
  """What a failed run's exit says: its log's last line; for a run killed by a signal, the
  signal and the line Python's fault handler starts its report with (its last line is the
  list of extension modules)."""
  try:
    lines = [line for line in log_path.read_text(errors='replace').splitlines() if line.strip()]
  except OSError:
    lines = []
  if returncode >= 0:
    return f'exit {returncode}: {lines[-1] if lines else ""}'
  try:
    name = signal.Signals(-returncode).name
  except ValueError:
    name = f'signal {-returncode}'
  fatal = [line for line in lines if line.startswith('Fatal Python error')]
  return f'killed by {name}' + (f': {fatal[-1]}' if fatal else '')


# Less than this left beside the runs going on: no run is started beside them.
_SMALLEST_BUDGET = 2**27
# The line a run logs with its estimated peak (`runner`), before its first round.
_ESTIMATE_LINE = re.compile(r'^Memory: estimated peak (\d{1,7}(?:\.\d+)?) GiB', re.MULTILINE)


@dataclasses.dataclass
class _Running:
  """A run started by `execute`: `peak` its expected peak (bytes; None until known)."""

  figure: spec.Figure
  run: spec.Run
  core: int | None
  peak: int | None
  log_start: int
  beside_others: bool


# How long `_stop_runs` waits for a run to end its round: this many of its rounds, at least
# `STOP_WAIT_S` seconds.
STOP_WAIT_ROUNDS = 3
STOP_WAIT_S = 60.0


def _signal_runs(processes, signum: int) -> None:
  for process in processes:
    try:
      os.killpg(process.pid, signum)
    except ProcessLookupError:
      pass


def _stop_runs(running: dict[subprocess.Popen, pathlib.Path]) -> None:
  """Stops the runs as Ctrl-C does (each resumes): each ends after the round it is in, once
  that round is checkpointed, and is waited for up to `STOP_WAIT_ROUNDS` of its rounds (at
  least `STOP_WAIT_S`); then, or at a second Ctrl-C here, a second Ctrl-C stops each at once
  (losing its rounds since its last checkpoint), and a run still there `STOP_WAIT_S` later is
  killed."""
  _signal_runs(running, signal.SIGINT)
  try:
    for process, run_dir in running.items():
      seconds = run_files.seconds_per_round(run_dir) or 0.0
      try:
        process.wait(timeout=max(STOP_WAIT_S, STOP_WAIT_ROUNDS * seconds))
      except subprocess.TimeoutExpired:
        break
  except KeyboardInterrupt:
    pass
  left = [process for process in running if process.poll() is None]
  _signal_runs(left, signal.SIGINT)
  for process in left:
    try:
      process.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
      _signal_runs([process], signal.SIGKILL)
      process.wait()


def _memory_left() -> int | None:
  """What the runs may use together: what this process may use, less what it holds."""
  available = memory.available_bytes()
  return None if available is None else available - memory.resident_bytes()


def _expected_peaks(runs: Sequence[tuple[spec.Figure, spec.Run]],
                    results: pathlib.Path) -> dict[int, int]:
  """`{id(run): bytes}` of the runs whose peak was measured, by them or their kind."""
  statuses = []
  for figure, run in runs:
    try:
      peak = run_files.peak_gib(results / figure.name / run.name)
    except run_files.RunFileError:
      peak = None
    statuses.append(RunStatus(figure, run, 0, None, peak))
  found = costs(statuses)
  measured = {id(s.run): found[(s.figure.name, s.run.name)].peak_gib for s in statuses}
  return {key: int(peak * memory.GIB) for key, peak in measured.items() if peak is not None}


def _logged_estimate(log_path: pathlib.Path, start: int) -> int | None:
  """The estimated peak (bytes) a run logged after byte `start` of its log, None before."""
  try:
    with open(log_path, 'rb') as f:
      f.seek(start)
      text = f.read().decode(errors='replace')
  except OSError:
    return None
  match = _ESTIMATE_LINE.search(text)
  return None if match is None else int(float(match.group(1)) * memory.GIB)


def execute(runs: Sequence[tuple[spec.Figure, spec.Run]],
            results: pathlib.Path,
            data_dir: str,
            jobs: int = 1,
            log: Callable[[str], object] = print,
            pin: bool = True,
            execution_args: Sequence[str] = ONE_CORE,
            until_round: int | None = None,
            memory_budget_gib: float | None = None) -> int:
  """Runs the unfinished `runs` into `results`, `jobs` at a time (each pinned to a core with
  `pin`); with `until_round`, only up to that round this time (a piece: the next call goes
  on).

  Memory: the runs at once must fit `memory_budget_gib` (default: what this process may use,
  `memory.available_bytes`, less what it holds). A run is started beside others only when
  the peaks of all of them fit: a run's peak is the one it measured before, or its kind's
  (`costs`), or, for one never run, its own estimate (the line it logs before its first
  round; it is given what is left as its `--memory_budget_gib`, refuses if it would not fit,
  and then waits until it can run alone). Nothing is started beside a run whose peak is not
  known yet.

  Returns 0 when every run finished, 2 when every failed run refused its input (its exit
  status 2: the message is printed), else 1.

  Raises:
    ReproduceError: a run's directory holds a run made with other flags, or a link where
      this writes (checked for every run before any starts).
  """
  results = pathlib.Path(results)
  for figure, run in runs:
    run_dir = results / figure.name / run.name
    for path in (run_dir, run_dir / COMMAND_FILE, run_dir / LOG_FILE):
      if path.is_symlink():  # What this writes there, it writes through no link.
        raise ReproduceError(f'{path} is a symbolic link: remove it (a run writes only files '
                             'it makes).')
    check_recorded_flags(run, run_dir)
  goal = {id(r): r.rounds if until_round is None else min(r.rounds, until_round) for _, r in runs}
  for figure, run in runs:  # A bad value of a later run found before the first starts.
    check_configuration(run, results / figure.name / run.name, data_dir, goal[id(run)],
                        execution_args)
  pending = [
      (f, r) for f, r in runs if run_files.rounds_done(results / f.name / r.name) < goal[id(r)]
  ]
  for figure, run in runs:
    if (figure, run) not in pending:
      unchecked = not (results / figure.name / run.name / COMMAND_FILE).exists()
      log(f'{figure.name}/{run.name}: finished ({goal[id(run)]} rounds), skipped' +
          (' (made without a command.json: its flags are not checked)' if unchecked else ''))
  cores = _cores()
  budget = (int(memory_budget_gib *
                memory.GIB) if memory_budget_gib is not None else _memory_left())
  peaks = _expected_peaks(runs, results)
  alone: set[int] = set()  # Runs that would not fit beside others.
  running: dict[subprocess.Popen, _Running] = {}
  failed = []
  free: list[int | None] = list(cores[:max(1, jobs)]) if pin else [None] * max(1, jobs)
  env = dict(os.environ)  # The binaries import from this repository wherever they start.
  env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(ROOT), env.get('PYTHONPATH')]))
  env['PYTHONUNBUFFERED'] = '1'  # Each line in the log when written (the estimate's, say).
  try:
    while pending or running:
      while pending and free:
        figure, run = pending[0]
        extra = []
        if budget is not None and running:
          reserved = [r.peak for r in running.values()]
          if any(peak is None for peak in reserved) or id(run) in alone:
            break  # Until a running run's peak is known, or this one can run alone.
          left = budget - sum(peak for peak in reserved if peak is not None)
          need = peaks.get(id(run))
          if left < _SMALLEST_BUDGET or (need is not None and need > left):
            break
          extra = [f'--memory_budget_gib={left / memory.GIB:.3f}']
        pending.pop(0)
        core = free.pop(0)
        run_dir = results / figure.name / run.name
        _record_flags(run, run_dir)
        # Paths relative to where this runs, so that a run records no absolute path.
        args = command(run, pathlib.Path(os.path.relpath(run_dir)),
                       os.path.relpath(data_dir) if data_dir else data_dir, execution_args,
                       until_round) + extra
        if core is not None and len(cores) > 1:
          args = ['taskset', '-c', str(core)] + args
        log(f'{figure.name}/{run.name}: {printable(args)}'
            f'{"" if core is None else f"  (core {core})"}')
        log_start = (run_dir / LOG_FILE).stat().st_size if (run_dir / LOG_FILE).exists() else 0
        with open(run_dir / LOG_FILE, 'a') as log_file:
          # A run ends as on Ctrl-C (resumable) when this process dies, however it dies
          # (SIGTERM, SIGHUP, SIGKILL): no run trains on unwatched, holding its directory.
          process = subprocess.Popen(args,
                                     stdout=log_file,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True,
                                     env=env,
                                     preexec_fn=cleanup.parent_death_signal(signal.SIGINT))
        running[process] = _Running(figure,
                                    run,
                                    core,
                                    peaks.get(id(run)),
                                    log_start,
                                    beside_others=bool(extra))
      time.sleep(0.5)
      for entry in running.values():
        if entry.peak is None:
          entry.peak = _logged_estimate(results / entry.figure.name / entry.run.name / LOG_FILE,
                                        entry.log_start)
      for process in [p for p in running if p.poll() is not None]:
        entry = running.pop(process)
        figure, run, core = entry.figure, entry.run, entry.core
        free.append(core)
        log_path = results / figure.name / run.name / LOG_FILE
        if process.returncode == 0:
          log(f'{figure.name}/{run.name}: finished')
        elif (process.returncode == 2 and entry.beside_others and
              memory.REFUSAL_MARK in failure(2, log_path)):
          alone.add(id(run))
          pending.insert(0, (figure, run))
          log(f'{figure.name}/{run.name}: would not fit beside the runs going on; it waits to '
              'run alone')
        else:
          failed.append(process.returncode)
          log(f'{figure.name}/{run.name}: failed ({failure(process.returncode, log_path)}) '
              f'(log: {log_path})')
  finally:
    _stop_runs({process: results / e.figure.name / e.run.name for process, e in running.items()})
  if not failed:
    return 0
  return 2 if all(code == 2 for code in failed) else 1
