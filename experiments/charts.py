"""The figures' plots and tables, drawn from runs (no flags, no files but the ones asked for).

`draw(figure, results, folder)` makes every drawing a figure declares (`spec.SeedCurves`,
`spec.AgainstParameter`, `spec.MaskingTable`, `spec.SparsityScaling`) into `folder` and
returns their markdown. The pieces (`seed_table`, `seed_orderings`, `plot_seeds`,
`plot_runs`, the masking cells' table) also serve `experiments/plot.py`. Algorithms are named
and coloured by their registry rows (`tff_flare.algorithms.registry`).
"""

import collections
import csv
import dataclasses
import io
import json
import math
import pathlib
import statistics
from collections.abc import Callable, Mapping, Sequence

import matplotlib

matplotlib.use('Agg')
from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments import runs as runs_lib  # pylint: disable=g-bad-import-order,wrong-import-position
from experiments import spec  # pylint: disable=wrong-import-position
from tff_flare.experiment import run_files
from tff_flare.algorithms import registry  # pylint: disable=wrong-import-position
from tff_flare.simulation import files  # pylint: disable=wrong-import-position

Curve = run_files.Curve
_METRIC_TITLES = {'accuracy': 'Test accuracy', 'loss': 'Test loss'}


def label(name: str) -> str:
  return registry.label(name)


def _cell(values: Sequence[float | None]) -> str:
  known = [v for v in values if v is not None]
  if not known:
    return '-'
  if len(known) == 1:
    return f'{known[0]:.4f} (1)'
  return f'{statistics.mean(known):.4f} [{min(known):.4f}, {max(known):.4f}] ({len(known)})'


def _value(curve, round_num: int, metric: str) -> float:
  """The curve's value at a round it has evaluated (one of its `round`s)."""
  value = curve.at(round_num, metric)
  assert value is not None, (round_num, metric)
  return value


def _summary(run_dir: pathlib.Path) -> dict:
  """A finished run's summary (`RunFileError` for a run without one)."""
  summary = run_files.summary(run_dir)
  if summary is None:
    raise run_files.RunFileError(f'{run_dir} has no {run_files.SUMMARY_FILE}: it has not finished.')
  return summary


# ---------------------------------------------------------------------------------------------
# Seeds of one experiment: curves, a table, the orderings.


def seed_table(curves: Mapping[str, Sequence[Curve]],
               rounds: Sequence[int],
               unit: str = 'seeds',
               metric: str = 'accuracy') -> str:
  """Markdown: the metric's mean over seeds and [min, max] at each round every seed reached
  (`unit`: what the runs vary, for the caption)."""
  reached = [
      r for r in rounds if all(r in c.round for per_seed in curves.values() for c in per_seed)
  ]
  seeds = min(len(per_seed) for per_seed in curves.values())
  title = _METRIC_TITLES[metric]
  if not reached:
    return (f'{title} over {seeds} {unit}: no round of {list(rounds)} that every run reached '
            'yet.\n')
  lines = [
      '| algorithm | ' + ' | '.join(f'round {r}' for r in reached) + ' |',
      '|---|' + '---:|' * len(reached)
  ]
  for name, per_seed in curves.items():
    cells = []
    for r in reached:
      values = [_value(c, r, metric) for c in per_seed]
      cells.append(f'{sum(values) / len(values):.4f} [{min(values):.4f}, {max(values):.4f}]')
    lines.append(f'| {label(name)} | ' + ' | '.join(cells) + ' |')
  return f'{title}, mean over {seeds} {unit} [min, max]:\n\n' + '\n'.join(lines) + '\n'


@dataclasses.dataclass(frozen=True)
class Ordering:
  """Where algorithm A is better than B, seed by seed (`ordering`)."""
  holds: int  # Evaluations at which A is better strictly in every seed.
  reverse: int  # Evaluations at which B is better strictly in every seed.
  evaluations: int  # Rounds every seed of both reached.
  since: int | None  # First round from which A stays better (None: not at the last).


