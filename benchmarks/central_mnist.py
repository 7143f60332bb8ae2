r"""Sanity check of the MNIST pipeline and CNN: one epoch of central training on real MNIST.

Trains the authors' CNN (double softmax) with plain Keras on all 60,000 training images of
the given Keras-layout `.npz` for one epoch and reports test loss and accuracy on the 10,000
test images, plus the initial test loss/accuracy (the authors' seeded initialization gives
2.3013 / 0.1011 under TF 2.14, the first entry of the golden retrace, `docs/faithfulness.md`).

  python -m benchmarks.central_mnist --npz=../shared/datasets/mnist.npz
"""

import time

from absl import flags
import tensorflow as tf

from experiments import binary
from tff_flare.tasks import data_sources
from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks
from tff_flare.execution import cleanup

_NPZ = flags.DEFINE_string('npz', '../shared/datasets/mnist.npz', 'Keras-layout MNIST .npz.')
_BATCH = flags.DEFINE_integer('batch_size', 64, 'Batch size.', lower_bound=1)
_LR = flags.DEFINE_float('learning_rate',
                         0.215,
                         'SGD learning rate (the authors\' CNN lr).',
                         lower_bound=0.0,
                         upper_bound=100.0)
_MOMENTUM = flags.DEFINE_float('momentum', 0.0, 'SGD momentum.', lower_bound=0.0, upper_bound=1.0)
_DOUBLE_SOFTMAX = flags.DEFINE_bool('double_softmax', True,
                                    "Keep the authors' second softmax (Q4).")


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  arrays = data_sources.load_images('mnist', 'npz', _NPZ.value)
  x_train = tasks.scale_pixels(arrays.x_train, (28, 28, 1))
  x_test = tasks.scale_pixels(arrays.x_test, (28, 28, 1))
  model = models.mnist_cnn(double_softmax=_DOUBLE_SOFTMAX.value)
  model.compile(optimizer=tf.keras.optimizers.SGD(_LR.value, momentum=_MOMENTUM.value),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
  initial = model.evaluate(x_test, arrays.y_test, batch_size=600, verbose=0)
  start = time.perf_counter()
  model.fit(x_train, arrays.y_train, batch_size=_BATCH.value, epochs=1, shuffle=True, verbose=0)
  seconds = time.perf_counter() - start
  final = model.evaluate(x_test, arrays.y_test, batch_size=600, verbose=0)
  print(f'initial test loss {initial[0]:.4f} accuracy {initial[1]:.4f}')
  print(f'after 1 epoch (double softmax {_DOUBLE_SOFTMAX.value}, batch {_BATCH.value}, '
        f'SGD lr {_LR.value} momentum {_MOMENTUM.value}, '
        f'{seconds:.0f} s): test loss {final[0]:.4f} accuracy {final[1]:.4f}')


if __name__ == '__main__':
  binary.run(main)
