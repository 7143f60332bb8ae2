"""Figures made from runs: the machinery behind `experiments/reproduce.py`.

A `Figure` is a name, its runs and a summary; a `Run` is one `run_experiment` (or
`run_masking`) command: its flags and its number of rounds. A run's output directory is
`experiments/results/<figure>/<run>/`, so what is committed (`metrics.csv`, `config.json`,
`summary.json`, `command.json`) is what the run wrote, and the figure is made from it
(`checkpoints/`, `tensorboard/`, `client_states/`, `log.txt` and the run's `.lock` are not
committed).

* A run is finished when its `summary.json` holds `rounds` >= the planned rounds; a finished
  run is skipped if its recorded flags are the figure's. A run with fewer rounds is resumed
  by the same command on the same directory: from its checkpoint where this machine has
  one, else from round 0.
* The flags a run was made with are recorded in `<run>/command.json`; a run whose recorded
  flags differ from the figure's (other than `--rounds`) is refused (`ReproduceError`): it
  would mix two configurations. The run binary checks the same again against `config.json`.
* `execute(runs, jobs=k)` runs k runs at a time, each on its own core (`taskset`,
  `--client_threads=1`), as the committed evidence runs were made; `shard_runs` keeps every
  n-th run, in manifest order whatever the status, so a job array splits a figure.
* `format_list` gives each run's rounds done / planned and the time left, estimated from
  the seconds per round runs measured (`round_seconds` in metrics.csv).
* `summarize` has each figure write its PNG and tables into its folder and its section of
  `experiments/results/README.md`, between `<!-- reproduce:<figure> -->` markers.
"""

import collections
from collections.abc import Callable, Mapping, Sequence
import csv
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
from typing import Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = pathlib.Path('experiments') / 'results'  # Relative to the repository.
README = RESULTS / 'README.md'
COMMAND_FILE = 'command.json'
LOG_FILE = 'log.txt'


@dataclasses.dataclass(frozen=True)
class Run:
  """One run of a figure.

  Attributes:
    name: the run's directory under the figure's folder.
    flags: the binary's flags (`--name=value` as `name: value`; a bool as True/False), without
      `output_dir`, `rounds` and the execution flags, which the runner sets.
    rounds: the rounds the figure needs.
    binary: the module that runs it.
    cost_key: runs with the same key cost the same per round (for estimates); default: the
      flags without the seeds.
  """

  name: str
  flags: Mapping[str, object]
  rounds: int
  binary: str = 'experiments.run_experiment'
  cost_key: Optional[str] = None

  def key(self) -> str:
    if self.cost_key:
      return self.cost_key
    return json.dumps({k: v for k, v in sorted(self.flags.items())
                       if k not in ('seed', 'model_seed')}, default=str)


@dataclasses.dataclass(frozen=True)
class Figure:
  """A figure (or table) of the papers and the runs it is made from.

  Attributes:
    name: its folder under `experiments/results/`.
    title: what it shows.
    runs: the runs, in the order they are run.
    summarize: `(figure, folder) -> markdown` writes the figure's PNG/tables into `folder`
      from the runs' committed files and returns its section of the results README.
    external: run directories of earlier committed runs the figure also reads (relative to
      the repository), by name; they are not run by `reproduce`.
    directory: the figure's folder, if not `experiments/results/<name>` (relative to the
      root the runs start in, or absolute).
  """

  name: str
  title: str
  runs: tuple[Run, ...]
  summarize: Optional[Callable[['Figure', pathlib.Path], str]]
  external: Mapping[str, str] = dataclasses.field(default_factory=dict)
  directory: Optional[str] = None

  def folder(self, root: pathlib.Path) -> pathlib.Path:
    return root / (self.directory or RESULTS / self.name)

  def run_dir(self, root: pathlib.Path, run: Run) -> pathlib.Path:
    return self.folder(root) / run.name


class ReproduceError(ValueError):
  """A bad selection, or a run directory that belongs to another configuration."""


