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
quantity skew 100x. Each cell is a run of `experiments/run_masking.py` made by the same
machinery as `experiments/reproduce.py` (`experiments/schedule.py`): a finished cell is
skipped only if it was made with the same flags (else exit 2: another configuration is in
that directory), an interrupted cell resumes from its checkpoint, `--jobs` cells run at once.

Outputs in --output_dir: `grid.csv` and `grid.md` (a row per cell and process: mean S, its
spread over rounds, mean S/S_max, mean S and S/S_max over the second half of the rounds, mean
empirical S, final test accuracy), `survival_vs_accuracy.png` (mean S/S_max against final
accuracy, one point per row) and `survival_curves.png` (S/S_max against the round). With
`--processes=mask_none` a cell trains FedAvg alone and still measures its survival.
"""

import pathlib
from typing import Any, cast

from absl import flags

from experiments import binary
from experiments import charts
from experiments import config_flags
from experiments import manifest
from experiments import presets
from experiments import schedule
from experiments import spec
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib

_OUTPUT_DIR = binary.path_flag(flags.DEFINE_string('output_dir', None, 'Grid directory.'))
flags.mark_flag_as_required('output_dir')
# The grid's defaults for the configuration's fields (their help is the fields').
_CELL = config_flags.define(('source', 'data_path', 'rounds', 'eval_every', 'keep_probability',
                             'num_mask_draws', 'batch_size', 'learning_rate', 'momentum', 'seed'),
                            defaults=dict(source='tfds',
                                          rounds=10,
                                          eval_every=5,
                                          keep_probability=0.5,
                                          num_mask_draws=4,
                                          batch_size=32,
                                          learning_rate=0.02,
                                          momentum=0.9))
_MINIBATCH_EPOCHS = flags.DEFINE_integer('minibatch_epochs',
                                         1,
                                         'Minibatch local epochs.',
                                         lower_bound=1)
_FULLBATCH_STEPS = flags.DEFINE_integer('fullbatch_steps',
                                        2,
                                        'Full-batch local steps.',
                                        lower_bound=1)
_FULLBATCH_LR = flags.DEFINE_float('fullbatch_learning_rate', 0.05,
                                   'Full-batch client learning rate.')
# The masking study's processes.
_STUDY = cast(tuple[str, ...], presets.MASKING_STUDY['algorithms'])
_LOCAL = flags.DEFINE_list('local_training', ['minibatch', 'fullbatch'], 'Local training kinds.')
_PARTITIONS = flags.DEFINE_list('partitions', list(manifest.PARTITIONS),
                                'Partitions: iid, dir<alpha>, qskew<ratio>.')
_PROCESSES = flags.DEFINE_list(
    'processes', list(_STUDY),
    'Processes trained side by side in each cell. S is measured on the deltas, so '
    '`mask_none` alone gives a cell\'s survival curve.')
_JOBS = flags.DEFINE_integer('jobs',
                             1,
                             'Cells run at once (each on its own core when > 1).',
                             lower_bound=1,
                             upper_bound=1024)
_SUMMARIZE_ONLY = flags.DEFINE_bool('summarize_only', False, 'Only rebuild the table/plots.')
_EXECUTION = config_flags.define(config_flags.EXECUTION_FIELDS)


def cell_run(local: str, partition: str) -> spec.Run:
  """The run of one cell: `run_masking` with the grid's flags (`docs/masking.md`).

  Raises:
    ValueError: an unknown local training kind, partition or process.
  """
  cell = config_flags.values(_CELL)
  values: dict[str, Any] = dict(spec.partition_option(partition).flags)
  defaults = config_lib.ExperimentConfig()
  config_lib.check_partition(values['partition'], values.get('alpha', defaults.alpha),
                             values.get('ratio', defaults.ratio))
  if local == 'minibatch':
    values.update(batch_size=cell['batch_size'],
                  local_epochs=_MINIBATCH_EPOCHS.value,
                  learning_rate=cell['learning_rate'])
  elif local == 'fullbatch':
    values.update(batch_size=0,
                  local_epochs=_FULLBATCH_STEPS.value,
                  learning_rate=_FULLBATCH_LR.value)
  else:
    raise ValueError(f'Unknown local training {local!r}: minibatch or fullbatch.')
  processes = tuple(_PROCESSES.value)
  study = _STUDY
  if not processes or any(p not in study for p in processes):
    raise ValueError(f'--processes={",".join(processes)}: choose from {", ".join(study)} '
                     '(the grid tabulates their survival).')
  values.update(algorithms=','.join(processes),
                eval_every=cell['eval_every'],
                momentum=cell['momentum'],
                keep_probability=cell['keep_probability'],
                num_mask_draws=cell['num_mask_draws'],
                seed=cell['seed'],
                source=cell['source'])
  if cell['data_path']:
    values['data_path'] = cell['data_path']
  return spec.Run(f'{local}_{partition}', values, rounds=cell['rounds'], binary=spec.RUN_MASKING)


def grid_runs() -> list[spec.Run]:
  """The cells the flags ask for."""
  return [cell_run(local, partition) for local in _LOCAL.value for partition in _PARTITIONS.value]


def _execution_args() -> list[str]:
  fields = config_flags.values(_EXECUTION)
  args = [f'--execution={fields["execution"]}']
  if fields['workers']:
    args.append(f'--workers={",".join(fields["workers"])}')
  args.append(f'--worker_timeout_s={fields["worker_timeout_s"]}')
  if fields['client_threads'] is not None:
    args.append(f'--client_threads={fields["client_threads"]}')
  return args


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  cleanup.install_process_cleanup('Interrupted; run the same command again to resume.')
  folder = pathlib.Path(_OUTPUT_DIR.value)
  if folder.exists() and not folder.is_dir():
    raise binary.BadInput(f'--output_dir={folder} is not a directory.')
  try:
    cells = grid_runs()
    # The grid is a figure whose folder is --output_dir.
    figure = spec.Figure(name=folder.name, title='update-masking grid', paper='Masking')
    if not _SUMMARIZE_ONLY.value:
      status = schedule.execute([(figure, run) for run in cells],
                                folder.parent,
                                data_dir='',
                                jobs=_JOBS.value,
                                pin=_JOBS.value > 1,
                                execution_args=_execution_args())
      if status:
        return status
    table = charts.masking_table([folder / run.name for run in cells], folder)
  except (ValueError, schedule.ReproduceError) as e:
    raise binary.BadInput(str(e)) from e
  print(table)
  print(f'plots in {folder / "survival_vs_accuracy.png"} and {folder / "survival_curves.png"}')
  return 0


if __name__ == '__main__':
  binary.run(main)
