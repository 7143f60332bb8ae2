"""The files a run writes into its output directory, and the one reader of them.

`runner` writes them (the names below are its); everything that reads a run directory (the
plots, the claims, the scheduler, the demo, a notebook) reads it here:

  metrics.csv     a row per round (and one for the end of the run), columns
                  `<algorithm>/<metric path>` (`simulation/loop.py` has a row's layout);
  config.json     the configuration, its changes on resume, the code each piece ran, and
                  what a `simulate` run recorded (how each process was built, the clients,
                  fingerprints of their data);
  summary.json    the configuration, the final evaluations, timings and memory of the last
                  finished piece;
  checkpoints/    program_state_<r> and client_states_<r> after round r - 1;
  client_states/  the clients' states of a run keeping them on disk;
  tensorboard/    the same rows as metrics.csv, for TensorBoard;
  .lock           held while a run uses the directory.

`reproduce` adds `command.json` (the flags it ran with) and `log.txt`.

Readers:

  rows(run_dir)          the rows of metrics.csv, each cell a float (or None when empty);
  curves(run_dir)        {algorithm: Curve}: the evaluations against the round and the
                         bytes uploaded before them;
  record(run_dir)        config.json, checked to be a run's record;
  config(run_dir)        the recorded configuration;
  check_rows_before(run_dir, r)  refuses a resume at round r where metrics.csv lacks a round
                         before r;
  rounds_done(run_dir)   the rounds finished (summary or latest checkpoint);
  peak_gib(run_dir)      the peak memory the run measured (summary);
  seconds_per_round(run_dir)  the median of a round's training seconds (all algorithms).

A row cut by a kill or a full disk (the last line without its end of line) is left out:
it is the one row being written. Any other malformed row or cell is refused in one line
(`RunFileError`).
"""

import csv
import dataclasses
import io
import json
import math
import pathlib
import re
import statistics

from tff_flare.algorithms import hyperparameters
from tff_flare.simulation import files

METRICS = 'metrics.csv'
CONFIG_FILE = 'config.json'
SUMMARY_FILE = 'summary.json'
CHECKPOINTS = 'checkpoints'
LOCK_FILE = '.lock'
# What a run writes round by round (removed when it starts again before its first checkpoint).
ROUND_OUTPUTS = (METRICS, 'tensorboard', 'client_states')


class RunFileError(ValueError):
  """A run file that is missing, cut or malformed (the message names it)."""


@dataclasses.dataclass(frozen=True)
class Curve:
  """One algorithm's evaluations in a run: rounds, test accuracy and loss, and the bytes its
  clients uploaded before each evaluation (evaluations come before a round trains)."""

  round: tuple[int, ...]
  accuracy: tuple[float, ...]
  loss: tuple[float, ...]
  bytes: tuple[float, ...]

  def at(self, round_num: int, metric: str = 'accuracy') -> float | None:
    """The metric after `round_num` rounds, None where it was not evaluated."""
    if round_num not in self.round:
      return None
    return getattr(self, metric)[self.round.index(round_num)]

  @property
  def last_round(self) -> int:
    return self.round[-1]


def _number(text: str, where: str) -> float | None:
  if text in ('', None):
    return None
  try:
    return float(text)
  except ValueError:
    raise RunFileError(f'{where}: {text!r} is not a number.') from None


def rows(run_dir: pathlib.Path) -> list[dict[str, float | None]]:
  """The rows of the run's `metrics.csv`, in file order (see the module docstring).

  Raises:
    RunFileError: no readable file, a row with the wrong number of cells, a cell that is
      not a number, or a round that is no whole number or not after the row before.
  """
  path = pathlib.Path(run_dir) / METRICS
  try:
    text = files.read_text(path)
  except (OSError, UnicodeDecodeError) as e:
    raise RunFileError(f'{path.parent}: no readable {METRICS} ({e}).') from e
  lines = text.splitlines(keepends=True)
  if lines and not lines[-1].endswith('\n'):
    lines = lines[:-1]  # Cut while being written: not a row yet.
  reader = csv.reader(io.StringIO(''.join(lines)))
  header = next(reader, None)
  if not header:
    return []
  result: list[dict[str, float | None]] = []
  for number, cells in enumerate(reader, start=2):
    if len(cells) != len(header):
      raise RunFileError(f'{path}, line {number}: {len(cells)} cells where the header has '
                         f'{len(header)} (a damaged file?).')
    row = {
        name: _number(cell, f'{path}, line {number}, {name}') for name, cell in zip(header, cells)
    }
    if 'round' in row:
      round_num = row['round']
      if round_num is None or round_num != int(round_num) or round_num < 0:
        raise RunFileError(f'{path}, line {number}: round {round_num} is not a round number.')
      if result and round_num <= round_of(result[-1]):
        raise RunFileError(f'{path}, line {number}: round {int(round_num)} follows round '
                           f'{round_of(result[-1])} (rounds are written once, in order: '
                           'a damaged or edited file?).')
    result.append(row)
  return result


