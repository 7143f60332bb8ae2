r"""The embedded demo: FLARE vs EC vs FedAvg on real handwritten digits, no download needed.

Runs a few dozen rounds on scikit-learn's 8x8 digits split over 10 clients, at the paper's
headline keep-percentage R = 0.001 %, and prints one line per algorithm: final test accuracy
and loss, the entries sent per client per round, and the density achieved.

  python -m experiments.demo --rounds=40
  python -m experiments.demo --execution=inprocess       # No TFF runtime.
  python -m experiments.demo --execution=remote --workers=localhost:8000  # On TFF workers.

It is `run_experiment` with the demo's configuration (`digits_demo`, FLARE, EC and FedAvg):
the same validation, loop, non-finite policy and exit statuses (`experiments/binary.py`).
Its outputs go to a temporary directory, removed at the end, unless `--output_dir` is given.
"""

import pathlib
import tempfile
import time

from absl import flags
import numpy as np

from experiments import binary
from experiments import config_flags
from tff_flare.experiment import run_files
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner

# The demo's own defaults; defaults and help otherwise those of the configuration's fields.
_FLAGS = config_flags.define(
    ('rounds', 'num_clients', 'keep_percent', 'tau', 'tau_decay', 'learning_rate', 'seed',
     'eval_every') + config_flags.EXECUTION_FIELDS,
    defaults=dict(rounds=40, num_clients=10, learning_rate=0.5))
_OUTPUT_DIR = binary.path_flag(
    flags.DEFINE_string(
        'output_dir', None, 'Keep the run here (default: a temporary directory, removed at the '
        'end).'))

NAMES = {'flare': 'FLARE', 'ec': 'EC', 'fedavg': 'FedAvg'}


def demo_config(output_dir: str) -> config_lib.ExperimentConfig:
  """The demo's experiment: one full-batch step of plain SGD per client per round."""
  values = config_flags.values(_FLAGS)
  return config_lib.ExperimentConfig(output_dir=output_dir,
                                     task='digits_demo',
                                     algorithms=tuple(NAMES),
                                     checkpoint_every=max(1, values['rounds']),
                                     **values)


def summarize(run_dir: pathlib.Path, summary: dict) -> str:
  """A table: final test accuracy/loss, mean entries sent per client per round, density."""
  lines = [
      f'{"algorithm":<8} {"test acc":>8} {"test loss":>9} {"sent/client/round":>17} '
      f'{"density":>10}'
  ]
  for name, label in NAMES.items():
    final = summary['final_eval'][name]
    column = lambda c, name=name: [
        v for _, v in run_files.rows_of(run_dir, name, f'train/aggregator/communication/{c}')
    ]
    sent, density = column('entries_sent_per_client'), column('density')
    lines.append(f'{label:<8} {final["accuracy"]:>8.4f} {final["loss"]:>9.4f} '
                 f'{np.mean(sent):>17.1f} {np.mean(density):>10.3e}')
  return '\n'.join(lines)


def main(argv):
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  cleanup.install_process_cleanup('Interrupted; the demo keeps nothing, so nothing was lost.')
  with tempfile.TemporaryDirectory() as temporary:
    output_dir = _OUTPUT_DIR.value or temporary
    start = time.perf_counter()
    summary = runner.run_experiment(demo_config(output_dir),
                                    log=lambda line: print(line, flush=True))
    config = summary['config']
    print(f'\n{config["rounds"]} rounds, {config["num_clients"]} clients, '
          f'R={config["keep_percent"]}% ({time.perf_counter() - start:.0f} s, '
          f'{config["execution"]})')
    print(summarize(pathlib.Path(output_dir), summary))
  return 0


if __name__ == '__main__':
  binary.run(main)
