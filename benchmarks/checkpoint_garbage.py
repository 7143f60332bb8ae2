r"""What a checkpoint save leaves to Python's cyclic garbage collector, and how much memory.

`tff.program.FileProgramStateManager.save` writes the program state as a SavedModel; each
save traces new TensorFlow functions (`_traced_save`, `_traced_restore`, `__call__`) and
variables that end in reference cycles, which only the cyclic collector frees. This program
saves a program state holding one FC model's worth of server state (36,356,525 float32,
139 MiB, the shapes of `models.mnist_fc`) `--saves` times with the collector off, reading the
resident memory (`VmRSS`) after each save, then `--saves` more with a `gc.collect()` after
each, as `simulation.checkpoints.Checkpoints.save` ends. The memory a collection frees goes
back to the allocator, not to the system, so the figure is the growth a save in each phase,
from its first save to its last.

  python -m benchmarks.checkpoint_garbage --saves=5
"""

import asyncio
import collections
import gc
import re
import shutil
import tempfile

from absl import flags
import numpy as np
import tensorflow_federated as tff

from experiments import binary
from tff_flare.algorithms import model_facts
from tff_flare.execution import cleanup
from tff_flare.tasks import models

_SAVES = flags.DEFINE_integer('saves',
                              5,
                              'Checkpoint saves with the cyclic collector off.',
                              lower_bound=1)


def _rss_mib() -> float:
  with open('/proc/self/status') as f:
    kb = next(int(line.split()[1]) for line in f if line.startswith('VmRSS:'))
  return kb / 1024


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  shapes = [
      tuple(s.shape)
      for s in model_facts.model_facts(models.tff_model_fn(models.mnist_fc, (784,))).specs
  ]
  server = [np.full(s, 0.5, np.float32) for s in shapes]
  state_mib = 4 * sum(int(np.prod(s)) for s in shapes) / 2**20
  directory = tempfile.mkdtemp()
  try:
    manager = tff.program.FileProgramStateManager(directory, keep_total=1)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # Keeps what the collection finds in gc.garbage, to count.
    print(f'server state {state_mib:.0f} MiB; resident before the first save {_rss_mib():.0f} '
          'MiB')
    version = 0
    for collect in (False, True):
      readings = []
      for _ in range(_SAVES.value):
        version += 1
        asyncio.run(
            manager.save(collections.OrderedDict(round=np.int64(version), server=server), version))
        if collect:
          gc.collect()
        readings.append(_rss_mib())
        print(f'save {version}{", then gc.collect()" if collect else ""}: resident '
              f'{readings[-1]:.0f} MiB')
      if not collect:
        found = gc.collect()
        graphs = collections.Counter(
            re.sub(r'_\d+$', '', o.name) for o in gc.garbage if type(o).__name__ == 'FuncGraph')
        del gc.garbage[:]
        gc.set_debug(0)  # From here a collection frees what it finds.
        print(f'one gc.collect() after {_SAVES.value} saves: {found} objects in cycles, '
              f'FuncGraphs {dict(graphs)}')
      if len(readings) > 1:
        print(f'{"with" if collect else "without"} a collection after each save: '
              f'{(readings[-1] - readings[0]) / (len(readings) - 1):.1f} MiB a save (from '
              'the first save of the phase to the last)')
    gc.enable()
  finally:
    shutil.rmtree(directory, ignore_errors=True)
  return 0


if __name__ == '__main__':
  binary.run(main)
