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

import csv
import pathlib
import tempfile
import time

from absl import flags
import numpy as np

from experiments import binary
from experiments import execution_flags
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner

_ROUNDS = flags.DEFINE_integer('rounds', 40, 'Rounds of training.')
_NUM_CLIENTS = flags.DEFINE_integer('num_clients', 10, 'Clients (all take part every round).')
_KEEP_PERCENT = flags.DEFINE_float('keep_percent', 0.001,
                                   'R: percent of each tensor\'s entries a client sends.')
_TAU = flags.DEFINE_float('tau', 0.05, 'FLARE\'s TAU (L1 pull strength before decay).')
_TAU_DECAY = flags.DEFINE_float('tau_decay', 1.1, 'c: round r uses TAU / c**(r+1).')
_LEARNING_RATE = flags.DEFINE_float('learning_rate', 0.5, 'Client SGD learning rate.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of the data shuffle and the model init.')
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 10, 'Evaluate every this many rounds.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Keep the run here (default: a '
                                  'temporary directory, removed at the end).')

NAMES = {'flare': 'FLARE', 'ec': 'EC', 'fedavg': 'FedAvg'}


def demo_config(output_dir: str) -> config_lib.ExperimentConfig:
  """The demo's experiment: one full-batch step of plain SGD per client per round."""
  return config_lib.ExperimentConfig(
      output_dir=output_dir, task='digits_demo', algorithms=tuple(NAMES),
      rounds=_ROUNDS.value, num_clients=_NUM_CLIENTS.value, keep_percent=_KEEP_PERCENT.value,
      tau=_TAU.value, tau_decay=_TAU_DECAY.value, learning_rate=_LEARNING_RATE.value,
      seed=_SEED.value, eval_every=_EVAL_EVERY.value, checkpoint_every=max(1, _ROUNDS.value),
      **execution_flags.config_fields())


def summarize(metrics_csv: pathlib.Path, summary: dict) -> str:
  """A table: final test accuracy/loss, mean entries sent per client per round, density."""
  with open(metrics_csv, newline='') as f:
    rows = list(csv.DictReader(f))
  lines = [f'{"algorithm":<8} {"test acc":>8} {"test loss":>9} {"sent/client/round":>17} '
           f'{"density":>10}']
  for name, label in NAMES.items():
    final = summary['final_eval'][name]
    sent = [float(r[f'{name}/train/communication/entries_sent_per_client']) for r in rows
            if r.get(f'{name}/train/communication/entries_sent_per_client')]
    density = [float(r[f'{name}/train/communication/density']) for r in rows
               if r.get(f'{name}/train/communication/density')]
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
    print(f'\n{_ROUNDS.value} rounds, {_NUM_CLIENTS.value} clients, R={_KEEP_PERCENT.value}% '
          f'({time.perf_counter() - start:.0f} s, {summary["config"]["execution"]})')
    print(summarize(pathlib.Path(output_dir) / 'metrics.csv', summary))
  return 0


if __name__ == '__main__':
  binary.run(main)
