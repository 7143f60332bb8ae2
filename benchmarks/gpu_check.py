r"""Does this machine train on its GPU? VGG11 on CIFAR-10 shapes, in-process and on TFF.

  python -m benchmarks.gpu_check                # stops, with a message, when TF sees no GPU
  python -m benchmarks.gpu_check --allow_cpu --clients=1 --examples_per_client=500

Prints the devices TensorFlow sees and the device the in-process mode runs a convolution on,
then the seconds of FLARE rounds of the authors' VGG11 (batch 500, p = 5, R = 0.001 %, lr
0.002, momentum 0.99; random images of CIFAR-10's shape) in two modes, one after the other in
this run: in-process (TensorFlow places the work, on the GPU when there is one) and TFF's
local runtime (whose C++ worker is built without CUDA: always the CPU). The first round of
each mode (tracing) is not timed.
"""

import collections
import statistics
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import flare
from tff_flare.execution import modes
from tff_flare.simulation import loop
from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks
from tff_flare.execution import cleanup

_ALLOW_CPU = flags.DEFINE_bool('allow_cpu', False, 'Time the rounds on the CPU when TF sees '
                               'no GPU (slow: minutes per VGG11 step on 2 cores).')
_CLIENTS = flags.DEFINE_integer('clients', 4, 'Clients per round (the authors: 4).')
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 1000, 'Images per client (the '
                                 'authors: 12,500, 25 steps of 500).')
_ROUNDS = flags.DEFINE_integer('rounds', 2, 'Timed rounds per mode.')
_MODES = flags.DEFINE_list('modes', ['inprocess', 'local'], 'Modes to time.')


def _client_data():
  rng = np.random.default_rng(0)
  data = {f'client_{i}': collections.OrderedDict(
      x=rng.integers(0, 256, size=(_EXAMPLES.value, 32, 32, 3), dtype=np.uint8),
      y=rng.integers(0, 10, size=(_EXAMPLES.value, 1)).astype(np.int32))
          for i in range(_CLIENTS.value)}
  return tff.simulation.datasets.TestClientData(data).preprocess(
      lambda d: d.batch(500).map(tasks.scale_batch))


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  gpus = tf.config.list_physical_devices('GPU')
  print(f'TensorFlow {tf.__version__} sees: '
        f'{", ".join(d.name for d in tf.config.list_physical_devices()) or "nothing"}')
  print(f'built with CUDA: {tf.test.is_built_with_cuda()}')
  if not gpus and not _ALLOW_CPU.value:
    print('No GPU: TensorFlow sees none, so the in-process mode would run on the CPU. Check '
          'the driver and a CUDA build of TensorFlow (tf.config.list_physical_devices), or '
          'pass --allow_cpu to time the CPU.', file=sys.stderr)
    return 1
  probe = tf.nn.conv2d(tf.zeros([1, 8, 8, 3]), tf.zeros([3, 3, 3, 4]), 1, 'SAME')
  print(f'the in-process mode places a convolution on: {probe.device}')
  model_fn = models.tff_model_fn(lambda: models.vgg(11, seed=0), (32, 32, 3))
  process = flare.build_flare(
      model_fn, keep_percent=0.001, client_optimizer=tff.learning.optimizers.build_sgdm(
          0.002, momentum=0.99), tau=0.05, tau_decay=1.01, reg_steps=5)
  data = _client_data()
  ids = data.client_ids
  datasets = [data.create_tf_dataset_for_client(cid) for cid in ids]
  initial = tf.nest.map_structure(np.asarray,
                                  tff.learning.models.ModelWeights.from_model(model_fn()))
  steps = -(-_EXAMPLES.value // 500)
  print(f'VGG11 (28,144,010 parameters), FLARE, {_CLIENTS.value} client(s) x '
        f'{_EXAMPLES.value} images = {steps} step(s) of 500 each', flush=True)
  for mode in _MODES.value:
    with modes.build_execution(mode) as execution:
      run = loop.AlgorithmRun('flare', process, execution, initial_weights=initial)
      seconds = []
      for round_num in range(_ROUNDS.value + 1):
        start = time.perf_counter()
        run.run_round(ids, datasets)
        if round_num:
          seconds.append(time.perf_counter() - start)
    per_round = statistics.median(seconds)
    print(f'{mode:<10} {per_round:8.2f} s per round = {per_round / _CLIENTS.value / steps:.2f} '
          f's per client step ({run.where})', flush=True)
  return 0


if __name__ == '__main__':
  app.run(main)
