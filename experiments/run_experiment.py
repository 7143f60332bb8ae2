r"""Runs FLARE and its baselines side by side on one task; resumable.

  python -m experiments.run_experiment --preset=cnn_unavailable_3 --rounds=300 \
      --source=npz --data_path=../shared/datasets/mnist.npz --output_dir=runs/cnn3

`--preset` loads one of the authors' configurations (experiments/presets.py); every flag
given explicitly overrides it. Without a preset the flags' defaults apply. Output in
--output_dir: metrics.csv and tensorboard/ (per round), summary.json, config.json (the
configuration, and what changed on resumes), checkpoints/ (start the same command again to
resume; a different configuration is refused, naming the fields). Plot with
experiments/plot.py.

Where rounds run (`--execution`): TFF's local runtime (default), `inprocess` (this Python
process, no TFF runtime; the GPU when TensorFlow sees one), or `remote` TFF workers (start
`python -m experiments.worker --port=8000` on each machine first):

  python -m experiments.run_experiment ... --execution=remote --workers=h1:8000,h2:8000

Exit status (`experiments/binary.py`): 0 done; 2 bad input (flags, data, checkpoint, a
configuration that does not match the run being resumed); 3 a TFF worker is down or
unreachable (start the same command again once it is back); 4 an algorithm diverged (every
client of it non-finite in a round, or its model evaluating to a non-finite test loss); 130
interrupted (Ctrl-C; resumable).
"""

from absl import flags

from experiments import binary
from experiments import execution_flags
from experiments import presets
from tff_flare.algorithms import registry as algorithms
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner
from tff_flare.simulation import sampling
from tff_flare.tasks import registry as tasks

_PRESET = flags.DEFINE_string('preset', None,
                              "One of the authors' configurations; explicit flags override it.")
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Where results and checkpoints go.')
flags.mark_flag_as_required('output_dir')

