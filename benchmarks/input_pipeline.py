r"""Share of a round spent producing client data, for MNIST CNN and CIFAR-10 VGG11.

For each task, built through the task registry from its data files (or synthetic arrays of
the same sizes when a file is missing), it measures:

* data: iterating every batch of every client's dataset of one round, as a client does
  (`create_tf_dataset_for_client` and a full pass, nothing else);
* train: one local optimizer step per batch in a plain `tf.function` (the same
  `local_training` loop the processes run), timed on `--train_batches` batches and
  extrapolated to the round's batch count (a VGG11 round is 100 steps of 500 images, too slow
  to run whole on a CPU);

and prints data / (data + train). Both use the same batches, so the share is what the input
pipeline adds to a round's client work.

  python -m benchmarks.input_pipeline
"""

import os
import statistics
import tempfile
import time

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments import binary
from tff_flare.algorithms import local_training
from tff_flare.tasks import registry as tasks
from tff_flare.execution import cleanup

_MNIST = flags.DEFINE_string('mnist_npz', '../shared/datasets/mnist.npz', 'MNIST .npz.')
_CIFAR = flags.DEFINE_string('cifar10', '../shared/datasets/cifar10_imagefolder.tar.gz',
                             'CIFAR-10 image folder or .tar.gz.')
_TRAIN_BATCHES = flags.DEFINE_integer('train_batches',
                                      3,
                                      'Batches timed for local training.',
                                      lower_bound=1)


def _synthetic_npz(directory, shape, num_train):
  path = os.path.join(directory, f'synthetic_{num_train}.npz')
  rng = np.random.default_rng(0)
  np.savez(path,
           x_train=rng.integers(0, 256, (num_train,) + shape, dtype=np.uint8),
           y_train=rng.integers(0, 10, num_train, dtype=np.uint8),
           x_test=np.zeros((10,) + shape, np.uint8),
           y_test=np.zeros(10, np.uint8))
  return path


def _task(name, path, shape, num_train, tmp):
  if os.path.exists(path):
    source = 'npz' if path.endswith('.npz') else 'imagefolder'
    return tasks.build_task(name, source=source, data_path=path), path
  return tasks.build_task(name, source='npz', data_path=_synthetic_npz(tmp, shape,
                                                                       num_train)), ('synthetic')


def data_seconds(task) -> tuple[float, int]:
  """Seconds to produce one round's batches for every client; and the batch count."""
  start = time.perf_counter()
  count = 0
  for cid in task.train_data.client_ids:
    for _ in task.train_data.create_tf_dataset_for_client(cid):
      count += 1
  return time.perf_counter() - start, count


def train_seconds_per_batch(task, num_batches: int) -> float:
  """Median seconds of one local step on a real batch of the task."""
  model = task.model_fn()
  optimizer = tff.learning.optimizers.build_sgdm(task.hparams['learning_rate'],
                                                 momentum=task.hparams['momentum'] or None)
  weights = tff.learning.models.ModelWeights.from_model(model)
  initial = tf.nest.map_structure(tf.identity, weights)
  batch = next(iter(task.train_data.create_tf_dataset_for_client(task.train_data.client_ids[0])))
  one_batch = tf.data.Dataset.from_tensors(batch)

  @tf.function
  def step():
    return local_training.train_locally(model, optimizer, initial, one_batch).num_steps

  step()  # Trace.
  samples = []
  for _ in range(num_batches):
    start = time.perf_counter()
    step().numpy()
    samples.append(time.perf_counter() - start)
  return statistics.median(samples)


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  tf.get_logger().setLevel('ERROR')
  with tempfile.TemporaryDirectory() as tmp:
    for name, path, shape, num_train in (('mnist_cnn', _MNIST.value, (28, 28), 60_000),
                                         ('cifar10_vgg11', _CIFAR.value, (32, 32, 3), 50_000)):
      task, origin = _task(name, path, shape, num_train, tmp)
      data_seconds(task)  # Warm up (first pass builds the tf.data graph).
      data_s, batches = data_seconds(task)
      step_s = train_seconds_per_batch(task, _TRAIN_BATCHES.value)
      train_s = step_s * batches
      print(f'{name} ({origin}): {len(task.train_data.client_ids)} clients, {batches} batches '
            f'a round; producing data {data_s:.3f} s, local training {train_s:.1f} s '
            f'({step_s:.3f} s/step): data is {100 * data_s / (data_s + train_s):.2f}% of the '
            'client work of a round')


if __name__ == '__main__':
  binary.run(main)
