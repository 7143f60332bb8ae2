r"""Paper-style figures from one or more runs of `run_experiment` (PNG).

For each run directory: test accuracy and test loss against the round, and test accuracy
against the cumulative bytes uploaded by the clients, one line per algorithm.

  python -m experiments.plot runs/cnn3 --output=experiments/results/cnn3.png

With `--seeds`, the directories are seeds of one experiment (the same configuration, another
`--seed`): one figure, test accuracy against the round and against cumulative bytes uploaded,
every seed thin and the mean over seeds bold, and a markdown table of the mean and the range
(min-max over seeds) at `--table_rounds` and, for each pair of algorithms, at how many
evaluations one is above the other in every seed and from which round on it stays so, printed
and written next to the PNG (`.md`).

  python -m experiments.plot --seeds runs/cnn3_seed0 runs/cnn3_seed1 runs/cnn3_seed2 \
      --output=experiments/results/cnn3/seeds.png --title='MNIST CNN, 3 of 10 clients'
"""

import csv
import dataclasses
import json
import pathlib

from absl import flags
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments import binary  # pylint: disable=g-bad-import-order,wrong-import-position

# Not marked required: importing this module (e.g. in a test) must not add a validator to
# the global flags of whatever else parses them.
_OUTPUT = flags.DEFINE_string('output', None, 'PNG file to write (required).')
_SEEDS = flags.DEFINE_bool('seeds', False, 'The directories are seeds of one experiment.')
_TITLE = flags.DEFINE_string('title', None, 'Figure title (with --seeds).')
_TABLE_ROUNDS = flags.DEFINE_list('table_rounds', ['100', '200', '300', '1000'],
                                  'With --seeds: the rounds of the table (those reached).')
_RENAME = flags.DEFINE_list('rename', [], 'With --seeds: old:new algorithm names, e.g. '
                            'ef21:ef21_dense for a run made with --ef21_dense_state.')

# The papers' names for the algorithms.
PAPER_NAMES = {
    'flare': 'FLARE', 'ec': 'EC', 'ec_fedprox': 'EC+FedProx', 'ec_ffl': 'EC-FFL',
    'ef21': 'EF21', 'ef21_dense': 'EF21 (authors\' dense state)', 'fedavg': 'FedAvg',
    'tff_fedavg': 'TFF FedAvg', 'tff_fedprox': 'TFF FedProx', 'mask_none': 'no mask',
    'mask_independent': 'independent masks', 'mask_synchronized': 'synchronized masks'}
_COLORS = {'flare': 'C3', 'ec': 'C0', 'ef21': 'C2', 'ef21_dense': 'C2', 'fedavg': 'C7',
           'ec_fedprox': 'C1', 'ec_ffl': 'C4', 'tff_fedavg': 'C5', 'tff_fedprox': 'C6'}


def read_curves(metrics_csv: pathlib.Path) -> dict[str, dict[str, list[float]]]:
  """`{algorithm: {'round': [...], 'accuracy': [...], 'loss': [...], 'bytes': [...]}}`.

  `bytes` is the cumulative upload before the round of each evaluation (evaluations happen
  before a round's training; the last row, after the final round, has no training).

  Raises:
    binary.BadInput: no such file, or one with no evaluated round.
  """
  metrics_csv = pathlib.Path(metrics_csv)
  try:
    with open(metrics_csv, newline='') as f:
      rows = list(csv.DictReader(f))
  except OSError as e:
    raise binary.BadInput(f'{metrics_csv.parent}: no readable metrics.csv ({e.strerror}); '
                          'give run directories of run_experiment.') from e
  algorithms = sorted({key.split('/')[0] for key in (rows[0] if rows else {})
                       if '/eval/accuracy' in key})
  if not algorithms:
    raise binary.BadInput(f'{metrics_csv} has no evaluated round yet (no <algorithm>/eval/'
                          'accuracy values).')
  curves = {}
  for name in algorithms:
    curve = {'round': [], 'accuracy': [], 'loss': [], 'bytes': []}
    uploaded = 0.0
    for row in sorted(rows, key=lambda r: int(r['round'])):
      accuracy = row.get(f'{name}/eval/accuracy', '')
      if accuracy not in ('', None):
        curve['round'].append(int(row['round']))
        curve['accuracy'].append(float(accuracy))
        curve['loss'].append(float(row[f'{name}/eval/loss']))
        curve['bytes'].append(uploaded)
      sent = row.get(f'{name}/bytes_uploaded', '')
      if sent not in ('', None):
        uploaded += float(sent)
    curves[name] = curve
  return curves