_FIELDS = {
    'task': flags.DEFINE_string('task', 'digits_demo', f'Task: {", ".join(tasks.TASK_NAMES)}.'),
    'algorithms': flags.DEFINE_list(
        'algorithms', ['flare', 'ec', 'fedavg'],
        f'Algorithms to run side by side: {", ".join(algorithms.NAMES)}.'),
    'rounds': flags.DEFINE_integer('rounds', 10, 'Rounds of training.'),
    'total_clients': flags.DEFINE_integer('total_clients', None,
                                          'Clients the data is split into (task default).'),
    'num_clients': flags.DEFINE_integer('num_clients', None,
                                        'Clients in use, the first of the split.'),
    'clients_per_round': flags.DEFINE_integer(
        'clients_per_round', None, 'Clients sampled each round (client unavailability); '
        'default: all clients in use.'),
    'client_sampling': flags.DEFINE_string(
        'client_sampling', 'uniform', f'How clients are sampled: {", ".join(sampling.SAMPLERS)} '
        "(python_random: the authors' random.Random(seed).sample stream)."),
    'keep_percent': flags.DEFINE_float('keep_percent', 0.001,
                                       "R: percent of each tensor's entries a client sends."),
    'tau': flags.DEFINE_float('tau', 0.05, 'TAU, the pull (FLARE) / proximal (EC+FedProx) '
                              'strength before decay.'),
    'tau_decay': flags.DEFINE_float('tau_decay', 1.1, 'c: round r uses TAU / c**(r+1).'),
    'mask_percentile': flags.DEFINE_float('mask_percentile', 50.0, "t: FLARE's mask "
                                          'percentile of |accumulator|.'),
    'reg_steps': flags.DEFINE_string('reg_steps', None, "p: FLARE's regularized local "
                                     "steps, an int or 'all' (task default)."),
    'local_epochs': flags.DEFINE_integer('local_epochs', 1, 'E: local epochs.'),
    'batch_size': flags.DEFINE_integer('batch_size', None,
                                       'Local batch size (task default; 0: full batch).'),
    'learning_rate': flags.DEFINE_float('learning_rate', None, 'Client SGD learning rate.'),
    'momentum': flags.DEFINE_float('momentum', None, 'Client SGD momentum.'),
    'eval_every': flags.DEFINE_integer('eval_every', 10, 'Evaluate every this many rounds.'),
    'checkpoint_every': flags.DEFINE_integer('checkpoint_every', 10,
                                             'Save program state every this many rounds.'),
    'seed': flags.DEFINE_integer('seed', 0, 'Seed of partitions, client sampling and masks.'),
    'model_seed': flags.DEFINE_integer(
        'model_seed', None, "Seed of the model's initializers (default: the authors' seeding: "
        "the CNN's GlorotNormal(seed=0); FC, VGG and GRU unseeded)."),
    'double_softmax': flags.DEFINE_bool(
        'double_softmax', None, "mnist_cnn: --nodouble_softmax drops the authors' second "
        'softmax (the fixed CNN, trained with its own learning rate; default: the authors\' '
        'model).'),
    'source': flags.DEFINE_string('source', None, 'Data source: keras, tfds, npz, '
                                  'imagefolder (images); tff, text (Shakespeare); task '
                                  'default if unset.'),
    'data_path': flags.DEFINE_string('data_path', None, 'File or folder of a local source.'),
    'data_dir': flags.DEFINE_string('data_dir', None, 'TFDS data directory.'),
    'partition': flags.DEFINE_string('partition', None, 'Partition: contiguous, iid, '
                                     'dirichlet, quantity_skew, class_imbalance.'),
    'alpha': flags.DEFINE_float('alpha', 1.0, 'Dirichlet concentration.'),
    'ratio': flags.DEFINE_float('ratio', 100.0, 'quantity_skew: largest / smallest client.'),
    'text_evaluation': flags.DEFINE_string(
        'text_evaluation', 'authors', "shakespeare_gru's test set: authors (2 batches of 8 x "
        '100 characters, newly shuffled at every evaluation) or full (every test client).'),
    'tff_fedprox_strength': flags.DEFINE_float('tff_fedprox_strength', 0.01,
                                               "TFF FedProx's proximal strength."),
    'keep_probability': flags.DEFINE_float('keep_probability', 0.5, 'mask_*: the keep '
                                           'probability q of update masking, in (0, 1].'),
    'mask_weighting': flags.DEFINE_string('mask_weighting', 'uniform', 'mask_*: aggregation '
                                          'weights p_k: uniform or num_examples.'),
    'num_mask_draws': flags.DEFINE_integer('num_mask_draws', 0, 'mask_*: fresh mask draws '
                                           'per mode and round for the empirical variances.'),
    'client_state_storage': flags.DEFINE_string(
        'client_state_storage', 'memory', "Where the driver keeps the clients' states "
        '(accumulators): memory, or disk (.npy files under <output_dir>/client_states, read '
        'memory-mapped) when they do not fit.'),
    'allow_nonfinite_rounds': flags.DEFINE_bool(
        'allow_nonfinite_rounds', False, 'Go on after a round in which every client of an '
        'algorithm returned non-finite values (by default the run stops there).'),
    'execution': execution_flags.EXECUTION,
    'workers': execution_flags.WORKERS,
    'worker_timeout_s': execution_flags.WORKER_TIMEOUT_S,
    'client_threads': execution_flags.CLIENT_THREADS,
}


def _flag_value(name: str):
  value = _FIELDS[name].value
  if name == 'reg_steps' and value is not None and value != 'all':
    try:
      return int(value)
    except ValueError:
      return value  # The configuration's check names it.
  if name in ('algorithms', 'workers'):
    return tuple(value)
  return value


def build_config() -> config_lib.ExperimentConfig:
  """The configuration: the preset, then every flag given on the command line."""
  if _PRESET.value:
    explicit = {name: _flag_value(name) for name, flag in _FIELDS.items()
                if flags.FLAGS[flag.name].present}
    return presets.config_from_preset(_PRESET.value, _OUTPUT_DIR.value, **explicit)
  return config_lib.ExperimentConfig(output_dir=_OUTPUT_DIR.value,
                                     **{name: _flag_value(name) for name in _FIELDS})


def run(config_fn, summary_lines: bool = True) -> int:
  """Builds the configuration with `config_fn` and runs it; errors go to `binary.report`."""
  cleanup.install_process_cleanup(
      'Interrupted; start the same command again to resume from the last checkpoint.')
  summary = runner.run_experiment(config_fn(), log=lambda line: print(line, flush=True))
  if summary_lines:
    for name, result in summary['final_eval'].items():
      print(f'{name:<18} test accuracy {result["accuracy"]:.4f} loss {result["loss"]:.4f}')
  return 0


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  return run(build_config)


if __name__ == '__main__':
  binary.run(main)