def round_of(row: dict[str, float | None]) -> int:
  """The round of a row of `rows` (checked there to be a whole number)."""
  return int(row['round'] or 0)


def _today_names(run_dir: pathlib.Path) -> dict[str, str]:
  """Algorithms renamed since the run was made: EF21 with the dense state was `ef21`, run
  with the then `--ef21_dense_state` flag (its recorded configuration says so)."""
  recorded = config(run_dir) or {}
  return {'ef21': 'ef21_dense'} if recorded.get('ef21_dense_state') else {}


def curves(run_dir: pathlib.Path) -> dict[str, Curve]:
  """`{algorithm: Curve}` of a run, under today's algorithm names.

  Raises:
    RunFileError: see `rows`; or no evaluated round yet.
  """
  rename = _today_names(run_dir)
  table = sorted(rows(run_dir), key=round_of)
  algorithms = sorted(
      {key.split('/')[0] for key in (table[0] if table else {}) if key.endswith('/eval/accuracy')})
  if not algorithms or not any(
      row.get(f'{a}/eval/accuracy') is not None for row in table for a in algorithms):
    raise RunFileError(f'{pathlib.Path(run_dir) / METRICS} has no evaluated round yet.')
  result = {}
  for name in algorithms:
    if f'{name}/eval/loss' not in table[0]:
      raise RunFileError(f'{pathlib.Path(run_dir) / METRICS} has {name}/eval/accuracy but no '
                         f'{name}/eval/loss column (a damaged or edited file?).')
    points, uploaded = [], 0.0
    for row in table:
      accuracy = row.get(f'{name}/eval/accuracy')
      if accuracy is not None:
        points.append((round_of(row), accuracy, row[f'{name}/eval/loss'], uploaded))
      uploaded += row.get(f'{name}/bytes_uploaded') or 0.0
    result[rename.get(name, name)] = Curve(*(tuple(column) for column in zip(*points)))
  return result


def has_curves(run_dir: pathlib.Path) -> bool:
  """Whether the run has evaluated rounds to read (a damaged file still raises)."""
  if not (pathlib.Path(run_dir) / METRICS).exists():
    return False
  try:
    curves(run_dir)
  except RunFileError as e:
    if 'no evaluated round' in str(e):
      return False
    raise
  return True


# The record config.json holds (the module docstring): its fields and their JSON types;
# `config` and `changes` in every record, the others where the run recorded them.
_RECORD_FIELDS = dict(config=dict,
                      changes=list,
                      code=list,
                      clients=list,
                      algorithms=list,
                      processes=dict)
_REQUIRED_RECORD_FIELDS = ('config', 'changes')


def record(run_dir: pathlib.Path) -> dict | None:
  """The run's record (config.json: its configuration, the changes on resume, the code of
  each piece and what a `simulate` run recorded), None without one.

  Raises:
    RunFileError: a file that cannot be read, or that is not such a record (not an object,
      a field missing or of another JSON type).
  """
  path = pathlib.Path(run_dir) / CONFIG_FILE
  value = _json_object(path, 'a run record')
  if value is None:
    return None
  for name, kind in _RECORD_FIELDS.items():
    if name not in value and name in _REQUIRED_RECORD_FIELDS:
      raise RunFileError(f'{path} is not a run record: it has no {name!r}.')
    if name in value and not isinstance(value[name], kind):
      raise RunFileError(f'{path} is not a run record: its {name!r} is a JSON '
                         f'{type(value[name]).__name__}.')
  return value


def config(run_dir: pathlib.Path) -> dict | None:
  """The run's recorded configuration (config.json, else summary.json), None without one.

  Raises:
    RunFileError: a file that cannot be read.
  """
  recorded = record(run_dir)
  if recorded is not None:
    return recorded['config']
  summarized = summary(run_dir)
  if summarized is None:
    return None
  if not isinstance(summarized.get('config'), dict):
    raise RunFileError(f'{pathlib.Path(run_dir) / SUMMARY_FILE} has no config (a JSON '
                       'object).')
  return summarized['config']


def check_rows_before(run_dir: pathlib.Path, start_round: int) -> None:
  """Refuses to resume at `start_round` a run whose metrics.csv lacks a round before it (a
  file lost, cut or replaced: the checkpoint cannot write those rounds again, and the run
  would end with a gap no reader sees).

  Raises:
    RunFileError: naming the file and the rounds missing.
  """
  path = pathlib.Path(run_dir) / METRICS
  if not start_round:
    return
  if not path.exists():
    raise RunFileError(f'{path} is missing, and the checkpoint to resume from has done rounds '
                       f'0-{start_round - 1}.')
  found = rows(run_dir)
  if found and 'round' not in found[0]:
    raise RunFileError(f'{path} has no round column (a damaged or replaced file?).')
  missing = sorted(set(range(start_round)) - {round_of(row) for row in found})
  if missing:
    shown = ', '.join(map(
        str, missing[:3])) + (f' and {len(missing) - 3} more' if len(missing) > 3 else '')
    raise RunFileError(f'{path} has no row of round(s) {shown}, which the checkpoint to resume '
                       f'from has done (rounds 0-{start_round - 1}): a lost, cut or replaced '
                       'file?')


