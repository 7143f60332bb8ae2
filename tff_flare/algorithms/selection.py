"""Exact order statistics of large tensors in a few passes over memory.

FLARE spends its own work on two selections per tensor and round: the mask threshold (the
median of `|a|`, `flare`) and the top-k cut (the k'-th largest of `|u|`,
`sparsification`). On a 16.6M-entry kernel a full `tf.math.top_k` or `NthElement` walks the
tensor with a heap or a partition in one thread; these functions first narrow the search
with a cheap pass and then select exactly among a small candidate set. Results equal
`tf.math.top_k(x, k).values[-1]` and `NthElement` exactly (tested), duplicates included:

* `kth_largest(m, k)`: the tensor is viewed as rows (its last axis); if `t` is the k-th
  largest of the row maxima, at least k entries are `>= t`, so the k-th largest entry `v`
  is `>= t` and every entry `>= v` lies in a row whose maximum is `>= t`. Those rows (about
  k of them) hold the answer: one `reduce_max` pass and a small `top_k`.
* `kth_smallest(m, index)`: a strided sample brackets the wanted rank with high probability
  (5 standard deviations of the sample's rank error); one counting pass and one gathering
  pass leave the entries inside the bracket, and `NthElement` selects among them. When the
  bracket misses (or most entries tie), the full `NthElement` runs instead: always exact.

Small tensors go straight to `top_k` / `NthElement`.

The algorithms call the magnitude functions below (`kth_largest_magnitude`,
`kth_smallest_magnitude`, `magnitude_mask`, `split_by_magnitude`, `masked_sign_pull`). Inside
`native_kernels()` (the in-process execution traces its client work there) they run as the
compiled kernels of `kernels/magnitude_ops.cc`, when `make kernels` has built them: each a
single pass or two over memory, instead of TensorFlow's several ops with a fresh output each.
Everywhere else (TFF's runtime cannot load them) and without the build, the TensorFlow ops
run. Both give the same values, exactly (tested).
"""

import contextlib
import contextvars
import math
import pathlib

from absl import logging
import tensorflow as tf

NATIVE_LIBRARY = pathlib.Path(__file__).resolve().parent / 'kernels' / 'magnitude_ops.so'
_use_native = contextvars.ContextVar('tff_flare_native_kernels', default=False)
_loaded = {}

# Below this many entries the plain kernels are as fast.
_SMALL = 1 << 16
_SAMPLE_SIZE = 1 << 15
_BRACKET_SIGMAS = 5.0


def kth_largest(magnitudes: tf.Tensor, k) -> tf.Tensor:
  """The k-th largest entry of `magnitudes` (1-based, duplicates counted), a scalar.

  Args:
    magnitudes: a tensor of non-negative values with a fully defined shape.
    k: Python int in [1, n], or an int32 scalar tensor (then a plain `top_k`).
  """
  n = magnitudes.shape.num_elements()
  rank = magnitudes.shape.rank
  if tf.is_tensor(k) or n < _SMALL or rank < 2:
    return tf.math.top_k(tf.reshape(magnitudes, [-1]), k=k, sorted=True).values[-1]
  columns = int(magnitudes.shape[-1])
  rows = n // columns
  if rows < 4 * k or columns < 8:
    return tf.math.top_k(tf.reshape(magnitudes, [-1]), k=k, sorted=True).values[-1]
  table = tf.reshape(magnitudes, [rows, columns])
  row_max = tf.reduce_max(table, axis=1)
  floor = tf.math.top_k(row_max, k=k, sorted=True).values[-1]
  candidate_rows = tf.reshape(tf.where(row_max >= floor), [-1])
  candidates = tf.reshape(tf.gather(table, candidate_rows), [-1])
  return tf.math.top_k(candidates, k=k, sorted=True).values[-1]


