r"""The embedded demo: FLARE vs EC vs FedAvg on real handwritten digits, no download needed.

Runs a few dozen rounds on scikit-learn's 8x8 digits split over 10 clients, at the paper's
headline keep-percentage R = 0.001 %, and prints one line per algorithm: final test accuracy
and loss, the entries sent per client per round, and the density achieved.

  python -m experiments.demo --rounds=40
  python -m experiments.demo --execution=inprocess       # No TFF runtime.
  python -m experiments.demo --execution=remote --workers=localhost:8000  # On TFF workers.
"""

import sys
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow_federated as tff

from experiments import execution_flags
from tff_flare.algorithms import ec
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import flare
from tff_flare.execution import cleanup
from tff_flare.execution import remote
from tff_flare.simulation import evaluation
from tff_flare.simulation import hooks
from tff_flare.simulation import loop
from tff_flare.simulation import sampling
from tff_flare.tasks import registry as tasks

_ROUNDS = flags.DEFINE_integer('rounds', 40, 'Rounds of training.')
_NUM_CLIENTS = flags.DEFINE_integer('num_clients', 10, 'Clients (all take part every round).')
_KEEP_PERCENT = flags.DEFINE_float('keep_percent', 0.001,
                                   'R: percent of each tensor\'s entries a client sends.')
_TAU = flags.DEFINE_float('tau', 0.05, 'FLARE\'s TAU (L1 pull strength before decay).')
_TAU_DECAY = flags.DEFINE_float('tau_decay', 1.1, 'c: round r uses TAU / c**(r+1).')
_LEARNING_RATE = flags.DEFINE_float('learning_rate', 0.5, 'Client SGD learning rate.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of the data shuffle and the model init.')
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 10, 'Evaluate every this many rounds.')


def build_processes(model_fn, keep_percent: float, tau: float, tau_decay: float,
                    learning_rate: float) -> dict:
  """The demo's three processes, one step of plain SGD per client per round."""
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)
  return dict(
      FLARE=flare.build_flare(model_fn, keep_percent=keep_percent, client_optimizer=optimizer,
                              tau=tau, tau_decay=tau_decay, reg_steps=1),
      EC=ec.build_ec(model_fn, keep_percent=keep_percent, client_optimizer=optimizer),
      FedAvg=fedavg.build_fedavg(model_fn, client_optimizer=optimizer))


def summarize(rows: list[dict], names: list[str]) -> str:
  """A table: final test accuracy/loss, mean entries sent per client per round, density."""
  lines = [f'{"algorithm":<8} {"test acc":>8} {"test loss":>9} {"sent/client/round":>17} '
           f'{"density":>10}']
  for name in names:
    final = rows[-1][name]['eval']
    rounds = [row[name]['train']['communication'] for row in rows if 'train' in row[name]]
    sent = np.mean([c['entries_sent_per_client'] for c in rounds])
    density = np.mean([c['density'] for c in rounds])
    lines.append(f'{name:<8} {final["accuracy"]:>8.4f} {final["loss"]:>9.4f} {sent:>17.1f} '
                 f'{density:>10.3e}')
  return '\n'.join(lines)


class _PrintAccuracies(loop.Hook):

  def after_round(self, round_num, runs, row) -> None:
    accuracies = ', '.join(f'{r.name} {row[r.name]["eval"]["accuracy"]:.3f}'
                           for r in runs if 'eval' in row[r.name])
    if accuracies:
      print(f'round {round_num:3d}  test accuracy: {accuracies}', flush=True)


def train(task: tasks.Task, execution) -> tuple[list[dict], list[str]]:
  """Trains the three algorithms side by side in `execution`: (rows, names)."""
  processes = build_processes(task.model_fn, _KEEP_PERCENT.value, _TAU.value,
                              _TAU_DECAY.value, _LEARNING_RATE.value)
  runs = [loop.AlgorithmRun(name, process, execution) for name, process in processes.items()]
  collected = hooks.CollectRows()
  loop.run_rounds(
      runs, task.client_datasets,
      sampling.build_client_sampler(task.train_data.client_ids, _NUM_CLIENTS.value,
                                    _SEED.value),
      start_round=0, end_round=_ROUNDS.value,
      hooks=[hooks.Evaluation(evaluation.build_evaluate_fn(task.model_fn, task.test_data),
                              _EVAL_EVERY.value), _PrintAccuracies(), collected])
  return collected.rows, list(processes)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  cleanup.install_process_cleanup('Interrupted; the demo keeps nothing, so nothing was lost.')
  try:
    for name, flag in (('rounds', _ROUNDS), ('num_clients', _NUM_CLIENTS),
                       ('eval_every', _EVAL_EVERY)):
      if flag.value < 1:
        raise ValueError(f'--{name} must be >= 1, got {flag.value}.')
    execution = execution_flags.build_execution()
    task = tasks.build_task('digits_demo', num_clients=_NUM_CLIENTS.value, seed=_SEED.value)
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  start = time.perf_counter()
  try:
    with execution:
      rows, names = train(task, execution)
  except ValueError as e:  # The builders check R, TAU and c.
    print(f'error: {e}', file=sys.stderr)
    return 2
  except remote.WorkerUnavailableError as e:
    print(f'error: {e}', file=sys.stderr)
    return 3
  print(f'\n{_ROUNDS.value} rounds, {_NUM_CLIENTS.value} clients, R={_KEEP_PERCENT.value}% '
        f'({time.perf_counter() - start:.0f} s, {execution.name})')
  print(summarize(rows, names))
  return 0


if __name__ == '__main__':
  app.run(main)
