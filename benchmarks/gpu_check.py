r"""Does this machine train on its GPU? VGG or the GRU of the FLARE paper, in-process and on TFF.

  python -m benchmarks.gpu_check                      # VGG11; stops, with a message, without GPU
  python -m benchmarks.gpu_check --model=gru          # the authors' GRU (the project's layer)
  python -m benchmarks.gpu_check --model=gru_keras    # the same with Keras's own GRU layer
  python -m benchmarks.gpu_check --allow_cpu --clients=1 --examples_per_client=500

Prints the devices TensorFlow sees and the device the in-process mode runs an op on, then the
seconds of FLARE rounds of the model (`benchmarks/synthetic.py`: random inputs of the real
shapes; VGG: batch 500, p = 5; the GRU: batches of 8 x 100 characters, every step
regularized; R = 0.001 %) in two modes, one after the other in this run: in-process
(TensorFlow places the work, on the GPU when there is one) and TFF's local runtime (whose C++
worker is built without CUDA: always the CPU). The first round of each mode (tracing) is not
timed.
"""

import statistics
import sys
import time

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import synthetic
from experiments import binary
from tff_flare.algorithms import registry
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.simulation import loop

_MODEL = flags.DEFINE_enum('model', 'vgg11', ['vgg11', 'vgg16', 'gru', 'gru_keras'], 'The model.')
_ALLOW_CPU = flags.DEFINE_bool(
    'allow_cpu', False, 'Time the rounds on the CPU when TF sees '
    'no GPU (slow: seconds to minutes per step on 2 cores).')
_CLIENTS = flags.DEFINE_integer('clients',
                                4,
                                'Clients per round (the authors\' VGG: 4).',
                                lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client',
                                 1000, 'Examples per client (images; '
                                 "the GRU's sequences of 100 characters).",
                                 lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 2, 'Timed rounds per mode.', lower_bound=1)
_MODES = flags.DEFINE_list('modes', ['inprocess', 'local'], 'Modes to time.')
binary.each_one_of(_MODES, ('inprocess', 'local'), 'inprocess, local')


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  gpus = tf.config.list_physical_devices('GPU')
  print(f'TensorFlow {tf.__version__} sees: '
        f'{", ".join(d.name for d in tf.config.list_physical_devices()) or "nothing"}')
  print(f'built with CUDA: {tf.test.is_built_with_cuda()}')
  if not gpus and not _ALLOW_CPU.value:
    print(
        'No GPU: TensorFlow sees none, so the in-process mode would run on the CPU. Check '
        'the driver and a CUDA build of TensorFlow (tf.config.list_physical_devices), or '
        'pass --allow_cpu to time the CPU.',
        file=sys.stderr)
    return 1
  probe = tf.matmul(tf.ones([8, 8]), tf.ones([8, 8]))
  print(f'the in-process mode places a matmul on: {probe.device}')
  model = _MODEL.value
  spec = synthetic.MODELS[model]
  batch = 8 if spec.text else 500
  task = synthetic.task(model, _CLIENTS.value, _EXAMPLES.value, batch)
  hparams = registry.Hyperparameters(
      client_optimizer=synthetic.client_optimizer(model),
      keep_percent=0.001,
      tau=0.05,
      tau_decay=1.01,
      reg_steps=spec.reg_steps,
      is_regularized=(lambda name: 'embedding' not in name) if spec.text else None)
  process = registry.build('flare', task.model_fn, hparams)
  ids = task.train_data.client_ids
  datasets = task.client_datasets(ids, 0)
  initial = tf.nest.map_structure(np.asarray,
                                  tff.learning.models.ModelWeights.from_model(task.model_fn()))
  steps = sum(1 for _ in datasets[0])
  print(
      f'{model} ({sum(np.size(w) for w in initial.trainable):,} parameters), FLARE, '
      f'{_CLIENTS.value} client(s) x {steps} step(s) of {batch}',
      flush=True)
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
    print(
        f'{mode:<10} {per_round:8.2f} s per round = {per_round / _CLIENTS.value / steps:.3f} '
        f's per client step ({run.where})',
        flush=True)
  return 0


if __name__ == '__main__':
  binary.run(main)