def ordering(above: Sequence[Curve], below: Sequence[Curve], metric: str = 'accuracy') -> Ordering:
  """`above` (A) against `below` (B): lists of curves, seed i of one is seed i of the other.
  Better is a higher accuracy, or a lower loss."""
  sign = 1.0 if metric == 'accuracy' else -1.0
  seeds = list(above) + list(below)
  rounds = sorted(set.intersection(*(set(c.round) for c in seeds)))
  better = lambda a, b, r: sign * a.at(r, metric) > sign * b.at(r, metric)
  holds = [all(better(a, b, r) for a, b in zip(above, below)) for r in rounds]
  reverse = sum(all(better(b, a, r) for a, b in zip(above, below)) for r in rounds)
  since = len(holds)  # The start of the final run of evaluations where it holds.
  while since > 0 and holds[since - 1]:
    since -= 1
  return Ordering(sum(holds), reverse, len(rounds), rounds[since] if since < len(holds) else None)


def seed_orderings(curves: Mapping[str, Sequence[Curve]], metric: str = 'accuracy') -> str:
  """Markdown: for each pair of algorithms, where one is better than the other in every seed.

  For each pair, A the one with the better mean over the evaluations (rounds every seed of
  both reached): the evaluations at which A is better strictly in every seed, those at which
  B is, and the first round from which A stays better ("not at the last evaluation" when the
  last one already breaks it).
  """
  sign = 1.0 if metric == 'accuracy' else -1.0
  word = '>' if metric == 'accuracy' else 'below'
  names = sorted(curves, key=label)
  lines = [
      f'| ordering A {word} B | evaluations where A {word} B in every seed | '
      f'B {word} A in every seed | A {word} B in every seed from |', '|---|---:|---:|---|'
  ]
  for i, one in enumerate(names):
    for other in names[i + 1:]:
      if len(curves[one]) != len(curves[other]):
        continue
      seeds = list(curves[one]) + list(curves[other])
      rounds = sorted(set.intersection(*(set(c.round) for c in seeds)))
      total = {
          n: sign * sum(_value(c, r, metric) for c in curves[n] for r in rounds)
          for n in (one, other)
      }
      high, low = (one, other) if total[one] >= total[other] else (other, one)
      result = ordering(curves[high], curves[low], metric)
      start = (f'round {result.since}'
               if result.since is not None else 'not at the last evaluation')
      lines.append(f'| {label(high)} {word} {label(low)} | {result.holds} of '
                   f'{result.evaluations} | {result.reverse} | {start} |')
  return ('Orderings, seed by seed (the same seed is the same client stream for every '
          'algorithm):\n\n' + '\n'.join(lines) + '\n')


def _mean_curve(per_seed: Sequence[Curve], key: str):
  """The mean over seeds of `key` at the rounds every seed has."""
  common = sorted(set.intersection(*(set(c.round) for c in per_seed)))
  mean = [sum(getattr(c, key)[c.round.index(r)] for c in per_seed) / len(per_seed) for r in common]
  return common, mean


def plot_seeds(curves: Mapping[str, Sequence[Curve]],
               output: pathlib.Path,
               title: str | None,
               metric: str = 'accuracy') -> None:
  """The metric against the round and against cumulative bytes: seeds thin, their mean bold."""
  fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
  for name, per_seed in curves.items():
    color = registry.color(name)
    text = f'{label(name)} ({len(per_seed)} seeds)'
    for curve in per_seed:
      axes[0].plot(curve.round, getattr(curve, metric), color=color, lw=0.7, alpha=0.45)
      positive = [(b, a) for b, a in zip(curve.bytes, getattr(curve, metric)) if b > 0]
      if positive:
        axes[1].plot(*zip(*positive), color=color, lw=0.7, alpha=0.45)
    rounds, values = _mean_curve(per_seed, metric)
    axes[0].plot(rounds, values, color=color, lw=2.2, label=text)
    _, uploaded = _mean_curve(per_seed, 'bytes')
    positive = [(b, a) for b, a in zip(uploaded, values) if b > 0]
    if positive:
      axes[1].plot(*zip(*positive), color=color, lw=2.2, label=text)
  axes[0].set_xlabel('round')
  axes[1].set_xlabel('cumulative bytes uploaded by all clients (log scale)')
  axes[1].set_xscale('log')
  for ax in axes:
    ax.set_ylabel(_METRIC_TITLES[metric].lower())
    ax.grid(alpha=0.3)
  axes[0].legend(loc='best', fontsize=8)
  if title:
    fig.suptitle(f'{title}: each seed thin, mean over seeds bold')
  fig.tight_layout()
  pathlib.Path(output).parent.mkdir(parents=True, exist_ok=True)
  files.write_figure(fig, output, 100)
  plt.close(fig)