def _flag_args(flags: Mapping[str, object]) -> list[str]:
  args = []
  for name, value in flags.items():
    if value is True:
      args.append(f'--{name}')
    elif value is False:
      args.append(f'--no{name}')
    elif isinstance(value, (list, tuple)):
      args.append(f'--{name}={",".join(str(v) for v in value)}')
    else:
      args.append(f'--{name}={value}')
  return args


# One core each, in-process: as the committed evidence runs were made.
ONE_CORE = ('--execution=inprocess', '--client_threads=1')


def command(figure: Figure, run: Run, execution_args: Sequence[str] = ONE_CORE,
            until_round: Optional[int] = None) -> list[str]:
  """The command line of `run` (paths relative to the root it starts in), to its planned
  rounds or, in pieces, to `until_round` where that is fewer."""
  output_dir = figure.run_dir(pathlib.Path('.'), run)
  rounds = run.rounds if until_round is None else min(run.rounds, until_round)
  return ([sys.executable, '-m', run.binary] + _flag_args(run.flags) +
          [f'--rounds={rounds}', f'--output_dir={output_dir}'] + list(execution_args))


def rounds_done(run_dir: pathlib.Path) -> int:
  """Rounds a run has finished: the later of its summary's and its latest checkpoint's, else 0.

  (A run finished in pieces keeps the summary of its last finished piece while an
  interrupted later piece has checkpointed further.)
  """
  summarized = 0
  summary = run_dir / 'summary.json'
  if summary.exists():
    try:
      summarized = int(json.loads(summary.read_text())['rounds'])
    except (OSError, ValueError, KeyError, TypeError):
      pass
  versions = [int(m.group(1)) for p in (run_dir / 'checkpoints').glob('program_state_*')
              if (m := re.fullmatch(r'program_state_(\d+)', p.name))]
  return max(versions + [summarized])


def check_recorded_flags(figure: Figure, run: Run, root: pathlib.Path = ROOT) -> None:
  """Raises `ReproduceError` when the run's directory holds a run made with other flags."""
  path = figure.run_dir(root, run) / COMMAND_FILE
  if not path.exists():
    return
  try:
    recorded = json.loads(path.read_text())
  except (OSError, ValueError) as e:
    raise ReproduceError(f'{path} cannot be read ({e}).') from e
  wanted = json.loads(json.dumps(dict(run.flags), default=str))
  if recorded.get('binary') != run.binary or recorded.get('flags') != wanted:
    changed = sorted(set(recorded.get('flags', {})) ^ set(wanted) | {
        k for k in wanted if k in recorded.get('flags', {}) and recorded['flags'][k] != wanted[k]})
    raise ReproduceError(
        f'{figure.run_dir(pathlib.Path("."), run)} holds a run made with other flags '
        f'({", ".join(changed) or "binary"}); the manifest would mix two configurations. '
        'Remove the directory to run it again, or restore the manifest.')


def _record_flags(figure: Figure, run: Run, root: pathlib.Path) -> None:
  run_dir = figure.run_dir(root, run)
  run_dir.mkdir(parents=True, exist_ok=True)
  (run_dir / COMMAND_FILE).write_text(json.dumps(
      dict(binary=run.binary, flags=dict(run.flags)), indent=2, default=str) + '\n')


def seconds_per_round(run_dir: pathlib.Path) -> Optional[float]:
  """The median over rounds of the summed `round_seconds` of the run's algorithms."""
  path = run_dir / 'metrics.csv'
  if not path.exists():
    return None
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  totals = []
  for row in rows:
    values = [float(v) for k, v in row.items() if k.endswith('/round_seconds') and v]
    if values:
      totals.append(sum(values))
  return statistics.median(totals) if totals else None


@dataclasses.dataclass
class RunStatus:
  figure: Figure
  run: Run
  done: int
  seconds_per_round: Optional[float]

  @property
  def finished(self) -> bool:
    return self.done >= self.run.rounds


def status(figures: Sequence[Figure], root: pathlib.Path = ROOT) -> list[RunStatus]:
  result = []
  for figure in figures:
    for run in figure.runs:
      run_dir = figure.run_dir(root, run)
      result.append(RunStatus(figure, run, rounds_done(run_dir), seconds_per_round(run_dir)))
  return result


