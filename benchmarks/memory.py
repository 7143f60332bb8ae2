r"""Peak memory of a run against its estimate and its arithmetic floor: model x algorithm x store.

Each cell is one run of the experiment binary (`python -m experiments.run_experiment`), alone,
in a subprocess of its own, for `--rounds` rounds with an evaluation and a checkpoint every
round, on the real data of `--data_dir`. It reads back what the run recorded in
`summary.json`: the peak it estimated before its first round and the peak it measured (this
process and its TFF workers) and its arithmetic floor (`tff_flare.simulation.memory`): the
process with TensorFlow, TFF and the data loaded, every client's state kept in memory, each
thread's client its weights, gradient and state, and the server its model and the round's
sum.

  python -m benchmarks.memory --tasks=mnist_fc --algorithms=flare,ec,ef21_dense,fedavg
  python -m benchmarks.memory --tasks=mnist_cnn,mnist_fc --storages=memory,disk \
      --algorithms=flare,fedavg,tff_fedavg --rounds=2
  python -m benchmarks.memory --algorithms=flare --allocators=pooling,system

`--allocators`: `pooling` is TensorFlow's BFC allocator (the programs' default), `system` the
C library's (`memory.SYSTEM_ALLOCATOR` in the environment), which gives a round's memory back.

Start it under a cap (`memcap 14G python -m benchmarks.memory ...`): the cells run one at a
time, and a cell that would not fit its machine stops before it starts (reported as such).
"""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from absl import flags

from experiments import binary
from tff_flare.algorithms import registry
from tff_flare.experiment import config
from tff_flare.simulation import memory
from tff_flare.tasks import registry as tasks

_TASKS = flags.DEFINE_list('tasks', ['mnist_fc'], 'Tasks (models) to measure.')
_ALGORITHMS = flags.DEFINE_list('algorithms', ['flare', 'ec', 'ef21_dense', 'fedavg'],
                                'Algorithms, one run each.')
_STORAGES = flags.DEFINE_list('storages', ['memory', 'disk'], 'Client-state stores.')
_ALLOCATORS = flags.DEFINE_list('allocators', ['pooling'],
                                "TensorFlow's CPU allocators: pooling (BFC) and/or system.")
_ROUNDS = flags.DEFINE_integer('rounds', 1, 'Rounds of each run.', lower_bound=1)
_THREADS = flags.DEFINE_integer('client_threads', 2, 'Client threads of each run.', lower_bound=1)
_DATA_DIR = flags.DEFINE_string('data_dir', 'data', 'The data directory (--data_dir of runs).')
_SOURCE = flags.DEFINE_string('source', 'npz', 'The data source of the image tasks.')
binary.each_one_of(_TASKS, tasks.TASK_NAMES, ', '.join(tasks.TASK_NAMES))
binary.each_one_of(_ALGORITHMS, registry.NAMES, ', '.join(registry.NAMES))
binary.each_one_of(_STORAGES, config.CLIENT_STATE_STORAGES, ', '.join(config.CLIENT_STATE_STORAGES))
_ENVIRONMENTS = {'pooling': {'TF_CPU_ALLOCATOR_USE_BFC': 'true'}, 'system': memory.SYSTEM_ALLOCATOR}
binary.each_one_of(_ALLOCATORS, tuple(_ENVIRONMENTS), ', '.join(_ENVIRONMENTS))
_NUM_CLIENTS = flags.DEFINE_integer(
    'num_clients',
    None, 'Clients of each run (default: the task\'s; the offline Shakespeare '
    'play has 2 roles with enough lines).',
    lower_bound=1)


def _cell(task: str, algorithm: str, storage: str, allocator: str, directory: str) -> dict:
  output = os.path.join(directory, f'{task}_{algorithm}_{storage}_{allocator}')
  command = [
      sys.executable, '-m', 'experiments.run_experiment', f'--task={task}',
      f'--algorithms={algorithm}', f'--rounds={_ROUNDS.value}', '--eval_every=1',
      '--checkpoint_every=1', f'--client_state_storage={storage}',
      f'--client_threads={_THREADS.value}', f'--data_dir={_DATA_DIR.value}',
      f'--output_dir={output}'
  ]
  if task != 'shakespeare_gru':
    command.append(f'--source={_SOURCE.value}')
  if _NUM_CLIENTS.value is not None:
    command.append(f'--num_clients={_NUM_CLIENTS.value}')
  result = subprocess.run(command,
                          capture_output=True,
                          text=True,
                          check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3',
                                   **_ENVIRONMENTS[allocator]))
  if result.returncode != 0:
    return dict(error=(result.stderr.strip().splitlines() or ['?'])[-1][:300])
  summary = json.loads((pathlib.Path(output) / 'summary.json').read_text())
  return summary['memory']


def main(argv):
  del argv
  print(f'{"task":<16}{"algorithm":<12}{"store":<8}{"allocator":<10}{"peak GiB":>9}{"estimate":>9}'
        f'{"est/peak":>9}{"floor":>7}{"peak/floor":>11}')
  with tempfile.TemporaryDirectory() as directory:
    for task in _TASKS.value:
      for algorithm in _ALGORITHMS.value:
        for storage in _STORAGES.value:
          for allocator in _ALLOCATORS.value:
            cell = _cell(task, algorithm, storage, allocator, directory)
            row = f'{task:<16}{algorithm:<12}{storage:<8}{allocator:<10}'
            if 'error' in cell:
              print(f'{row} {cell["error"]}', flush=True)
              continue
            peak, estimate = cell['peak_gib'], cell['estimated_peak_gib']
            floor = cell['floor_gib']
            print(
                f'{row}{peak:>9.2f}{estimate:>9.2f}'
                f'{estimate / peak:>9.2f}{floor:>7.2f}{peak / floor:>11.2f}',
                flush=True)


if __name__ == '__main__':
  binary.run(main)
