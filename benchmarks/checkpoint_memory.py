r"""Peak memory of checkpointing the clients' states held in RAM, in the two layouts.

`program_state`: every client array inside the program state that
`tff.program.FileProgramStateManager` writes as a SavedModel (the layout before the client
states moved out of it). `files`: `simulation.checkpoints.Checkpoints`, which writes the client
arrays one by one to `.npy` files beside a program state holding the server state only. The
states are the FC's accumulators (36,356,525 float32 = 145 MB per client), in a
`ClientStateStore`. Each layout and phase (save, then restore into an empty store) runs in
its own subprocess so that its peak resident memory (`ru_maxrss`) is its own; the figure is
the peak above the resident memory just before the save or restore.

  python -m benchmarks.checkpoint_memory --clients=10
"""

import asyncio
import collections
import dataclasses
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from absl import flags
import numpy as np
import tensorflow_federated as tff

from experiments import binary
from tff_flare.execution import cleanup
from tff_flare.simulation import checkpoints as checkpoints_lib
from tff_flare.simulation import client_state
from tff_flare.simulation import loop
from tff_flare.tasks import models
from tff_flare.algorithms import model_facts

_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients with a state.', lower_bound=1)
_LAYOUTS = flags.DEFINE_list('layouts', ['program_state', 'files'], 'Layouts to measure.')
binary.each_one_of(_LAYOUTS, ('program_state', 'files'), 'program_state, files')
_CHILD = flags.DEFINE_string('child', None, 'Internal: layout:phase to run, prints JSON.')
_DIRECTORY = flags.DEFINE_string('directory', None, 'Internal: the checkpoint directory.')


@dataclasses.dataclass
class _Run:
  """What `Checkpoints` uses of a `loop.AlgorithmRun`: its name and its snapshot interface
  (the run's own methods, over a plain state and a store)."""
  name: str
  state: Any
  store: client_state.ClientStateStore
  has_client_state = loop.AlgorithmRun.has_client_state
  snapshot = loop.AlgorithmRun.snapshot
  restore = loop.AlgorithmRun.restore
  checkpointed = loop.AlgorithmRun.checkpointed


def _rss_gb() -> float:
  with open('/proc/self/status') as f:
    kb = next(int(line.split()[1]) for line in f if line.startswith('VmRSS:'))
  return kb / 2**20


def _run_child(layout: str, phase: str, directory: str) -> dict:
  shapes = [
      tuple(s.shape)
      for s in model_facts.model_facts(models.tff_model_fn(models.mnist_fc, (784,))).specs
  ]
  store = client_state.ClientStateStore(
      lambda: collections.OrderedDict(accumulator=[np.zeros(s, np.float32) for s in shapes]))
  ids = [f'c{i}' for i in range(_CLIENTS.value)]
  runs = [_Run('flare', [np.float32(0.0)], store)]
  checkpoints = checkpoints_lib.Checkpoints(directory, runs, ids)
  manager = tff.program.FileProgramStateManager(directory)
  old = lambda arrays: collections.OrderedDict(
      round=np.int64(1), flare=collections.OrderedDict(server=[np.float32(0.0)], clients=arrays))
  if phase == 'save':
    for i, cid in enumerate(ids):
      store.update(
          [cid],
          [collections.OrderedDict(accumulator=[np.full(s, float(i), np.float32) for s in shapes])])
  before = _rss_gb()
  start = time.perf_counter()
  if phase == 'save' and layout == 'files':
    checkpoints.save(1)
  elif phase == 'save':
    asyncio.run(manager.save(old(store.checkpoint_arrays(ids)), 1))
  elif layout == 'files':
    checkpoints.restore()
  else:  # What restoring the old layout did: one load with the clients in the template.
    saved = asyncio.run(manager.load(1, old(store.checkpoint_arrays(ids))))
    store.restore_checkpoint_arrays(ids, list(saved['flare']['clients']))
  seconds = time.perf_counter() - start
  checksum = float(sum(store.get(cid)['accumulator'][-1].sum() for cid in ids))
  return dict(before_gb=before,
              extra_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20 - before,
              seconds=seconds,
              checksum=checksum,
              state_gb=4 * sum(int(np.prod(s)) for s in shapes) * len(ids) / 2**30)


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  if _CHILD.value:
    layout, phase = _CHILD.value.split(':')
    print(json.dumps(_run_child(layout, phase, _DIRECTORY.value)))
    return 0
  rows = []
  for layout in _LAYOUTS.value:
    directory = tempfile.mkdtemp()
    try:
      for phase in ('save', 'restore'):
        output = subprocess.run([
            sys.executable, '-m', 'benchmarks.checkpoint_memory', f'--child={layout}:{phase}',
            f'--directory={directory}', f'--clients={_CLIENTS.value}'
        ],
                                capture_output=True,
                                text=True,
                                check=True).stdout
        rows.append(dict(layout=layout, phase=phase, **json.loads(output.strip().splitlines()[-1])))
    finally:
      shutil.rmtree(directory, ignore_errors=True)
  print(f'FC accumulators in RAM: {_CLIENTS.value} clients, {rows[0]["state_gb"]:.2f} GiB of '
        'states')
  print(f'{"layout":<14} {"phase":<8} {"RSS before GiB":>14} {"peak above GiB":>14} '
        f'{"seconds":>8}')
  for r in rows:
    print(f'{r["layout"]:<14} {r["phase"]:<8} {r["before_gb"]:14.2f} {r["extra_gb"]:14.2f} '
          f'{r["seconds"]:8.1f}')
  same = len({r['checksum'] for r in rows}) == 1
  print(f'every save and restore holds the same states: {same}')
  return 0


if __name__ == '__main__':
  binary.run(main)