def plot_runs(run_dirs: Sequence[pathlib.Path], output: pathlib.Path) -> None:
  """A 3-panel figure per run (stacked): accuracy and loss against the round, accuracy
  against the cumulative bytes uploaded."""
  fig, axes = plt.subplots(len(run_dirs), 3, figsize=(15, 4 * len(run_dirs)), squeeze=False)
  for row_axes, run_dir in zip(axes, run_dirs):
    for name, curve in run_files.curves(run_dir).items():
      color = registry.color(name)
      row_axes[0].plot(curve.round, curve.accuracy, label=label(name), color=color)
      row_axes[1].plot(curve.round, curve.loss, label=label(name), color=color)
      positive = [(b, a) for b, a in zip(curve.bytes, curve.accuracy) if b > 0]
      if positive:
        row_axes[2].plot(*zip(*positive), label=label(name), color=color)
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
  files.write_figure(fig, output, 100)
  plt.close(fig)


def group_curves(seeds: Sequence[runs_lib.Seed]) -> dict[str, list[Curve]]:
  """`{algorithm: [curve of each seed]}` over the algorithms every seed holds.

  Raises:
    run_files.RunFileError: two seeds whose shared curves are equal round for round (the
      accuracy and the loss): one run counted twice (a copy, or a seed that draws nothing in
      its setting) would narrow the range and double the evidence.
  """
  shared = set.intersection(*(seed.algorithms() for seed in seeds))
  for i, seed in enumerate(seeds):
    for other in seeds[:i]:
      pairs = [(seed.curve(a), other.curve(a)) for a in sorted(shared)]
      if pairs and all(c is not None and d is not None and
                       (c.round, c.accuracy, c.loss) == (d.round, d.accuracy, d.loss)
                       for c, d in pairs):
        raise run_files.RunFileError(
            f'{"+".join(seed.refs)} and {"+".join(other.refs)} are one run twice (every curve '
            'equal, round for round): a copy, or a seed that draws nothing here. Count it once.')
  result: dict[str, list[Curve]] = collections.OrderedDict()
  for seed in seeds:
    for run_curves in seed.curves:
      for algorithm in run_curves:
        if algorithm in shared and algorithm not in result:
          result[algorithm] = []
  for algorithm in result:
    # Every seed has a shared algorithm's curve.
    result[algorithm] = [c for c in (seed.curve(algorithm) for seed in seeds) if c is not None]
  return result


def _draw_seed_curves(drawing: spec.SeedCurves, figure, results, folder) -> str:
  parts = []
  for name, group in drawing.groups.items():
    seeds = [
        results.seed(
            [results.resolve(r, figure.name)
             for r in ((ref,) if isinstance(ref, str) else ref)])
        for ref in group.seeds
    ]
    seeds = [s for s in seeds if s.refs]
    if not seeds:
      parts.append(f'**{group.title}**: no run has rounds yet.\n')
      continue
    try:
      curves = group_curves(seeds)
    except run_files.RunFileError as e:
      parts.append(f'**{group.title}**: not drawn: {e}\n')
      continue
    plot_seeds(curves, folder / f'{name}.png', group.title, drawing.metric)
    table = seed_table(curves, group.rounds, group.unit, drawing.metric)
    files.write_file(folder / f'{name}.md', table + '\n' + seed_orderings(curves, drawing.metric))
    parts.append(f'**{group.title}** (`{name}.png`; the orderings seed by seed: '
                 f'[`{name}.md`]({figure.name}/{name}.md)):\n\n{table}')
  return '\n'.join(parts)


# ---------------------------------------------------------------------------------------------
# Accuracy against a parameter of the runs.