def estimate_seconds(statuses: Sequence[RunStatus]) -> dict[tuple[str, str], tuple[float, bool]]:
  """Seconds left per run `(figure, run)`: `(seconds, measured)`; measured = from the run's own
  rounds, else from runs of the same cost key (`measured` False), NaN when there are none."""
  by_key = collections.defaultdict(list)
  for s in statuses:
    if s.seconds_per_round is not None:
      by_key[s.run.key()].append(s.seconds_per_round)
  estimates = {}
  for s in statuses:
    left = max(0, s.run.rounds - s.done)
    if s.seconds_per_round is not None:
      estimates[(s.figure.name, s.run.name)] = (left * s.seconds_per_round, True)
    elif by_key.get(s.run.key()):
      estimates[(s.figure.name, s.run.name)] = (
          left * statistics.median(by_key[s.run.key()]), False)
    else:
      estimates[(s.figure.name, s.run.name)] = (float('nan') if left else 0.0, False)
  return estimates


def format_list(figures: Sequence[Figure], root: pathlib.Path = ROOT) -> str:
  """The `--list` table: every run's rounds done / planned and the time left."""
  statuses = status(figures, root)
  estimates = estimate_seconds(statuses)
  lines = []
  for figure in figures:
    runs = [s for s in statuses if s.figure is figure]
    left = [estimates[(figure.name, s.run.name)] for s in runs]
    total = sum(seconds for seconds, _ in left)
    finished = sum(s.finished for s in runs)
    lines.append(f'{figure.name}: {figure.title} ({finished}/{len(runs)} runs finished; '
                 f'{_hours(total)} left{"" if all(m for _, m in left) else ", estimated"})')
    for s, (seconds, measured) in zip(runs, left):
      rate = (f'{s.seconds_per_round:.2f} s/round' if s.seconds_per_round is not None else
              'no rounds yet')
      lines.append(f'  {s.run.name:<40} {s.done:>5} / {s.run.rounds:<5} {rate:<16} '
                   f'{_hours(seconds)} left{"" if measured or s.finished else " (estimated)"}')
  return '\n'.join(lines)


def _hours(seconds: float) -> str:
  if seconds != seconds:  # NaN
    return '? h'
  return f'{seconds / 3600:.1f} h'


def select(figures: Sequence[Figure], names: Sequence[str]) -> list[Figure]:
  """The figures named (all for an empty list); an unknown name raises `ReproduceError`."""
  known = {f.name: f for f in figures}
  unknown = [n for n in names if n not in known]
  if unknown:
    raise ReproduceError(f'Unknown figures {unknown}; known: {", ".join(known)}.')
  return [known[n] for n in names] if names else list(figures)