def code(run_dir: pathlib.Path) -> list[dict]:
  """The code the run's pieces ran (config.json's `code`: `{'commit', 'dirty', 'from_round'}`
  each); [] where none is recorded (runs made before it was), and the entries that are not
  such dicts left out (`RunFileError` for a record that is not one, `record`)."""
  pieces = (record(run_dir) or {}).get('code', [])
  return [
      p for p in pieces
      if isinstance(p, dict) and (p.get('commit') is None or isinstance(p.get('commit'), str))
  ]


def summary(run_dir: pathlib.Path) -> dict | None:
  """The run's summary.json, None without one (`RunFileError` when unreadable or not a JSON
  object)."""
  return _json_object(pathlib.Path(run_dir) / SUMMARY_FILE, 'a run summary')


def _json_object(path: pathlib.Path, what: str) -> dict | None:
  """The JSON object in `path`, None where there is no file.

  Raises:
    RunFileError: a file that cannot be read, or holds another JSON value than an object.
  """
  if not path.exists():
    return None
  try:
    value = json.loads(files.read_text(path))
  except (OSError, ValueError) as e:
    raise RunFileError(f'{path} cannot be read ({e}).') from e
  if not isinstance(value, dict):
    raise RunFileError(f'{path} is not {what}: a JSON {type(value).__name__}, not an object.')
  return value


def peak_gib(run_dir: pathlib.Path) -> float | None:
  """The peak memory the run measured (its summary's, in GiB), None where none is recorded
  (no summary, or one made before runs measured it)."""
  recorded = (summary(run_dir) or {}).get('memory')
  peak = recorded.get('peak_gib') if isinstance(recorded, dict) else None
  if hyperparameters.is_number(peak) and math.isfinite(peak) and 0 < peak < 2**20:
    return float(peak)
  return None


def rounds_done(run_dir: pathlib.Path) -> int:
  """Rounds a run has finished: the later of its summary's and its latest checkpoint's (a run
  finished in pieces keeps the summary of its last finished piece while an interrupted later
  piece has checkpointed further); without either, the last round its metrics.csv evaluated
  (a run stopped for good, committed as it was: rounds trained after its last evaluation
  show in no curve and cannot be resumed); else 0."""
  summarized = 0
  try:
    recorded = summary(run_dir)
    summarized = int(recorded['rounds']) if recorded else 0
  except (RunFileError, KeyError, TypeError, ValueError):
    pass
  versions = [
      int(m.group(1))
      for p in (pathlib.Path(run_dir) / CHECKPOINTS).glob('program_state_*')
      if (m := re.fullmatch(r'program_state_(\d+)', p.name))
  ]
  if summarized or versions or not (pathlib.Path(run_dir) / METRICS).exists():
    return max(versions + [summarized])
  try:
    evaluated = [
        round_of(row) for row in rows(run_dir) if any(
            k.endswith('/eval/accuracy') and v is not None for k, v in row.items())
    ]
  except RunFileError:
    return 0
  return max(evaluated, default=0)


def seconds_per_round(run_dir: pathlib.Path) -> float | None:
  """The median over rounds of the summed `round_seconds` of the run's algorithms (None
  without rounds)."""
  if not (pathlib.Path(run_dir) / METRICS).exists():
    return None
  totals = []
  for row in rows(run_dir):
    values = [v for k, v in row.items() if k.endswith('/round_seconds') and v is not None]
    if values:
      totals.append(sum(values))
  return statistics.median(totals) if totals else None


# Runs made before the metrics were namespaced per component (`client_work`, `aggregator`)
# have the same columns without that part.
_COMPONENTS = ('train/client_work/', 'train/aggregator/')


def _older_name(column: str) -> str | None:
  for component in _COMPONENTS:
    if column.startswith(component):
      return 'train/' + column[len(component):]
  return None


def rows_of(run_dir: pathlib.Path, algorithm: str, column: str) -> list[tuple[int, float]]:
  """`(round, value)` of one algorithm's column wherever it has a value (e.g.
  `train/aggregator/communication/density`; in an older run, its column of the same name
  without the component)."""
  key, older = f'{algorithm}/{column}', _older_name(column)
  result = []
  for row in rows(run_dir):
    value = row.get(key)
    if value is None and older is not None:
      value = row.get(f'{algorithm}/{older}')
    if value is not None:
      result.append((round_of(row), value))
  return result