def _draw_against(drawing: spec.AgainstParameter, figure, results, folder) -> str:
  seeds = results.select((figure.name,))
  points: dict = collections.defaultdict(lambda: collections.defaultdict(list))
  band = collections.defaultdict(list)
  banded = 'fedavg' not in drawing.algorithms
  for seed in seeds:
    x = seed.config.get(drawing.parameter)
    for r in drawing.rounds:
      for algorithm in seed.algorithms():
        value = seed.at(algorithm, r)
        if value is None:
          continue
        if algorithm == 'fedavg' and banded:
          band[r].append(value)
        elif algorithm in drawing.algorithms:
          points[(algorithm, r)][x].append(value)
  xs = sorted({x for by_x in points.values() for x in by_x})
  fig, axes = plt.subplots(1,
                           len(drawing.rounds),
                           figsize=(5.3 * len(drawing.rounds), 4.5),
                           sharey=True,
                           squeeze=False)
  for ax, r in zip(axes[0], drawing.rounds):
    for algorithm in drawing.algorithms:
      by_x: dict = points.get((algorithm, r), {})
      present = [x for x in xs if by_x.get(x)]
      if not present:
        continue
      color = registry.color(algorithm)
      ax.plot(present, [statistics.mean(by_x[x]) for x in present],
              'o-',
              color=color,
              label=label(algorithm))
      ax.fill_between(present, [min(by_x[x]) for x in present], [max(by_x[x]) for x in present],
                      color=color,
                      alpha=0.2)
    if band.get(r):
      ax.axhspan(min(band[r]),
                 max(band[r]),
                 color='gray',
                 alpha=0.25,
                 label=f'FedAvg ({len(band[r])} seeds; no {drawing.parameter})')
    if drawing.log_x:
      ax.set_xscale('log')
    ax.set_xlabel(drawing.parameter + (' (log scale)' if drawing.log_x else ''))
    ax.set_title(f'after {r} rounds')
    ax.grid(alpha=0.3)
  axes[0][0].set_ylabel('test accuracy (mean; band: min-max over seeds)')
  axes[0][0].legend(fontsize=8)
  fig.suptitle(figure.title)
  fig.tight_layout()
  files.write_figure(fig, folder / f'{drawing.name}.png', 100)
  plt.close(fig)
  lines = [
      f'| {drawing.parameter} | algorithm | ' + ' | '.join(f'round {r}' for r in drawing.rounds) +
      ' |', '|---:|---|' + '---:|' * len(drawing.rounds)
  ]
  for x in xs:
    for algorithm in drawing.algorithms:
      cells = [_cell(points.get((algorithm, r), {}).get(x, [])) for r in drawing.rounds]
      lines.append(f'| {x} | {label(algorithm)} | ' + ' | '.join(cells) + ' |')
  if banded:
    lines.append('| - | FedAvg | ' + ' | '.join(_cell(band.get(r, [])) for r in drawing.rounds) +
                 ' |')
  table = '\n'.join(lines) + '\n'
  files.write_file(folder / f'{drawing.name}.md', table)
  return (f'Test accuracy, mean [min, max] (seeds), against {drawing.parameter} '
          f'(`{drawing.name}.png`):\n\n{table}')


# ---------------------------------------------------------------------------------------------
# The update-masking cells.


def masking_rows(cell_dir: pathlib.Path) -> list[dict]:
  """One table row per process of a finished masking cell (`run_masking`'s run directory)."""
  summary = _summary(cell_dir)
  table = []
  for name in summary['config']['algorithms']:

    def column(metric: str, name: str = name) -> list:
      return [v for _, v in run_files.rows_of(cell_dir, name, metric)]

    survival = column('train/aggregator/survival/survival')
    normalized = column('train/aggregator/survival/survival_normalized')
    half = len(survival) // 2
    empirical = column('train/aggregator/survival/survival_empirical')
    accuracy = run_files.rows_of(cell_dir, name, 'eval/accuracy')
    table.append(
        dict(cell=cell_dir.name,
             process=name,
             rounds=summary['rounds'],
             mean_s=statistics.mean(survival),
             std_s=statistics.pstdev(survival),
             min_s=min(survival),
             max_s=max(survival),
             s_max=statistics.mean(column('train/aggregator/survival/s_max')),
             mean_s_normalized=statistics.mean(normalized),
             second_half_s=statistics.mean(survival[half:]),
             second_half_s_normalized=statistics.mean(normalized[half:]),
             mean_s_empirical=statistics.mean(empirical) if empirical else float('nan'),
             final_accuracy=summary['final_eval'][name]['accuracy'],
             accuracy_curve=' '.join(f'{r}:{a:.3f}' for r, a in accuracy)))
  return table


