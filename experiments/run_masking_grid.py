r"""Runs the update-masking grid (`docs/masking.md`) and tabulates survival against accuracy.

  python -m experiments.run_masking_grid --source=imagefolder \
      --data_path=../shared/datasets/cifar10_imagefolder.tar.gz --rounds=10 \
      --output_dir=runs/masking_grid
  python -m experiments.run_masking_grid --output_dir=runs/masking_grid --summarize_only

A cell is (local training, partition); each cell runs `mask_none`, `mask_independent` and
`mask_synchronized` side by side (`experiments/run_masking.py`'s configuration: the small CNN
on CIFAR-10, 100 clients, 10 per round), in `<output_dir>/<local training>_<partition>/`.
Local training: `minibatch` (batch --batch_size, --minibatch_epochs epochs) or `fullbatch`
(--fullbatch_steps gradient steps on the whole client, learning rate
--fullbatch_learning_rate); SGD with --momentum, re-initialized every round. Partitions: iid, dirichlet with alpha 100, 1, 0.5, 0.1, and
quantity skew 100x. A cell whose summary.json exists is skipped, so an interrupted grid
resumes (and a cell interrupted mid-way resumes from its checkpoint).

Outputs in --output_dir: `grid.csv` and `grid.md` (a row per cell and process: mean S, its
spread over rounds, mean S/S_max, mean S and S/S_max over the second half of the rounds, mean
empirical S, final test accuracy), `survival_vs_accuracy.png` (mean S/S_max against final
accuracy, one point per row) and `survival_curves.png` (S/S_max against the round). With
`--processes=mask_none` a cell trains FedAvg alone and still measures its survival.
"""

import csv
import dataclasses
import json
import pathlib
import statistics
import sys

from absl import app
from absl import flags

from experiments import execution_flags
from experiments import presets
from tff_flare.execution import cleanup
from tff_flare.execution import remote
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner
from tff_flare.simulation import hooks

_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Grid directory.')
flags.mark_flag_as_required('output_dir')
_SOURCE = flags.DEFINE_string('source', 'tfds', 'Data source of CIFAR-10.')
_DATA_PATH = flags.DEFINE_string('data_path', None, 'File or folder of a local source.')
_ROUNDS = flags.DEFINE_integer('rounds', 10, 'Rounds per cell.', lower_bound=1)
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 5, 'Evaluate every this many rounds.',
                                   lower_bound=1)
_Q = flags.DEFINE_float('keep_probability', 0.5, 'Keep probability q of the masks.')
_DRAWS = flags.DEFINE_integer('num_mask_draws', 4, 'Empirical mask draws per mode and round.',
                              lower_bound=0)
_BATCH = flags.DEFINE_integer('batch_size', 32, 'Minibatch size.', lower_bound=1)
_MINIBATCH_EPOCHS = flags.DEFINE_integer('minibatch_epochs', 1, 'Minibatch local epochs.',
                                         lower_bound=1)
_LR = flags.DEFINE_float('learning_rate', 0.02, 'Minibatch client learning rate.')
_MOMENTUM = flags.DEFINE_float('momentum', 0.9, 'Client momentum (both kinds; fresh each round).')
_FULLBATCH_STEPS = flags.DEFINE_integer('fullbatch_steps', 2, 'Full-batch local steps.',
                                        lower_bound=1)
_FULLBATCH_LR = flags.DEFINE_float('fullbatch_learning_rate', 0.05,
                                   'Full-batch client learning rate.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of partitions, sampling and masks.')
_LOCAL = flags.DEFINE_list('local_training', ['minibatch', 'fullbatch'], 'Local training kinds.')
_PARTITIONS = flags.DEFINE_list(
    'partitions', ['iid', 'dir100', 'dir1', 'dir0.5', 'dir0.1', 'qskew100'],
    'Partitions: iid, dir<alpha>, qskew<ratio>.')
_PROCESSES = flags.DEFINE_list(
    'processes', list(presets.MASKING_STUDY['algorithms']),
    'Processes trained side by side in each cell. S is measured on the deltas, so '
    '`mask_none` alone gives a cell\'s survival curve.')
_SUMMARIZE_ONLY = flags.DEFINE_bool('summarize_only', False, 'Only rebuild the table/plots.')

