r"""The embedded demo: FLARE vs EC vs FedAvg on real handwritten digits, no download needed.

Runs a few dozen rounds on scikit-learn's 8x8 digits split over 10 clients, at the paper's
headline keep-percentage R = 0.001 %, and prints one line per algorithm: final test accuracy
and loss, the entries sent per client per round, and the density achieved.

  python -m tff_flare.demo --rounds=40
  python -m tff_flare.demo --execution=remote --workers=localhost:8000  # On TFF workers.
"""

import collections
import sys
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow_federated as tff

from tff_flare import ec
from tff_flare import evaluation
from tff_flare import execution_flags
from tff_flare import fedavg
from tff_flare import flare
from tff_flare import remote
from tff_flare import runtime
from tff_flare import tasks
from tff_flare import training_loop

_ROUNDS = flags.DEFINE_integer('rounds', 40, 'Rounds of training.', lower_bound=1)
_NUM_CLIENTS = flags.DEFINE_integer('num_clients', 10, 'Clients (all take part every round).',
                                    lower_bound=1)
_KEEP_PERCENT = flags.DEFINE_float('keep_percent', 0.001,
                                   'R: percent of each tensor\'s entries a client sends.')
_TAU = flags.DEFINE_float('tau', 0.05, 'FLARE\'s TAU (L1 pull strength before decay).',
                          lower_bound=0.0)
_TAU_DECAY = flags.DEFINE_float('tau_decay', 1.1, 'c: round r uses TAU / c**(r+1).')
_LEARNING_RATE = flags.DEFINE_float('learning_rate', 0.5, 'Client SGD learning rate.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of the data shuffle and the model init.')
_EVAL_EVERY = flags.DEFINE_integer('eval_every', 10, 'Evaluate every this many rounds.',
                                   lower_bound=1)

flags.register_validator('keep_percent', lambda r: 0.0 < r <= 100.0,
                         message='--keep_percent must be in (0, 100].')
flags.register_validator('tau_decay', lambda c: c > 0.0, message='--tau_decay must be > 0.')


def build_runs(model_fn, keep_percent: float, tau: float, tau_decay: float,
               learning_rate: float) -> list[training_loop.AlgorithmRun]:
  """The demo's three processes, one step of plain SGD per client per round."""
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate=learning_rate)
  processes = collections.OrderedDict(
      FLARE=flare.build_flare(model_fn, keep_percent=keep_percent, client_optimizer=optimizer,
                              tau=tau, tau_decay=tau_decay, reg_steps=1),
      EC=ec.build_ec(model_fn, keep_percent=keep_percent, client_optimizer=optimizer),
      FedAvg=fedavg.build_fedavg(model_fn, client_optimizer=optimizer))
  return [training_loop.AlgorithmRun(name, p) for name, p in processes.items()]


def summarize(history: list[dict], names: list[str]) -> str:
  """A table: final test accuracy/loss, mean entries sent per client per round, density."""
  lines = [f'{"algorithm":<8} {"test acc":>8} {"test loss":>9} {"sent/client/round":>17} '
           f'{"density":>10}']
  for name in names:
    final = history[-1][name]['eval']
    rounds = [row[name]['train']['communication'] for row in history if 'train' in row.get(
        name, {})]
    sent = np.mean([c['entries_sent_per_client'] for c in rounds])
    density = np.mean([c['density'] for c in rounds])
    lines.append(f'{name:<8} {final["accuracy"]:>8.4f} {final["loss"]:>9.4f} {sent:>17.1f} '
                 f'{density:>10.3e}')
  return '\n'.join(lines)


def train(task: tasks.Task) -> tuple[list[dict], list[str], float]:
  """Trains the three algorithms side by side: (history, names, seconds)."""
  evaluate = evaluation.build_evaluate_fn(task.model_fn, task.test_data)
  runs = build_runs(task.model_fn, _KEEP_PERCENT.value, _TAU.value, _TAU_DECAY.value,
                    _LEARNING_RATE.value)
  start = time.perf_counter()

  def progress(round_num, row):
    accuracies = ', '.join(f'{r.name} {row[r.name]["eval"]["accuracy"]:.3f}'
                           for r in runs if 'eval' in row[r.name])
    if accuracies:
      print(f'round {round_num:3d}  test accuracy: {accuracies}', flush=True)

  history = training_loop.run_side_by_side(
      runs, task.train_data, num_rounds=_ROUNDS.value, clients_per_round=_NUM_CLIENTS.value,
      seed=_SEED.value, evaluate_fn=evaluate, evaluate_every=_EVAL_EVERY.value,
      on_round_end=progress)
  return history, [r.name for r in runs], time.perf_counter() - start


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  try:
    context = execution_flags.execution_context()
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  task = tasks.build_task('digits_demo', num_clients=_NUM_CLIENTS.value, seed=_SEED.value)
  runtime.set_interrupt_message('Interrupted; the demo keeps nothing, so nothing was lost.')
  try:
    with context:
      history, names, seconds = train(task)
  except remote.WorkerUnavailableError as e:
    print(f'error: {e}', file=sys.stderr)
    return 3
  print(f'\n{_ROUNDS.value} rounds, {_NUM_CLIENTS.value} clients, R={_KEEP_PERCENT.value}% '
        f'({seconds:.0f} s)')
  print(summarize(history, names))
  return 0


if __name__ == '__main__':
  app.run(main)