def masking_table(cells: Sequence[pathlib.Path], folder: pathlib.Path) -> str:
  """Writes `grid.csv`, `grid.md`, `survival_vs_accuracy.png` and `survival_curves.png` for the
  finished cells (those with a summary.json) into `folder`; returns grid.md.

  Raises:
    ValueError: no cell has finished.
  """
  cells = [pathlib.Path(c) for c in cells if (pathlib.Path(c) / 'summary.json').exists()]
  table = [row for cell in cells for row in masking_rows(cell)]
  if not table:
    raise ValueError(f'No finished cell among {[str(c) for c in cells] or "none"}.')
  folder.mkdir(parents=True, exist_ok=True)
  grid_csv = io.StringIO(newline='')
  writer = csv.DictWriter(grid_csv, fieldnames=list(table[0]))
  writer.writeheader()
  writer.writerows(table)
  files.write_file(folder / 'grid.csv', grid_csv.getvalue())
  lines = [
      '| cell | process | rounds | mean S (std, min-max) | S_max | mean S/S_max '
      '| 2nd half S (S/S_max) | mean S emp. | final acc |',
      '|---|---|---:|---|---:|---:|---|---:|---:|'
  ]
  for r in table:
    lines.append(f"| {r['cell']} | {r['process']} | {r['rounds']} | {r['mean_s']:.2f} "
                 f"({r['std_s']:.2f}, {r['min_s']:.2f}-{r['max_s']:.2f}) | {r['s_max']:.2f} | "
                 f"{r['mean_s_normalized']:.3f} | {r['second_half_s']:.2f} "
                 f"({r['second_half_s_normalized']:.3f}) | {r['mean_s_empirical']:.2f} | "
                 f"{r['final_accuracy']:.4f} |")
  markdown = '\n'.join(lines) + '\n'
  files.write_file(folder / 'grid.md', markdown)
  _plot_survival_against_accuracy(table, folder / 'survival_vs_accuracy.png')
  _plot_survival_curves(cells, folder / 'survival_curves.png')
  return markdown


def _plot_survival_curves(cells: Sequence[pathlib.Path], path: pathlib.Path) -> None:
  """S/S_max against the round, one line per cell and process (dimensionless, 0 to 1)."""
  styles = {'mask_none': '-', 'mask_independent': ':', 'mask_synchronized': '--'}
  fig, ax = plt.subplots(figsize=(8, 5))
  for cell in cells:
    algorithms = _summary(cell)['config']['algorithms']
    for name in algorithms:
      points = run_files.rows_of(cell, name, 'train/aggregator/survival/survival_normalized')
      text = cell.name if len(algorithms) == 1 else f'{cell.name} {name}'
      ax.plot([p[0] for p in points], [p[1] for p in points],
              styles.get(name, '-'),
              linewidth=1,
              label=text)
  ax.set_xlabel('round')
  ax.set_ylabel('S / S_max (1 = all of the masks\' regularization survives averaging)')
  ax.set_ylim(0, 1)
  ax.set_title('Update masking on CIFAR-10: survival over the rounds')
  ax.legend(fontsize=7)
  fig.tight_layout()
  files.write_figure(fig, path, 120)
  plt.close(fig)


def _plot_survival_against_accuracy(table, path: pathlib.Path) -> None:
  markers = {'mask_none': 'o', 'mask_independent': 's', 'mask_synchronized': '^'}
  colors = {'minibatch': 'tab:blue', 'fullbatch': 'tab:orange'}
  fig, ax = plt.subplots(figsize=(7, 5))
  for r in table:
    # A grid cell is `<local training>_<partition>` (colour, label); another (`batch32` of the
    # batch sweep) is labelled by its name.
    local, _, partition = r['cell'].partition('_')
    ax.scatter(r['mean_s_normalized'],
               r['final_accuracy'],
               marker=markers[r['process']],
               color=colors.get(local, 'gray'))
    ax.annotate(partition or r['cell'], (r['mean_s_normalized'], r['final_accuracy']),
                fontsize=6,
                xytext=(3, 2),
                textcoords='offset points')
  for process, marker in markers.items():
    ax.scatter([], [], marker=marker, color='gray', label=process)
  for local, color in colors.items():
    ax.scatter([], [], marker='s', color=color, label=local)
  ax.set_xlabel('mean S / S_max over rounds (1 = all regularization survives averaging)')
  ax.set_ylabel('final test accuracy')
  ax.set_title('Update masking on CIFAR-10: survival vs accuracy')
  ax.legend(fontsize=7)
  fig.tight_layout()
  files.write_figure(fig, path, 120)
  plt.close(fig)


def _draw_masking(drawing: spec.MaskingTable, figure, results, folder) -> str:
  del drawing
  cells = [results.path(ref) for ref in results.figure_runs(figure.name)]
  return masking_table(cells, folder)


# ---------------------------------------------------------------------------------------------
# How the gap scales with sparsity.