# Algorithms renamed since early runs were committed (EF21 with the dense state was `ef21`).
RENAME = {'ef21': 'ef21_dense'}


def read_run_curves(run_dir: pathlib.Path, rename: dict[str, str] | None = None) -> dict:
  """`read_curves` of a run directory's metrics.csv, under today's algorithm names."""
  rename = RENAME if rename is None else rename
  curves = read_curves(pathlib.Path(run_dir) / 'metrics.csv')
  return {rename.get(name, name): curve for name, curve in curves.items()}


def merge_curves(parts) -> dict:
  """One seed made of several runs (one algorithm each, same client stream and initial
  model): their `{algorithm: curve}` dicts merged, in order."""
  merged = {}
  for part in parts:
    merged.update(part)
  return merged


def plot_runs(run_dirs: list[str], output: str) -> None:
  """Writes a 3-panel figure per run (stacked) to `output`."""
  fig, axes = plt.subplots(len(run_dirs), 3, figsize=(15, 4 * len(run_dirs)), squeeze=False)
  for row_axes, run_dir in zip(axes, run_dirs):
    curves = read_curves(pathlib.Path(run_dir) / 'metrics.csv')
    for name, curve in curves.items():
      row_axes[0].plot(curve['round'], curve['accuracy'], label=name)
      row_axes[1].plot(curve['round'], curve['loss'], label=name)
      positive = [(b, a) for b, a in zip(curve['bytes'], curve['accuracy']) if b > 0]
      if positive:
        row_axes[2].plot(*zip(*positive), label=name)
    title = pathlib.Path(run_dir).name
    for ax, ylabel in zip(row_axes, ('test accuracy', 'test loss', 'test accuracy')):
      ax.set_ylabel(ylabel)
      ax.set_title(title)
      ax.grid(alpha=0.3)
    row_axes[0].set_xlabel('round')
    row_axes[1].set_xlabel('round')
    row_axes[2].set_xlabel('cumulative bytes uploaded (value + index, or dense if smaller)')
    row_axes[2].set_xscale('log')
    row_axes[0].legend()
  fig.tight_layout()
  pathlib.Path(output).parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(output, dpi=100)
  plt.close(fig)


# Fields two seeds of one experiment may differ in (besides what a resume may change).
_SEED_FIELDS = ('seed', 'output_dir', 'rounds', 'eval_every', 'checkpoint_every', 'execution',
                'workers', 'worker_timeout_s', 'client_threads', 'allow_nonfinite_rounds',
                'client_state_storage')


def _recorded_config(run_dir: pathlib.Path) -> dict | None:
  for name in ('config.json', 'summary.json'):
    path = run_dir / name
    if path.exists():
      try:
        return json.loads(path.read_text())['config']
      except (OSError, ValueError, KeyError) as e:
        raise binary.BadInput(f'{path} cannot be read ({e}).') from e
  return None


def check_seeds_of_one_experiment(run_dirs: list[str]) -> None:
  """Raises `binary.BadInput` unless the runs' configurations differ in the seed only.

  Runs without a recorded configuration (older committed runs hold only metrics.csv and a
  summary) are compared where they have one.
  """
  recorded = [(d, _recorded_config(pathlib.Path(d))) for d in run_dirs]
  recorded = [(d, c) for d, c in recorded if c is not None]
  for run_dir, config in recorded[1:]:
    first_dir, first = recorded[0]
    differ = sorted(k for k in set(first) | set(config)
                    if k not in _SEED_FIELDS and first.get(k) != config.get(k))
    if differ:
      raise binary.BadInput(f'{run_dir} is not a seed of the experiment in {first_dir}: they '
                            f'differ in {", ".join(differ)}.')