def kth_smallest(values: tf.Tensor, index: int) -> tf.Tensor:
  """The `index`-th smallest entry of a 1-D tensor (0-based, duplicates counted): `NthElement`.

  Args:
    values: a 1-D float tensor with a static length n.
    index: Python int in [0, n).
  """
  n = values.shape.num_elements()
  if n < _SMALL:
    return tf.raw_ops.NthElement(input=values, n=index, reverse=False)
  stride = max(1, n // _SAMPLE_SIZE)
  sample = tf.sort(values[::stride])
  size = (n + stride - 1) // stride
  position = index / (n - 1) * (size - 1)
  margin = math.ceil(_BRACKET_SIGMAS * math.sqrt(size * 0.25)) + 1
  low = sample[max(0, math.floor(position) - margin)]
  high = sample[min(size - 1, math.ceil(position) + margin)]
  below = tf.math.count_nonzero(values < low, dtype=tf.int32)
  candidates = tf.boolean_mask(values, tf.logical_and(values >= low, values <= high))
  inside = tf.logical_and(below <= index, index < below + tf.size(candidates))
  return tf.cond(inside,
                 lambda: tf.raw_ops.NthElement(input=candidates, n=index - below, reverse=False),
                 lambda: tf.raw_ops.NthElement(input=values, n=index, reverse=False))


def native_ops():
  """The compiled kernels (a module of TF ops), or None when they are not built."""
  if 'ops' not in _loaded:
    _loaded['ops'] = None
    if NATIVE_LIBRARY.exists():
      try:
        _loaded['ops'] = tf.load_op_library(str(NATIVE_LIBRARY))
      except (tf.errors.NotFoundError, OSError) as e:
        logging.warning('%s cannot be loaded (%s): the TensorFlow ops run instead.', NATIVE_LIBRARY,
                        e)
  return _loaded['ops']


@contextlib.contextmanager
def native_kernels(enabled: bool = True):
  """Functions traced in this block (in this thread) use the compiled kernels, if built."""
  token = _use_native.set(enabled and native_ops() is not None)
  try:
    yield
  finally:
    _use_native.reset(token)


def _native():
  return native_ops() if _use_native.get() else None


def kth_largest_magnitude(x: tf.Tensor, k) -> tf.Tensor:
  """The k-th largest `|x|` (1-based, duplicates counted); `k` a Python int or a tensor."""
  ops = _native()
  if ops is not None and not tf.is_tensor(k):
    return ops.magnitude_order_statistic(x, x.shape.num_elements() - k)
  return kth_largest(tf.abs(x), k)


def kth_smallest_magnitude(x: tf.Tensor, index: int) -> tf.Tensor:
  """The `index`-th smallest `|x|` (0-based, duplicates counted): `NthElement` of `|x|`."""
  ops = _native()
  if ops is not None:
    return ops.magnitude_order_statistic(x, index)
  return kth_smallest(tf.reshape(tf.abs(x), [-1]), index)


def magnitude_mask(x: tf.Tensor, threshold: tf.Tensor) -> tf.Tensor:
  """`1[|x| > threshold]` as `x`'s float dtype."""
  ops = _native()
  if ops is not None:
    return ops.magnitude_mask(x, threshold)
  return tf.cast(tf.abs(x) > threshold, x.dtype)


def split_by_magnitude(x: tf.Tensor, threshold: tf.Tensor):
  """`(above, rest, count)`: `x` where `|x| > threshold` (else 0), `x - above`, and how many.

  `rest` is exact: zero where an entry went to `above`, the entry itself elsewhere.
  """
  ops = _native()
  if ops is not None:
    return ops.split_by_magnitude(x, threshold)
  above = tf.where(tf.abs(x) > threshold, x, tf.zeros_like(x))
  return above, x - above, tf.math.count_nonzero(above, dtype=tf.int64)


def masked_sign_pull(w: tf.Tensor, s: tf.Tensor, a: tf.Tensor, threshold: tf.Tensor,
                     tau: tf.Tensor) -> tf.Tensor:
  """`tau * (1[|a| > threshold] * sign(w - (s + a)))`, shaped like `w` (FLARE's pull
  gradient, `flare`): the compiled kernel makes it in one pass, without the mask or the target
  `s + a` as tensors of their own; the TensorFlow ops give the same values."""
  ops = _native()
  if ops is not None:
    return ops.masked_sign_pull(w, s, a, threshold, tau)
  return tau * (magnitude_mask(a, threshold) * tf.sign(w - (s + a)))