def fit_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
  """The least-squares slope of log(y) on log(x) (None with fewer than two points)."""
  points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
  if len(points) < 2:
    return None
  mean_x = statistics.mean(p[0] for p in points)
  mean_y = statistics.mean(p[1] for p in points)
  denominator = sum((p[0] - mean_x)**2 for p in points)
  if denominator == 0:
    return None
  return sum((p[0] - mean_x) * (p[1] - mean_y) for p in points) / denominator


def first_round_at_or_below(curve: Curve, target: float) -> int | None:
  """The first evaluated round whose loss is at most `target` (None if none is)."""
  return next((r for r, v in zip(curve.round, curve.loss) if v <= target), None)


def optimum(results, figure) -> float | None:
  """f* of the figure's objective (`spec.OPTIMUM_FILE` in its folder), None where absent."""
  path = results.root / figure.name / spec.OPTIMUM_FILE
  if not path.exists():
    return None
  try:
    f_star = float(json.loads(files.read_text(path))['f_star'])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise run_files.RunFileError(f'{path}: no f_star ({e}).') from e
  if not math.isfinite(f_star):  # Every gap would read as never reached: no verdict on it.
    raise run_files.RunFileError(f'{path}: f_star is {f_star}, not a number a loss can reach.')
  return f_star


def diagnostics(results, figure) -> list[str]:
  """A line for each diagnostic of a run of the figure (`spec.RESIDUAL_AGREEMENT_PREFIX`
  files in its folder, written by `experiments/residual_agreement.py`), oldest round first.

  Raises:
    run_files.RunFileError: a diagnostic file that is not one.
  """
  lines = []
  for run in figure.runs:
    folder = results.root / figure.name / run.name
    found = []
    for path in folder.glob(f'{spec.RESIDUAL_AGREEMENT_PREFIX}*.json'):
      try:
        value = json.loads(files.read_text(path))
        mean = {k: float(value['mean'][k]) for k in ('residual', 'halves', 'minibatch', 'cosine')}
        found.append((int(value['round']), str(value['algorithm']), mean, str(value['command'])))
      except (OSError, ValueError, KeyError, TypeError) as e:
        raise run_files.RunFileError(f'{path}: not a residual agreement ({e}).') from e
    for round_num, algorithm, mean, command in sorted(found):
      pulls = 'pulls' if algorithm == 'flare' else 'would pull'  # EC's: the control.
      lines.append(
          f'{run.name}, {registry.label(algorithm)} after round {round_num - 1}: over the '
          f"entries FLARE's mask {pulls}, the residual's signs agree with a large-batch descent "
          f'direction on {mean["residual"]:.3f} of them, the two halves of that reference with '
          f'each other on {mean["halves"]:.3f}, one batch of the run with it on '
          f'{mean["minibatch"]:.3f} (a coin: 0.5); cosine {mean["cosine"]:.3f} (`{command}`)')
  return lines


def is_monotone(losses: Sequence[float]) -> bool:
  """No loss above the lowest before it by more than `spec.MONOTONE_SLACK` of it."""
  lowest = math.inf
  for value in losses:
    if value > lowest * (1 + spec.MONOTONE_SLACK):
      return False
    lowest = min(lowest, value)
  return True


@dataclasses.dataclass
class ScalingPoint:
  """One (R, seed, algorithm) of the scaling study."""
  keep_percent: float
  seed: int
  algorithm: str
  density: float  # delta: the fraction of the model's entries a client sent, mean over rounds.
  rounds_to: dict  # {gap: the first round within `gap` of f*, or None (not yet)}
  last_round: int  # Where an unreached gap is censored.


def scaling_points(drawing: spec.SparsityScaling, figure, results,
                   f_star: float) -> list[ScalingPoint]:
  """Every run's measures (see `spec.SparsityScaling`), the TAU runs left out."""
  points = []
  for seed in results.select((figure.name,)):
    if seed.refs[0].rsplit('/', 1)[-1].startswith(drawing.tau_runs):
      continue
    path = results.path(seed.refs[0])
    for algorithm in drawing.algorithms:
      curve = seed.curve(algorithm)
      if curve is None:
        continue
      density = [
          v for _, v in run_files.rows_of(path, algorithm, 'train/aggregator/communication/density')
      ]
      points.append(
          ScalingPoint(
              keep_percent=seed.config.get('keep_percent'),
              seed=seed.config.get('seed'),
              algorithm=algorithm,
              density=statistics.mean(density) if density else float('nan'),
              rounds_to={g: first_round_at_or_below(curve, f_star + g) for g in drawing.gaps},
              last_round=curve.last_round))
  return points


