r"""Paper-style figures from one or more runs of `run_experiment` (PNG).

For each run directory: test accuracy and test loss against the round, and test accuracy
against the cumulative bytes uploaded by the clients, one line per algorithm.

  python -m experiments.plot runs/cnn3 --output=experiments/results/cnn3.png
"""

import csv
import pathlib

from absl import app
from absl import flags
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position

_OUTPUT = flags.DEFINE_string('output', None, 'PNG file to write.')
flags.mark_flag_as_required('output')


def read_curves(metrics_csv: pathlib.Path) -> dict[str, dict[str, list[float]]]:
  """`{algorithm: {'round': [...], 'accuracy': [...], 'loss': [...], 'bytes': [...]}}`.

  `bytes` is the cumulative upload before the round of each evaluation (evaluations happen
  before a round's training; the last row, after the final round, has no training).
  """
  with open(metrics_csv, newline='') as f:
    rows = list(csv.DictReader(f))
  algorithms = sorted({key.split('/')[0] for key in rows[0] if '/eval/accuracy' in key})
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


def main(argv):
  if len(argv) < 2:
    raise app.UsageError('Give one or more run directories.')
  plot_runs(argv[1:], _OUTPUT.value)
  print(f'wrote {_OUTPUT.value}')


if __name__ == '__main__':
  app.run(main)