def partition_options(name: str) -> dict:
  """`iid` / `dir<alpha>` / `qskew<ratio>` to ExperimentConfig fields."""
  if name == 'iid':
    return dict(partition='iid')
  if name.startswith('dir'):
    return dict(partition='dirichlet', alpha=float(name[3:]))
  if name.startswith('qskew'):
    return dict(partition='quantity_skew', ratio=float(name[5:]))
  raise ValueError(f'Unknown partition {name!r}: use iid, dir<alpha> or qskew<ratio>.')


def cell_config(local: str, partition: str, output_dir: pathlib.Path
                ) -> config_lib.ExperimentConfig:
  values = dict(presets.MASKING_STUDY)
  values.update(partition_options(partition))
  if local == 'minibatch':
    values.update(batch_size=_BATCH.value, local_epochs=_MINIBATCH_EPOCHS.value,
                  learning_rate=_LR.value)
  elif local == 'fullbatch':
    values.update(batch_size=0, local_epochs=_FULLBATCH_STEPS.value,
                  learning_rate=_FULLBATCH_LR.value)
  else:
    raise ValueError(f'Unknown local training {local!r}: minibatch or fullbatch.')
  processes = tuple(_PROCESSES.value)
  study = presets.MASKING_STUDY['algorithms']
  if not processes or any(p not in study for p in processes):
    raise ValueError(f'--processes={",".join(processes)}: choose from {", ".join(study)} '
                     '(the grid tabulates their survival).')
  values.update(algorithms=processes, rounds=_ROUNDS.value, eval_every=_EVAL_EVERY.value,
                momentum=_MOMENTUM.value, keep_probability=_Q.value,
                num_mask_draws=_DRAWS.value, seed=_SEED.value, source=_SOURCE.value,
                data_path=_DATA_PATH.value)
  return config_lib.ExperimentConfig(output_dir=str(output_dir / f'{local}_{partition}'),
                                     **values)


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


def write_table(output_dir: pathlib.Path) -> list[dict]:
  cells = sorted(p.parent for p in output_dir.glob('*/summary.json'))
  table = [row for cell in cells for row in summarize_cell(cell)]
  if not table:
    raise ValueError(f'No finished cell under {output_dir}.')
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
  (output_dir / 'grid.md').write_text('\n'.join(lines) + '\n')
  _plot(table, output_dir / 'survival_vs_accuracy.png')
  _plot_curves(cells, output_dir / 'survival_curves.png')
  return table


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


def _plot(table, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  markers = {'mask_none': 'o', 'mask_independent': 's', 'mask_synchronized': '^'}
  colors = {'minibatch': 'tab:blue', 'fullbatch': 'tab:orange'}
  fig, ax = plt.subplots(figsize=(7, 5))
  for r in table:
    local = r['cell'].split('_', 1)[0]
    ax.scatter(r['mean_s_normalized'], r['final_accuracy'], marker=markers[r['process']],
               color=colors.get(local, 'gray'))
    ax.annotate(r['cell'].split('_', 1)[1], (r['mean_s_normalized'], r['final_accuracy']),
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


def main(argv):
  del argv
  cleanup.install_process_cleanup('Interrupted; run the same command again to resume.')
  output_dir = pathlib.Path(_OUTPUT_DIR.value)
  if not _SUMMARIZE_ONLY.value:
    try:
      configs = [dataclasses.replace(cell_config(local, partition, output_dir),
                                     **execution_flags.config_fields())
                 for local in _LOCAL.value for partition in _PARTITIONS.value]
      for config in configs:
        config_lib.validate(config)
    except ValueError as e:
      print(f'error: {e}', file=sys.stderr)
      return 2
    for config in configs:
      if (pathlib.Path(config.output_dir) / 'summary.json').exists():
        print(f'{config.output_dir}: done, skipped', flush=True)
        continue
      print(f'== {config.output_dir}', flush=True)
      try:
        runner.run_experiment(config, log=lambda line: print(line, flush=True))
      except config_lib.ConfigError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
      except remote.WorkerUnavailableError as e:
        print(f'error: {e}', file=sys.stderr)
        return 3
      except hooks.NonFiniteRoundError as e:
        print(f'error: {e}', file=sys.stderr)
        return 4
  try:
    table = write_table(output_dir)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print((output_dir / 'grid.md').read_text())
  print(f'{len(table)} rows; plots in {output_dir / "survival_vs_accuracy.png"} and '
        f'{output_dir / "survival_curves.png"}')
  return 0


if __name__ == '__main__':
  app.run(main)