# Two-sided 95 % quantiles of Student's t by degrees of freedom (more: the normal's).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228
}


@dataclasses.dataclass
class Exponent:
  """An algorithm's fitted exponent of rounds in delta (rounds ~ delta^exponent)."""
  mean: float | None  # Over seeds; None without two usable R.
  half_width: float | None  # Of the 95 % t-interval over seeds; None with one seed.
  seeds: int
  percents: tuple  # The R fitted on: sparse, and reached by every seed.
  censored: tuple  # The sparse R some seed has not reached (left out of the fit).

  def text(self) -> str:
    if self.mean is None:
      return '-'
    spread = f' +- {self.half_width:.2f}' if self.half_width is not None else ''
    left = f'; {len(self.censored)} R censored' if self.censored else ''
    return (f'{self.mean:.2f}{spread} ({self.seeds} seeds, {len(self.percents)} R{left})')


def exponent(points: Sequence[ScalingPoint], algorithm: str, gap: float,
             sparse_at_most: float) -> Exponent:
  """The exponent of `algorithm`'s rounds to `gap` in delta (see `spec.SparsityScaling`)."""
  mine = [p for p in points if p.algorithm == algorithm]
  seeds = sorted({p.seed for p in mine})
  by_percent: dict[float, dict] = collections.defaultdict(dict)
  for p in mine:
    by_percent[p.keep_percent][p.seed] = p
  sparse = [
      r for r in sorted(by_percent, reverse=True)
      if len(by_percent[r]) == len(seeds) and max(p.density
                                                  for p in by_percent[r].values()) <= sparse_at_most
  ]
  usable = [r for r in sparse if all(p.rounds_to.get(gap) for p in by_percent[r].values())]
  censored = tuple(r for r in sparse if r not in usable)
  fitted = [
      fit_slope([by_percent[r][s].density
                 for r in usable], [by_percent[r][s].rounds_to[gap]
                                    for r in usable])
      for s in seeds
  ]
  slopes = [slope for slope in fitted if slope is not None]
  if len(usable) < 2 or not fitted or len(slopes) < len(fitted):
    return Exponent(None, None, len(seeds), tuple(usable), censored)
  half = (_T95.get(len(slopes) - 1, 1.96) * statistics.stdev(slopes) /
          math.sqrt(len(slopes)) if len(slopes) > 1 else None)
  return Exponent(statistics.mean(slopes), half, len(seeds), tuple(usable), censored)


def _tau_curves(drawing: spec.SparsityScaling, figure, results) -> dict[float, Curve]:
  """FLARE's curve in each run that chose TAU, by TAU."""
  curves = {}
  for seed in results.select((figure.name,)):
    if seed.refs[0].rsplit('/', 1)[-1].startswith(drawing.tau_runs):
      curve = seed.curve(drawing.algorithms[0])
      if curve is not None:
        curves[seed.config.get('tau')] = curve
  return curves


def chosen_tau(drawing: spec.SparsityScaling, figure, results) -> tuple[float | None, dict]:
  """`(the TAU of the study's runs, {TAU of the grid: monotone})`."""
  taus = {
      seed.config.get('tau')
      for seed in results.select((figure.name,))
      if not seed.refs[0].rsplit('/', 1)[-1].startswith(drawing.tau_runs)
  }
  grid = {
      tau: is_monotone(c.loss) for tau, c in sorted(_tau_curves(drawing, figure, results).items())
  }
  return (taus.pop() if len(taus) == 1 else None), grid