def seed_curves(run_dirs: list[str], names: dict[str, str] | None = None):
  """`{algorithm: [curve of each seed]}` over the seeds' runs (see `read_curves`).

  `names` renames algorithms (e.g. a run that called the dense-state EF21 `ef21`).
  """
  names = names or {}
  curves = {}
  for run_dir in run_dirs:
    for name, curve in read_curves(pathlib.Path(run_dir) / 'metrics.csv').items():
      curves.setdefault(names.get(name, name), []).append(curve)
  return curves


def seed_table(curves, rounds: list[int], unit: str = 'seeds') -> str:
  """Markdown: test accuracy, mean over seeds and [min, max], at each round every seed reached
  (`unit`: what the runs vary, for the caption)."""
  reached = [r for r in rounds
             if all(r in c['round'] for per_seed in curves.values() for c in per_seed)]
  seeds = min(len(per_seed) for per_seed in curves.values())
  if not reached:
    return (f'Test accuracy over {seeds} {unit}: no round of {rounds} that every run reached '
            'yet.\n')
  lines = ['| algorithm | ' + ' | '.join(f'round {r}' for r in reached) + ' |',
           '|---|' + '---:|' * len(reached)]
  for name, per_seed in curves.items():
    cells = []
    for r in reached:
      values = [c['accuracy'][c['round'].index(r)] for c in per_seed]
      cells.append(f'{sum(values) / len(values):.4f} [{min(values):.4f}, {max(values):.4f}]')
    lines.append(f'| {PAPER_NAMES.get(name, name)} | ' + ' | '.join(cells) + ' |')
  return (f'Test accuracy, mean over {seeds} {unit} [min, max]:\n\n' + '\n'.join(lines) +
          '\n')


@dataclasses.dataclass(frozen=True)
class Ordering:
  """Where algorithm A is above B, seed by seed (`ordering`)."""
  holds: int  # Evaluations at which A > B strictly in every seed.
  reverse: int  # Evaluations at which B > A strictly in every seed.
  evaluations: int  # Rounds every seed of both reached.
  since: int | None  # First round from which A > B at every later evaluation (None: not at the last).


def accuracy_at(curve, round_num: int) -> float | None:
  """A curve's test accuracy after `round_num` rounds (None where it was not evaluated)."""
  if round_num not in curve['round']:
    return None
  return curve['accuracy'][curve['round'].index(round_num)]


def ordering(above, below) -> Ordering:
  """`above` (A) against `below` (B): lists of curves, seed i of one is seed i of the other."""
  seeds = list(above) + list(below)
  rounds = sorted(set.intersection(*(set(c['round']) for c in seeds)))
  holds = [all(accuracy_at(a, r) > accuracy_at(b, r) for a, b in zip(above, below))
           for r in rounds]
  reverse = sum(all(accuracy_at(a, r) < accuracy_at(b, r) for a, b in zip(above, below))
                for r in rounds)
  since = len(holds)  # The start of the final run of evaluations where it holds.
  while since > 0 and holds[since - 1]:
    since -= 1
  return Ordering(sum(holds), reverse, len(rounds), rounds[since] if since < len(holds) else None)


