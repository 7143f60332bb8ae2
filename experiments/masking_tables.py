"""The update-masking grid's tables and plots, from its cells' run directories.

A cell is one run of `experiments/run_masking.py` (one local training kind and partition,
`<local>_<partition>`: `minibatch_iid`, `fullbatch_dir0.1`, ...). `write_table(cells, folder)`
writes `grid.csv` and `grid.md` (a row per cell and process: mean S over the rounds, its
spread, mean S/S_max, S and S/S_max over the second half of the rounds, the mean empirical S,
the final test accuracy), `survival_vs_accuracy.png` (mean S/S_max against final accuracy)
and `survival_curves.png` (S/S_max against the round). S is dimensionless (`docs/masking.md`).
"""

import csv
import json
import pathlib
import statistics
from collections.abc import Sequence


def partition_flags(name: str) -> dict:
  """`iid` / `dir<alpha>` / `qskew<ratio>` as the binaries' flags."""
  if name == 'iid':
    return dict(partition='iid')
  if name.startswith('dir'):
    return dict(partition='dirichlet', alpha=float(name[3:]))
  if name.startswith('qskew'):
    return dict(partition='quantity_skew', ratio=float(name[5:]))
  raise ValueError(f'Unknown partition {name!r}: use iid, dir<alpha> or qskew<ratio>.')


def _floats(rows, column):
  return [float(r[column]) for r in rows if r.get(column, '') not in ('', None)]


def summarize_cell(cell_dir: pathlib.Path) -> list[dict]:
  """One table row per process of a finished cell (reads metrics.csv and summary.json)."""
  with open(cell_dir / 'metrics.csv') as f:
    rows = list(csv.DictReader(f))
  summary = json.loads((cell_dir / 'summary.json').read_text())
  table = []
  for name in summary['config']['algorithms']:
    survival = _floats(rows, f'{name}/train/survival/survival')
    normalized = _floats(rows, f'{name}/train/survival/survival_normalized')
    half = len(survival) // 2
    empirical = _floats(rows, f'{name}/train/survival/survival_empirical')
    accuracy_curve = [(int(r['round']), float(r[f'{name}/eval/accuracy'])) for r in rows
                      if r.get(f'{name}/eval/accuracy', '') != '']
    table.append(dict(
        cell=cell_dir.name, process=name, rounds=summary['rounds'],
        mean_s=statistics.mean(survival), std_s=statistics.pstdev(survival),
        min_s=min(survival), max_s=max(survival),
        s_max=statistics.mean(_floats(rows, f'{name}/train/survival/s_max')),
        mean_s_normalized=statistics.mean(normalized),
        second_half_s=statistics.mean(survival[half:]),
        second_half_s_normalized=statistics.mean(normalized[half:]),
        mean_s_empirical=statistics.mean(empirical) if empirical else float('nan'),
        final_accuracy=summary['final_eval'][name]['accuracy'],
        accuracy_curve=' '.join(f'{r}:{a:.3f}' for r, a in accuracy_curve)))
  return table


def write_table(cells: Sequence[pathlib.Path], output_dir: pathlib.Path) -> str:
  """Writes the grid's files for these cell directories into `output_dir`; returns grid.md.

  Raises:
    ValueError: no cell has finished (no `summary.json`).
  """
  cells = [pathlib.Path(c) for c in cells if (pathlib.Path(c) / 'summary.json').exists()]
  table = [row for cell in cells for row in summarize_cell(cell)]
  if not table:
    raise ValueError(f'No finished cell among {[str(c) for c in cells] or "none"}.')
  with open(output_dir / 'grid.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(table[0]))
    writer.writeheader()
    writer.writerows(table)
  lines = ['| cell | process | rounds | mean S (std, min-max) | S_max | mean S/S_max '
           '| 2nd half S (S/S_max) | mean S emp. | final acc |',
           '|---|---|---:|---|---:|---:|---|---:|---:|']
  for r in table:
    lines.append(f"| {r['cell']} | {r['process']} | {r['rounds']} | {r['mean_s']:.2f} "
                 f"({r['std_s']:.2f}, {r['min_s']:.2f}-{r['max_s']:.2f}) | {r['s_max']:.2f} | "
                 f"{r['mean_s_normalized']:.3f} | {r['second_half_s']:.2f} "
                 f"({r['second_half_s_normalized']:.3f}) | {r['mean_s_empirical']:.2f} | "
                 f"{r['final_accuracy']:.4f} |")
  markdown = '\n'.join(lines) + '\n'
  (output_dir / 'grid.md').write_text(markdown)
  _plot(table, output_dir / 'survival_vs_accuracy.png')
  _plot_curves(cells, output_dir / 'survival_curves.png')
  return markdown


def _plot_curves(cells: list[pathlib.Path], path: pathlib.Path) -> None:
  """S/S_max against the round, one line per cell and process (dimensionless, 0 to 1)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  styles = {'mask_none': '-', 'mask_independent': ':', 'mask_synchronized': '--'}
  fig, ax = plt.subplots(figsize=(8, 5))
  for cell in cells:
    with open(cell / 'metrics.csv') as f:
      rows = list(csv.DictReader(f))
    algorithms = json.loads((cell / 'summary.json').read_text())['config']['algorithms']
    for name in algorithms:
      column = f'{name}/train/survival/survival_normalized'
      points = [(int(r['round']), float(r[column])) for r in rows if r.get(column, '') != '']
      label = cell.name if len(algorithms) == 1 else f'{cell.name} {name}'
      ax.plot([p[0] for p in points], [p[1] for p in points], styles.get(name, '-'),
              linewidth=1, label=label)
  ax.set_xlabel('round')
  ax.set_ylabel('S / S_max (1 = all of the masks\' regularization survives averaging)')
  ax.set_ylim(0, 1)
  ax.set_title('Update masking on CIFAR-10: survival over the rounds')
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def _plot(table, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  markers = {'mask_none': 'o', 'mask_independent': 's', 'mask_synchronized': '^'}
  colors = {'minibatch': 'tab:blue', 'fullbatch': 'tab:orange'}
  fig, ax = plt.subplots(figsize=(7, 5))
  for r in table:
    # A grid cell is `<local training>_<partition>` (colour, label); another (`batch32` of the
    # batch sweep) is labelled by its name.
    local, _, partition = r['cell'].partition('_')
    ax.scatter(r['mean_s_normalized'], r['final_accuracy'], marker=markers[r['process']],
               color=colors.get(local, 'gray'))
    ax.annotate(partition or r['cell'], (r['mean_s_normalized'], r['final_accuracy']),
                fontsize=6, xytext=(3, 2), textcoords='offset points')
  for process, marker in markers.items():
    ax.scatter([], [], marker=marker, color='gray', label=process)
  for local, color in colors.items():
    ax.scatter([], [], marker='s', color=color, label=local)
  ax.set_xlabel('mean S / S_max over rounds (1 = all regularization survives averaging)')
  ax.set_ylabel('final test accuracy')
  ax.set_title('Update masking on CIFAR-10: survival vs accuracy')
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