def parse_shard(text: Optional[str]) -> tuple[int, int]:
  """`'i/n'` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
  if not text:
    return 0, 1
  match = re.fullmatch(r'(\d+)/(\d+)', text.strip())
  if not match or not 0 <= int(match.group(1)) < int(match.group(2)):
    raise ReproduceError(f'--shard must be i/n with 0 <= i < n, got {text!r}.')
  return int(match.group(1)), int(match.group(2))


def shard_runs(figures: Sequence[Figure], shard: tuple[int, int]) -> list[tuple[Figure, Run]]:
  """Every n-th run of the figures, from the i-th, in manifest order (status not consulted)."""
  index, count = shard
  every = [(figure, run) for figure in figures for run in figure.runs]
  return every[index::count]


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


def execute(runs: Sequence[tuple[Figure, Run]], jobs: int = 1, root: pathlib.Path = ROOT,
            log: Callable[[str], object] = print, pin: bool = True,
            execution_args: Sequence[str] = ONE_CORE,
            until_round: Optional[int] = None) -> int:
  """Runs the unfinished `runs`, `jobs` at a time (each pinned to a core with `pin`); with
  `until_round`, only up to that round this time (a piece: the next call goes on).

  Returns 0 when every run finished, 2 when a run refused its input (its exit status 2:
  the message is printed), else 1 when a run failed.

  Raises:
    ReproduceError: a run's directory holds a run made with other flags (checked for every
      run before any starts).
  """
  for figure, run in runs:
    check_recorded_flags(figure, run, root)
  goal = {id(r): r.rounds if until_round is None else min(r.rounds, until_round) for _, r in runs}
  pending = [(f, r) for f, r in runs if rounds_done(f.run_dir(root, r)) < goal[id(r)]]
  for figure, run in runs:
    if (figure, run) not in pending:
      unchecked = not (figure.run_dir(root, run) / COMMAND_FILE).exists()
      log(f'{figure.name}/{run.name}: finished ({goal[id(run)]} rounds), skipped'
          + (' (made without a command.json: its flags are not checked)' if unchecked else ''))
  cores = _cores()
  running: dict[subprocess.Popen, tuple[Figure, Run, int]] = {}
  failed = []
  free = list(cores[:max(1, jobs)]) if pin else [None] * max(1, jobs)
  try:
    while pending or running:
      while pending and free:
        figure, run = pending.pop(0)
        core = free.pop(0)
        _record_flags(figure, run, root)
        args = command(figure, run, execution_args, until_round)
        if core is not None and len(cores) > 1:
          args = ['taskset', '-c', str(core)] + args
        log(f'{figure.name}/{run.name}: {shlex.join(args[args.index(sys.executable):])}'
            f'{"" if core is None else f"  (core {core})"}')
        log_file = open(figure.run_dir(root, run) / LOG_FILE, 'a')  # pylint: disable=consider-using-with
        env = dict(os.environ)  # The binaries import from this repository wherever root is.
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(ROOT), env.get('PYTHONPATH')]))
        process = subprocess.Popen(args, cwd=root, stdout=log_file, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)
        log_file.close()
        running[process] = (figure, run, core)
      time.sleep(0.5)
      for process in [p for p in running if p.poll() is not None]:
        figure, run, core = running.pop(process)
        free.append(core)
        if process.returncode == 0:
          log(f'{figure.name}/{run.name}: finished')
        else:
          failed.append(process.returncode)
          log_path = figure.run_dir(root, run) / LOG_FILE
          log(f'{figure.name}/{run.name}: failed ({failure(process.returncode, log_path)}) '
              f'(log: {figure.run_dir(pathlib.Path("."), run) / LOG_FILE})')
  finally:
    for process in running:  # Interrupted: the runs stop as on Ctrl-C (each resumes).
      try:
        os.killpg(process.pid, signal.SIGINT)
      except ProcessLookupError:
        pass
    for process in running:
      try:
        process.wait(timeout=60)
      except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
  if not failed:
    return 0
  return 2 if all(code == 2 for code in failed) else 1


def update_readme(readme: pathlib.Path, name: str, section: str) -> None:
  """Replaces (or appends) the figure's section between its markers in the results README."""
  begin, end = f'<!-- reproduce:{name} -->', f'<!-- /reproduce:{name} -->'
  text = readme.read_text() if readme.exists() else ''
  block = f'{begin}\n{section.strip()}\n{end}'
  if begin in text and end in text:
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
  else:
    text = text.rstrip('\n') + '\n\n' + block + '\n'
  readme.write_text(text)


def summarize(figures: Sequence[Figure], root: pathlib.Path = ROOT,
              log: Callable[[str], object] = print) -> None:
  """Each figure's PNG, tables and README section, from its runs' committed files."""
  for figure in figures:
    folder = figure.folder(root)
    if figure.summarize is None:
      continue
    made = [figure.run_dir(root, run) for run in figure.runs]
    made += [root / path for path in figure.external.values()]
    if not any((path / 'metrics.csv').exists() for path in made):
      log(f'{figure.name}: no run has rounds yet; nothing to summarize')
      continue
    folder.mkdir(parents=True, exist_ok=True)
    section = figure.summarize(figure, folder)
    update_readme(root / README, figure.name, section)
    log(f'{figure.name}: summarized in {folder.relative_to(root)} and {README}')
