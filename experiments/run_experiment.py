r"""Runs FLARE and its baselines side by side on one task; resumable.

  python -m experiments.run_experiment --preset=cnn_unavailable_3 --rounds=300 \
      --source=npz --data_path=../shared/datasets/mnist.npz --output_dir=runs/cnn3

`--preset` loads one of the authors' configurations (tff_flare/presets.py); every flag given
explicitly overrides it. Without a preset the flags' defaults apply. Output in --output_dir:
metrics.csv and tensorboard/ (per round, through tff.program release managers), summary.json,
checkpoints/ (start the same command again to resume). Plot with experiments/plot.py.

On TFF workers instead of this process (start `python -m tff_flare.worker --port=8000` on
each machine first):

  python -m experiments.run_experiment ... --execution=remote --workers=h1:8000,h2:8000

A worker that is down, or unreachable for --worker_timeout_s during a round, stops the run
with an error naming it (exit status 3); start the same command again once it is back.
"""

import sys

from absl import app
from absl import flags

from tff_flare import execution_flags
from tff_flare import experiment
from tff_flare import masking
from tff_flare import presets
from tff_flare import remote
from tff_flare import runtime
from tff_flare import tasks

_PRESET = flags.DEFINE_enum('preset', None, sorted(presets.PRESETS),
                            'One of the authors\' configurations; explicit flags override it.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Where results and checkpoints go.')
flags.mark_flag_as_required('output_dir')

_FIELDS = {
    'task': flags.DEFINE_enum('task', 'digits_demo', list(tasks.TASK_NAMES), 'Task name.'),
    'algorithms': flags.DEFINE_list(
        'algorithms', ['flare', 'ec', 'fedavg'],
        f'Algorithms to run side by side: {", ".join(experiment.ALGORITHMS)}.'),
    'rounds': flags.DEFINE_integer('rounds', 10, 'Rounds of training.'),
    'total_clients': flags.DEFINE_integer('total_clients', None,
                                          'Clients the data is split into (task default).'),
    'num_clients': flags.DEFINE_integer('num_clients', None,
                                        'Clients in use, the first of the split.'),
    'clients_per_round': flags.DEFINE_integer(
        'clients_per_round', None, 'Clients sampled each round (client unavailability); '
        'default: all clients in use.'),
    'keep_percent': flags.DEFINE_float('keep_percent', 0.001,
                                       "R: percent of each tensor's entries a client sends."),
    'tau': flags.DEFINE_float('tau', 0.05, 'TAU, the pull (FLARE) / proximal (EC+FedProx) '
                              'strength before decay.'),
    'tau_decay': flags.DEFINE_float('tau_decay', 1.1, 'c: round r uses TAU / c**(r+1).'),
    'mask_percentile': flags.DEFINE_float('mask_percentile', 50.0, "t: FLARE's mask "
                                          'percentile of |accumulator|.'),
    'reg_steps': flags.DEFINE_integer('reg_steps', None, "p: FLARE's regularized local "
                                      'steps (task default; -1: every step).'),
    'local_epochs': flags.DEFINE_integer('local_epochs', 1, 'E: local epochs.'),
    'batch_size': flags.DEFINE_integer('batch_size', None,
                                       'Local batch size (task default; 0: full batch).'),
    'learning_rate': flags.DEFINE_float('learning_rate', None, 'Client SGD learning rate.'),
    'momentum': flags.DEFINE_float('momentum', None, 'Client SGD momentum.'),
    'eval_every': flags.DEFINE_integer('eval_every', 10, 'Evaluate every this many rounds.'),
    'checkpoint_every': flags.DEFINE_integer('checkpoint_every', 10,
                                             'Save program state every this many rounds.'),
    'seed': flags.DEFINE_integer('seed', 0, 'Seed of partitions and client sampling.'),
    'source': flags.DEFINE_string('source', None, 'Data source: tfds, npz, imagefolder, '
                                  'tff, text (task default).'),
    'data_path': flags.DEFINE_string('data_path', None, 'File or folder of a local source.'),
    'data_dir': flags.DEFINE_string('data_dir', None, 'TFDS data directory.'),
    'partition': flags.DEFINE_string('partition', None, 'Partition: contiguous, iid, '
                                     'dirichlet, quantity_skew, class_imbalance.'),
    'alpha': flags.DEFINE_float('alpha', 1.0, 'Dirichlet concentration.'),
    'ratio': flags.DEFINE_float('ratio', 100.0, 'quantity_skew: largest / smallest client.'),
    'ef21_dense_state': flags.DEFINE_bool('ef21_dense_state', False,
                                          "EF21 with the authors' dense-state shortcut."),
    'tff_fedprox_strength': flags.DEFINE_float('tff_fedprox_strength', 0.01,
                                               "TFF FedProx's proximal strength."),
    'keep_probability': flags.DEFINE_float('keep_probability', 0.5, 'mask_*: the keep '
                                           'probability q of update masking, in (0, 1].'),
    'mask_weighting': flags.DEFINE_enum('mask_weighting', 'uniform',
                                        [w.value for w in masking.Weighting],
                                        'mask_*: aggregation weights p_k.'),
    'num_mask_draws': flags.DEFINE_integer('num_mask_draws', 0, 'mask_*: fresh mask draws '
                                           'per mode and round for the empirical variances.'),
    'client_state_storage': flags.DEFINE_enum(
        'client_state_storage', 'memory', list(experiment.CLIENT_STATE_STORAGES),
        'Where the driver keeps the clients\' states (accumulators): memory, or disk (.npy '
        'files under <output_dir>/client_states, read memory-mapped) when they do not fit.'),
    'execution': execution_flags.EXECUTION,
    'workers': execution_flags.WORKERS,
    'worker_timeout_s': execution_flags.WORKER_TIMEOUT_S,
}


def build_config() -> experiment.ExperimentConfig:
  """The configuration: the preset, then every flag given on the command line."""
  explicit = {name: flag.value for name, flag in _FIELDS.items()
              if flags.FLAGS[flag.name].present}
  if _PRESET.value:
    return experiment.config_from_preset(_PRESET.value, _OUTPUT_DIR.value, **explicit)
  values = {name: flag.value for name, flag in _FIELDS.items()}
  return experiment.ExperimentConfig(output_dir=_OUTPUT_DIR.value, **values)


def main(argv):
  del argv
  try:
    config = build_config()
    experiment.validate(config)
  except experiment.ExperimentError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  # Ctrl-C ends the process at once (see tff_flare.runtime); checkpoints are atomic.
  runtime.set_interrupt_message(
      'Interrupted; start the same command again to resume from the last checkpoint.')
  try:
    summary = experiment.run_experiment(config, log=lambda line: print(line, flush=True))
  except experiment.ExperimentError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except remote.WorkerUnavailableError as e:
    print(f'error: {e}', file=sys.stderr)
    return 3
  for name, result in summary['final_eval'].items():
    print(f'{name:<12} test accuracy {result["accuracy"]:.4f} loss {result["loss"]:.4f}')
  return 0


if __name__ == '__main__':
  app.run(main)