def seed_orderings(curves) -> str:
  """Markdown: for each pair of algorithms, where one is above the other in every seed.

  The runs must each hold every algorithm (seed i of one algorithm is seed i of the other:
  the same client stream). For each pair, A the one with the higher mean accuracy over the
  evaluations, counts the evaluations (rounds every seed of both reached) at which A > B
  strictly in every seed, and those at which B > A in every seed, and gives the first round
  from which A > B holds at every later evaluation ("not at the last evaluation" when the
  last one already breaks it).
  """
  names = sorted(curves, key=lambda n: PAPER_NAMES.get(n, n))
  lines = ['| ordering A > B | evaluations where A > B in every seed | B > A in every seed | '
           'A > B in every seed from |', '|---|---:|---:|---|']
  for i, one in enumerate(names):
    for other in names[i + 1:]:
      if len(curves[one]) != len(curves[other]):
        continue
      seeds = curves[one] + curves[other]
      rounds = sorted(set.intersection(*(set(c['round']) for c in seeds)))
      total = {n: sum(accuracy_at(c, r) for c in curves[n] for r in rounds) for n in (one, other)}
      high, low = (one, other) if total[one] >= total[other] else (other, one)
      result = ordering(curves[high], curves[low])
      start = f'round {result.since}' if result.since is not None else 'not at the last evaluation'
      lines.append(f'| {PAPER_NAMES.get(high, high)} > {PAPER_NAMES.get(low, low)} | '
                   f'{result.holds} of {result.evaluations} | {result.reverse} | {start} |')
  return ('Orderings, seed by seed (the same seed is the same client stream for every '
          'algorithm):\n\n' + '\n'.join(lines) + '\n')


def _mean_curve(per_seed, key):
  """The mean over seeds of `key` at the rounds every seed has."""
  common = sorted(set.intersection(*(set(c['round']) for c in per_seed)))
  mean = [sum(c[key][c['round'].index(r)] for c in per_seed) / len(per_seed) for r in common]
  return common, mean


def plot_seeds(curves, output: str, title: str | None) -> None:
  """Accuracy against round and against cumulative bytes: seeds thin, their mean bold."""
  fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
  for name, per_seed in curves.items():
    color = _COLORS.get(name)
    label = f'{PAPER_NAMES.get(name, name)} ({len(per_seed)} seeds)'
    for curve in per_seed:
      axes[0].plot(curve['round'], curve['accuracy'], color=color, lw=0.7, alpha=0.45)
      positive = [(b, a) for b, a in zip(curve['bytes'], curve['accuracy']) if b > 0]
      if positive:
        axes[1].plot(*zip(*positive), color=color, lw=0.7, alpha=0.45)
    rounds, accuracy = _mean_curve(per_seed, 'accuracy')
    axes[0].plot(rounds, accuracy, color=color, lw=2.2, label=label)
    _, uploaded = _mean_curve(per_seed, 'bytes')
    positive = [(b, a) for b, a in zip(uploaded, accuracy) if b > 0]
    if positive:
      axes[1].plot(*zip(*positive), color=color, lw=2.2, label=label)
  axes[0].set_xlabel('round')
  axes[1].set_xlabel('cumulative bytes uploaded by all clients (log scale)')
  axes[1].set_xscale('log')
  for ax in axes:
    ax.set_ylabel('test accuracy (10,000 images)')
    ax.grid(alpha=0.3)
  axes[0].legend(loc='best', fontsize=8)
  if title:
    fig.suptitle(f'{title}: each seed thin, mean over seeds bold')
  fig.tight_layout()
  pathlib.Path(output).parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(output, dpi=100)
  plt.close(fig)


def main(argv):
  if len(argv) < 2:
    raise binary.BadInput('Give one or more run directories.')
  if not _OUTPUT.value:
    raise binary.BadInput('--output is required.')
  if _SEEDS.value:
    try:
      names = dict(pair.split(':') for pair in _RENAME.value)
    except ValueError as e:
      raise binary.BadInput(f'--rename takes old:new pairs: {_RENAME.value}') from e
    check_seeds_of_one_experiment(argv[1:])
    curves = seed_curves(argv[1:], names)
    plot_seeds(curves, _OUTPUT.value, _TITLE.value)
    try:
      rounds = [int(r) for r in _TABLE_ROUNDS.value]
    except ValueError as e:
      raise binary.BadInput(f'--table_rounds takes round numbers: {e}') from e
    table = seed_table(curves, rounds) + '\n' + seed_orderings(curves)
    pathlib.Path(_OUTPUT.value).with_suffix('.md').write_text(table)
    print(table)
  else:
    plot_runs(argv[1:], _OUTPUT.value)
  print(f'wrote {_OUTPUT.value}')


if __name__ == '__main__':
  binary.run(main)
