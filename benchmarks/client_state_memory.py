r"""Peak memory of the driver's client-state store: in RAM versus on disk (memory-mapped).

Simulates what the driver does with the FC's accumulators (36,356,525 float32 = 145 MB per
client): every client of the population gets a state, then each round `--per_round` sampled
clients' states are read (`view`), replaced by new ones (`state + 1`, read in full, as
TFF serializes them) and stored (`update`). Each storage runs in its own subprocess so that
its peak resident memory (`ru_maxrss`, which also counts the memory-mapped pages it touched)
is its own. It also checks that both stores end with the same states.

  python -m benchmarks.client_state_memory --clients=100 --per_round=10 --rounds=3
"""

import collections
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from absl import flags
import numpy as np
import tensorflow as tf

from experiments import binary
from tff_flare.simulation import client_state
from tff_flare.tasks import models
from tff_flare.algorithms import model_facts
from tff_flare.execution import cleanup

_CLIENTS = flags.DEFINE_integer('clients', 100, 'Clients with a state.', lower_bound=1)
_PER_ROUND = flags.DEFINE_integer('per_round', 10, 'Clients sampled per round.', lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Rounds after every client has a state.', lower_bound=1)
_STORAGES = flags.DEFINE_list('storages', ['disk', 'memory'], 'Stores to measure.')
binary.each_one_of(_STORAGES, ('disk', 'memory'), 'disk, memory')
_CHILD = flags.DEFINE_string('child', None, 'Internal: run one storage and print JSON.')
_DIRECTORY = flags.DEFINE_string(
    'directory', None, 'Where the disk store writes (a '
    'temporary directory by default).')


def _fc_shapes() -> list[tuple[int, ...]]:
  specs = model_facts.model_facts(models.tff_model_fn(models.mnist_fc, (784,))).specs
  return [tuple(s.shape) for s in specs]


def _state(shapes, value: float):
  return collections.OrderedDict(accumulator=[np.full(s, value, np.float32) for s in shapes])


def _run_child(storage: str, directory: str) -> dict:
  shapes = _fc_shapes()
  initial = lambda: collections.OrderedDict(accumulator=[np.zeros(s, np.float32) for s in shapes])
  if storage == 'memory':
    store = client_state.ClientStateStore(initial)
  else:
    store = client_state.DiskClientStateStore(initial, directory)
  ids = [f'c{i}' for i in range(_CLIENTS.value)]
  start = time.perf_counter()
  for i, cid in enumerate(ids):
    store.update([cid], [_state(shapes, float(i))])
  store.commit(0, [0])
  fill_seconds = time.perf_counter() - start
  rng = np.random.default_rng(0)
  round_seconds = []
  for round_num in range(1, _ROUNDS.value + 1):
    sampled = list(rng.choice(ids, _PER_ROUND.value, replace=False))
    start = time.perf_counter()
    states = store.view(sampled)
    new_states = [tf.nest.map_structure(lambda a: np.asarray(a) + 1.0, s) for s in states]
    del states
    store.update(sampled, new_states)
    del new_states
    store.commit(round_num, [round_num - 1, round_num])  # A checkpoint every round.
    round_seconds.append(time.perf_counter() - start)
  checksum = [float(store.get(cid)['accumulator'][-1].sum()) for cid in ids]
  return dict(storage=storage,
              peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
              fill_seconds=fill_seconds,
              round_seconds=float(np.mean(round_seconds)),
              checksum=checksum,
              state_gb=4 * sum(int(np.prod(s)) for s in shapes) * len(ids) / 1e9)


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  if _CHILD.value:
    print(json.dumps(_run_child(_CHILD.value, _DIRECTORY.value)))
    return 0
  results = []
  for storage in _STORAGES.value:
    directory = tempfile.mkdtemp(dir=_DIRECTORY.value)
    try:
      output = subprocess.run([
          sys.executable, '-m', 'benchmarks.client_state_memory', f'--child={storage}',
          f'--directory={directory}', f'--clients={_CLIENTS.value}',
          f'--per_round={_PER_ROUND.value}', f'--rounds={_ROUNDS.value}'
      ],
                              capture_output=True,
                              text=True,
                              check=True).stdout
    finally:
      shutil.rmtree(directory, ignore_errors=True)
    results.append(json.loads(output.strip().splitlines()[-1]))
  print(f'FC accumulators: {_CLIENTS.value} clients ({results[0]["state_gb"]:.1f} GB of '
        f'states), {_PER_ROUND.value} sampled per round, {_ROUNDS.value} rounds')
  print(f'{"storage":<8} {"peak RSS GB":>11} {"fill s":>8} {"s/round (store only)":>21}')
  for r in results:
    print(f'{r["storage"]:<8} {r["peak_rss_gb"]:11.2f} {r["fill_seconds"]:8.1f} '
          f'{r["round_seconds"]:21.2f}')
  if len(results) > 1:
    same = all(r['checksum'] == results[0]['checksum'] for r in results)
    print(f'same final states in every store: {same}')
  return 0


if __name__ == '__main__':
  binary.run(main)
