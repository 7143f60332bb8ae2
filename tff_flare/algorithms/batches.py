"""A client's dataset as tensors: every batch at once, so that no step runs inside tf.data.

TFF hands a client its data as a `tf.data.Dataset` (a `tff.SequenceType`), and the natural
loop, `dataset.reduce(state, step)` or `for batch in dataset` inside a `tf.function`, runs
every training step inside tf.data's iteration. On this project's models that costs 2-3x the
step itself (`benchmarks/step_floor.py` measures it: the authors' CNN step on 600 images
~100 ms as a bare Keras step, ~230 ms inside `dataset.reduce`). Here the dataset is read
once, with no computation in the loop, into tensors holding every batch, and the steps run
in a `tf.while_loop` over them at the cost of a bare step:

  batches = as_batches(dataset)          # one pass of the pipeline, as it is
  for i in range(batches.num_steps):     # (a tf.while_loop)
    batch = batch_at(batches, i)         # the i-th batch, exactly as the dataset gave it

The batches, their order, shuffles and epochs are the dataset's own: it is iterated once,
as before, so a reshuffling pipeline (the GRU's) gives the permutation it gave before. A
final smaller batch is padded to the largest batch and cut back to its size by `batch_at`.
The price is memory: a client's batches of the round are held at once (steps x batch x
example bytes: 1.9 MB for an MNIST client, 153 MB for a CIFAR-10 client of the authors' VGG
runs, both at E = 1).
"""

from typing import Any, NamedTuple

import tensorflow as tf

# More steps than this in one client dataset of unknown length is refused (an error at run
# time): the rounds of both papers take at most a few thousand.
MAX_STEPS = 1 << 16


class ClientBatches(NamedTuple):
  """Every batch of a client dataset, as tensors.

  Attributes:
    batches: a nest like the dataset's elements; each leaf `[num_steps, max_batch, ...]`,
      batch `i` in `[i, :sizes[i]]` and zeros after it.
    sizes: int32 `[num_steps]`, each batch's leading size.
    num_steps: int32 scalar, the number of batches.
    element_spec: the dataset's `element_spec` (the static shapes of one batch).
  """

  batches: Any
  sizes: tf.Tensor
  num_steps: tf.Tensor
  element_spec: Any


def _leading_size(batch) -> tf.Tensor:
  return tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int32)[0]


def _no_batches(spec: tf.TensorSpec) -> tf.Tensor:
  """Zero batches of `spec`: `[0, *shape]`, unknown dimensions as 0 (`reduce` relaxes them)."""
  if spec.shape.rank is None:
    raise ValueError(f'A client dataset needs elements of known rank, got {spec}.')
  return tf.zeros([0] + [d or 0 for d in spec.shape.as_list()], spec.dtype)


def as_batches(dataset: tf.data.Dataset) -> ClientBatches:
  """Reads every batch of `dataset` into tensors (one pass; call inside a `tf.function`).

  Raises (when run):
    tf.errors.InvalidArgumentError: an infinite dataset, or one of unknown length with
      `MAX_STEPS` batches or more.
  """
  spec = dataset.element_spec
  cardinality = dataset.cardinality()
  known = cardinality >= 0
  with tf.control_dependencies([
      tf.debugging.assert_none_equal(
          cardinality,
          tf.constant(tf.data.INFINITE_CARDINALITY, tf.int64),
          message='A client dataset must be finite (is it repeated without a count?).')
  ]):
    # The length where tf.data knows it, else the cap (a pipeline with an `unbatch`, say).
    chunk = tf.where(known, tf.maximum(cardinality, 1), tf.constant(MAX_STEPS, tf.int64))
  sized = dataset.map(lambda *batch: (batch if len(batch) > 1 else batch[0], _leading_size(batch)))
  # All batches as the one element of a padded batch; an empty dataset gives the empty
  # element after it. (`get_single_element`: a `reduce` here makes every step ~20 % slower.)
  empty = (tf.nest.map_structure(_no_batches, spec), tf.zeros([0], tf.int32))
  every_batch = sized.padded_batch(chunk).concatenate(tf.data.Dataset.from_tensors(empty))
  batches, sizes = every_batch.take(1).get_single_element()
  num_steps = tf.shape(sizes)[0]
  with tf.control_dependencies([
      tf.debugging.assert_equal(
          tf.logical_or(known,
                        tf.cast(num_steps, tf.int64) < MAX_STEPS),
          True,
          message=f'A client dataset of unknown length has {MAX_STEPS} batches or more.')
  ]):
    num_steps = tf.identity(num_steps)
  return ClientBatches(batches=batches, sizes=sizes, num_steps=num_steps, element_spec=spec)


def batch_at(client_batches: ClientBatches, index: tf.Tensor):
  """Batch `index`, with the dataset's static element shapes."""
  size = client_batches.sizes[index]
  return tf.nest.map_structure(lambda t, s: tf.ensure_shape(t[index, :size], s.shape),
                               client_batches.batches, client_batches.element_spec)