def _draw_scaling(drawing: spec.SparsityScaling, figure, results, folder) -> str:
  f_star = optimum(results, figure)
  if f_star is None:
    return (f'f* is not computed yet (`{spec.OPTIMUM_FILE}`: python -m experiments.optimum '
            '--data_dir=DATA).\n')
  points = scaling_points(drawing, figure, results, f_star)
  if not points:
    return 'No run has rounds yet.\n'
  tau, grid = chosen_tau(drawing, figure, results)
  fig, axes = plt.subplots(1,
                           len(drawing.gaps) + 1,
                           figsize=(5.0 * (len(drawing.gaps) + 1), 4.4),
                           squeeze=False)
  exponents = {}
  for ax, gap in zip(axes[0], drawing.gaps):
    for algorithm in drawing.algorithms:
      fitted = exponents[(gap, algorithm)] = exponent(points, algorithm, gap,
                                                      drawing.sparse_at_most)
      by_percent = collections.defaultdict(list)
      for p in points:
        if p.algorithm == algorithm:
          by_percent[p.keep_percent].append(p)
      color = registry.color(algorithm)
      for group in by_percent.values():
        x = statistics.mean(p.density for p in group)
        values = [p.rounds_to[gap] or p.last_round for p in group]
        reached = all(p.rounds_to[gap] for p in group)
        ax.plot([x], [statistics.mean(values)],
                'o' if reached else '^',
                color=color,
                markerfacecolor=color if reached else 'none')
      text = f'{label(algorithm)}: exponent {fitted.text()}'
      ax.plot([], [], 'o-', color=color, label=text)
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('kept fraction delta (measured density, log)')
    ax.set_ylabel('rounds (open triangles: not reached, a lower bound)')
    ax.set_title(f'rounds to f(x) - f* <= {gap:g}', fontsize=9)
    ax.grid(alpha=0.3, which='both')
    ax.legend(fontsize=7)
  ax = axes[0][-1]
  for t, curve in sorted(_tau_curves(drawing, figure, results).items()):
    ax.plot(curve.round, [max(v - f_star, 1e-6) for v in curve.loss],
            label=f'TAU {t:g}: {"monotone" if grid[t] else "not monotone"}' +
            (' (chosen)' if t == tau else ''),
            linewidth=2.5 if t == tau else 1.2)
  ax.set_yscale('log')
  ax.set_xlabel('round')
  ax.set_title('choosing TAU: FLARE, one R, seed 0: f(x) - f*', fontsize=9)
  ax.grid(alpha=0.3, which='both')
  ax.legend(fontsize=7)
  fig.suptitle(figure.title)
  fig.tight_layout()
  files.write_figure(fig, folder / 'scaling.png', 100)
  plt.close(fig)
  lines = [
      '| R (%) | algorithm | delta | ' +
      ' | '.join(f'rounds to f - f* <= {g:g}' for g in drawing.gaps) + ' |',
      '|---:|---|---:|' + '---:|' * len(drawing.gaps)
  ]
  for percent in sorted({p.keep_percent for p in points}, reverse=True):
    for algorithm in drawing.algorithms:
      group = [p for p in points if p.algorithm == algorithm and p.keep_percent == percent]
      if not group:
        continue
      cells = []
      for gap in drawing.gaps:
        missed = [p for p in group if p.rounds_to[gap] is None]
        cells.append(f'> {min(p.last_round for p in missed)} (not reached in {len(missed)} of '
                     f'{len(group)})' if missed else _cell([p.rounds_to[gap] for p in group]))
      density = statistics.mean(p.density for p in group)
      lines.append(f'| {percent} | {label(algorithm)} | {density:.3g} | ' + ' | '.join(cells) +
                   ' |')
  lines.append(f'| exponent (delta <= {drawing.sparse_at_most:g}) | | | ' +
               ' | '.join('; '.join(f'{label(a)} {exponents[(g, a)].text()}'
                                    for a in drawing.algorithms)
                          for g in drawing.gaps) + ' |')
  table = '\n'.join(lines) + '\n'
  files.write_file(folder / 'scaling.md', table)
  choice = ', '.join(f'{t:g} {"monotone" if m else "not monotone"}' for t, m in grid.items())
  return (f'f* = {f_star:.6f} (`{spec.OPTIMUM_FILE}`). TAU {tau}, chosen on the grid '
          f'({choice or "not run yet"}). Per R: delta, and the rounds to each suboptimality, '
          'mean [min, max] (seeds), or the round a seed had not reached it by; the last row '
          'fits log(rounds) on log(delta) per seed over the sparse R every seed reached, mean '
          f'+- the 95 % t-interval (`scaling.png`; the bounds: FLARE -0.5, EC -1):\n\n{table}')


# ---------------------------------------------------------------------------------------------

_DRAWERS: dict[type, Callable[..., str]] = {
    spec.SeedCurves: _draw_seed_curves,
    spec.AgainstParameter: _draw_against,
    spec.MaskingTable: _draw_masking,
    spec.SparsityScaling: _draw_scaling
}


def draw(figure: spec.Figure, results: runs_lib.Results, folder: pathlib.Path) -> str:
  """Makes the figure's drawings into `folder`; returns their markdown."""
  folder.mkdir(parents=True, exist_ok=True)
  return '\n'.join(_DRAWERS[type(d)](d, figure, results, folder) for d in figure.draw)
