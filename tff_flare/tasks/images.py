"""The image tasks: MNIST, CIFAR-10 and CIFAR-100 split over clients, Keras models.

One `ImageTaskSpec` per task (the authors' defaults: `docs/faithfulness.md` R9, R11, R12;
the masking study's: `docs/masking.md`); `build_image_task` builds any of them. Client and
test datasets hold the uint8 pixels (a quarter of the bytes TFF serializes with each
dataset; CIFAR's test set as float32 would exceed TFF's 100 MB limit) and scale each batch
to [0, 1] in float32.
"""

import collections
import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tff_flare.tasks import data_sources
from tff_flare.tasks import models
from tff_flare.tasks import partitions
from tff_flare.tasks import task as task_lib


@dataclasses.dataclass(frozen=True)
class ImageTaskSpec:
  dataset: str
  model: Callable[..., tf.keras.Model]
  feature_shape: tuple[int, ...]
  total_clients: int
  num_clients: int
  batch_size: int
  learning_rate: float
  momentum: float
  reg_steps: int | str
  partition: str = 'contiguous'


def _vgg(depth, classes):
  return lambda seed: models.vgg(depth, num_classes=classes, seed=seed)


def _mnist_cnn(seed, double_softmax=True):
  return models.mnist_cnn(double_softmax=double_softmax, seed=0 if seed is None else seed)


# The fixed CNN (`double_softmax=False`): without the second softmax its gradients are not
# damped, so the authors' 0.215 need not train it. Measured (the `fixed_cnn_learning_rate`
# figure of `experiments/reproduce.py`: 50 rounds of `cnn_unavailable_3`, lr 0.01, 0.03, 0.1,
# 0.215): 0.215 trains it (FedAvg 0.83, FLARE 0.57), FLARE best of the four; FedAvg's best is
# 0.1 (0.91, FLARE 0.41 there). The authors' value is kept, so that the fixed CNN differs
# from theirs in the softmax alone.
FIXED_CNN_LEARNING_RATE = 0.215

IMAGE_TASKS = {
    'mnist_fc':
        ImageTaskSpec('mnist', lambda seed: models.mnist_fc(seed=seed), (784,), 100, 10, 600, 0.001,
                      0.99, 1),
    'mnist_cnn':
        ImageTaskSpec('mnist', _mnist_cnn, (28, 28, 1), 100, 10, 600, 0.215, 0.99, 1),
    # Ours: a convex model for the sparsity-scaling study (10 IID clients of 6,000 images).
    'mnist_logreg':
        ImageTaskSpec('mnist', models.mnist_logreg, (784,), 10, 10, 600, 0.1, 0.0, 1, 'iid'),
    'cifar10_masking_cnn':
        ImageTaskSpec('cifar10', lambda seed: models.masking_cnn(seed or 0), (32, 32, 3), 100, 100,
                      32, 0.05, 0.0, 'all', 'iid'),
}
# Tasks whose model has the authors' double softmax (`--nodouble_softmax` fixes it).
DOUBLE_SOFTMAX_TASKS = ('mnist_cnn',)
for _depth in (11, 16, 19):
  IMAGE_TASKS[f'cifar10_vgg{_depth}'] = ImageTaskSpec('cifar10', _vgg(_depth, 10), (32, 32, 3), 4,
                                                      4, 500, 0.002, 0.99, 5)
  IMAGE_TASKS[f'cifar100_vgg{_depth}'] = ImageTaskSpec('cifar100', _vgg(_depth, 100), (32, 32, 3),
                                                       4, 4, 500, 0.01, 0.99, 5)


def build_image_task(name: str, o: task_lib.TaskOptions) -> task_lib.Task:
  """An image task of `IMAGE_TASKS`: the images split over clients, a Keras model."""
  spec = IMAGE_TASKS[name]
  source = data_sources.choose_source(spec.dataset, o.source, o.data_dir, 'keras', o.data_path)
  arrays = data_sources.load_images(spec.dataset, source, o.data_path, o.data_dir)
  total_clients = o.total_clients or spec.total_clients
  num_clients = o.num_clients or min(spec.num_clients, total_clients)
  if num_clients > total_clients:
    raise ValueError(f'num_clients ({num_clients}) exceeds total_clients ({total_clients}).')
  parts = partitions.build(o.partition or spec.partition,
                           arrays.y_train,
                           total_clients,
                           seed=o.seed,
                           **o.partition_options())[:num_clients]
  # Only the clients in use are kept; their indices are renumbered 0..n-1. Pixels stay uint8
  # in the datasets (TFF serializes a client's dataset with its data, up to 100 MB) and are
  # scaled per batch.
  used = np.concatenate(parts)
  x = arrays.x_train[used].reshape((-1,) + spec.feature_shape)
  y = arrays.y_train[used].astype(np.int32).reshape(-1, 1)
  ends = np.cumsum([len(p) for p in parts])
  examples = partitions.to_client_data({
      'x': x,
      'y': y
  }, [np.arange(end - len(p), end) for p, end in zip(parts, ends)])
  batch = spec.batch_size if o.batch_size is None else o.batch_size
  round_train_data = None
  if o.local_steps is not None:  # A capped stream, reshuffled every round.
    round_train_data = lambda r: examples.preprocess(lambda d: task_lib.capped_client(
        d, batch, o.local_steps, task_lib.round_seed(o.seed, r)).map(scale_batch))
    train = round_train_data(0)
  else:
    train = examples.preprocess(
        lambda d: task_lib.batch_client(d, batch, o.epochs).map(scale_batch))
  if o.eval_data == 'train':  # The federated objective: every example of the clients in use.
    x_eval, y_eval = x, y
  else:
    x_eval = arrays.x_test.reshape((-1,) + spec.feature_shape)
    y_eval = arrays.y_test.astype(np.int32).reshape(-1, 1)
  test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x_eval, y=y_eval)).batch(
      max(batch, 500)).map(scale_batch)
  learning_rate = spec.learning_rate
  if o.double_softmax is None or o.double_softmax:
    keras_builder = lambda: spec.model(o.model_seed)
  else:
    keras_builder = lambda: spec.model(o.model_seed, double_softmax=False)
    learning_rate = FIXED_CNN_LEARNING_RATE
  return task_lib.Task(name,
                       models.tff_model_fn(keras_builder, spec.feature_shape),
                       train,
                       test,
                       dict(learning_rate=learning_rate,
                            momentum=spec.momentum,
                            reg_steps=spec.reg_steps,
                            batch_size=batch,
                            total_clients=total_clients,
                            num_clients=num_clients),
                       round_train_data=round_train_data,
                       data_fingerprint=arrays.fingerprint)


def scale_pixels(x: np.ndarray, feature_shape: tuple[int, ...]) -> np.ndarray:
  """uint8 pixels to float32 in [0, 1], reshaped to [N, *feature_shape]."""
  return (x.astype(np.float32) / 255.0).reshape((-1,) + tuple(feature_shape))


def scale_batch(batch: collections.OrderedDict) -> collections.OrderedDict:
  """uint8 pixels `x` to float32 in [0, 1] (the same float32 division as `scale_pixels`)."""
  return collections.OrderedDict(x=tf.cast(batch['x'], tf.float32) / 255.0, y=batch['y'])
