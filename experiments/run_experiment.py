r"""Runs FLARE and its baselines side by side on one task; resumable.

  python -m experiments.run_experiment --preset=cnn_unavailable_3 --rounds=300 \
      --source=npz --data_path=data/mnist.npz --output_dir=runs/cnn3

`--preset` loads one of the authors' configurations (experiments/presets.py); every flag
given explicitly overrides it. Without a preset the flags' defaults apply. Output in
--output_dir: metrics.csv and tensorboard/ (per round), summary.json, config.json (the
configuration, and what changed on resumes), checkpoints/ (start the same command again to
resume; a different configuration is refused, naming the fields). Plot with
experiments/plot.py.

Where rounds run (`--execution`): `inprocess` (default: this Python process, the same
computations without TFF's runtime, the fastest on one machine; the GPU when TensorFlow sees
one), `local` (TFF's local runtime, a `worker_binary` subprocess), or `remote` TFF workers
(start `python -m experiments.worker --port=8000` on each machine first):

  python -m experiments.run_experiment ... --execution=remote --workers=h1:8000,h2:8000

Exit status (`experiments/binary.py`): 0 done; 2 bad input (flags, data, checkpoint, a
configuration that does not match the run being resumed); 3 a TFF worker is down or
unreachable (start the same command again once it is back); 4 an algorithm diverged (every
client of it non-finite in a round, or its model evaluating to a non-finite test loss); 5 a
file cannot be written (a full disk; start the same command again once there is space); 130
interrupted (Ctrl-C; resumable).
"""

from absl import flags

from experiments import binary
from experiments import config_flags
from experiments import presets
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner

_PRESET = flags.DEFINE_string(
    'preset', None, "One of the authors' configurations (explicit flags override it; each runs "
    f'{", ".join(presets.ALL_ALGORITHMS)} unless --algorithms says otherwise):\n' +
    '\n'.join(presets.describe(name) for name in sorted(presets.PRESETS)))
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Where results and checkpoints go.')
flags.mark_flag_as_required('output_dir')

# Every configuration field as a flag (its default and help are declared with the field).
_FIELDS = config_flags.define()


def build_config() -> config_lib.ExperimentConfig:
  """The configuration: the preset, then every flag given on the command line."""
  return config_flags.build_config(_FIELDS, preset=_PRESET.value, output_dir=_OUTPUT_DIR.value)


def run(config_fn, summary_lines: bool = True) -> int:
  """Builds the configuration with `config_fn` and runs it; errors go to `binary.report`."""
  cleanup.install_process_cleanup(
      'Interrupted; start the same command again to resume from the last checkpoint.')
  config = config_fn()
  config_flags.check_knobs_taken(_FIELDS, config.algorithms)
  if _PRESET.value:
    print(
        f'Preset {_PRESET.value}: {", ".join(config.algorithms)} on {config.task} '
        '(--algorithms chooses others).',
        flush=True)
  summary = runner.run_experiment(config, log=lambda line: print(line, flush=True))
  if summary_lines:
    for name, result in summary['final_eval'].items():
      if result:
        print(f'{name:<18} test accuracy {result.get("accuracy", float("nan")):.4f} '
              f'loss {result["loss"]:.4f}')
  return 0


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  return run(build_config)


if __name__ == '__main__':
  binary.run(main)
