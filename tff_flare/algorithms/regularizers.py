"""The client-side penalties of FLARE and of EC+FedProx, with their gradients.

FLARE (`docs/faithfulness.md` R5) adds, for the first `reg_steps` local steps of a round, to every regularized
tensor `l` the masked L1 pull toward `server + accumulator`:

    rho_l(w) = tau * sum_j m_lj * |w_lj - (s_lj + a_lj)|,    m_l = 1[|a_l| > theta_l],

where `theta_l` is the `mask_percentile`-th percentile of `|a_l|` (the paper's t) with
tfp's 'nearest' interpolation: the entry at index `rne((n - 1) * t / 100)` of the ascending
sort. The comparison is strict, so entries equal to the threshold (e.g. many zeros) are not
masked (Q9). The term is a raw sum, not divided by the batch size (Q10).

EC+FedProx (`docs/faithfulness.md` R6) adds `tau * sum_j (w_j - s_j)^2` on every step (no 1/2; Q11).

The gradients are written in closed form (`tau * m * sign(w - target)` with sign(0) = 0,
as TensorFlow's gradient of `abs`; and `2 * tau * (w - s)`), so that a local step can add them
to the data-loss gradient without a second tape; tests check them against autodiff.
"""

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import selection


def regularized_tensor_flags(names: Sequence[str],
                             is_regularized: Callable[[str], bool] | None) -> list[bool]:
  """One bool per trainable tensor (by variable name): does the penalty apply to it?

  Args:
    names: the trainable variables' names, in order.
    is_regularized: predicate on a name; None regularizes every tensor.
  """
  if is_regularized is None:
    return [True] * len(names)
  return [bool(is_regularized(name)) for name in names]


def validate_percentile(mask_percentile: float) -> None:
  """Raises `ValueError` unless `mask_percentile` (the paper's t) is in [0, 100]."""
  if (not hyperparameters.is_number(mask_percentile) or not 0.0 <= mask_percentile <= 100.0):
    raise ValueError(
        f'mask_percentile (the paper\'s t) must be in [0, 100], got {mask_percentile}.')


MASK_PERCENTILE = hyperparameters.Knob(
    50.0, "t: FLARE's mask keeps the entries whose |accumulator| exceeds this percentile.",
    validate_percentile)


def percentile_index(num_elements: int, mask_percentile: float) -> int:
  """Index into the ascending sort of `n` values of tfp's 'nearest' percentile `t`.

  `clip(rne((n - 1) * t / 100), 0, n - 1)`, computed in float64 as tfp does.
  """
  position = np.float64(num_elements - 1) * np.float64(mask_percentile) / np.float64(100.0)
  return int(np.clip(np.round(position), 0, num_elements - 1))


def percentile_mask(accumulator: tf.Tensor, mask_percentile: float) -> tf.Tensor:
  """FLARE's mask of one tensor: `1[|a| > percentile_t(|a|)]`, float, shaped like `a`."""
  index = percentile_index(accumulator.shape.num_elements(), mask_percentile)
  threshold = selection.kth_smallest_magnitude(accumulator, index)
  return selection.magnitude_mask(accumulator, threshold)


def flare_masks(accumulator, regularized, mask_percentile: float):
  """Masks for every tensor of a structure; unregularized tensors get an all-zero mask.

  Args:
    accumulator: a list of tensors (the client's accumulator, shaped like the weights).
    regularized: a list of Python bools, one per tensor.
    mask_percentile: the paper's t, in [0, 100].
  """
  return [
      percentile_mask(a, mask_percentile) if reg else tf.zeros_like(a)
      for a, reg in zip(accumulator, regularized)
  ]


def flare_penalty(weights, targets, masks, tau: tf.Tensor) -> tf.Tensor:
  """`tau * sum_l sum_j m_lj |w_lj - target_lj|`, a float32 scalar (`target = s + a`)."""
  terms = [tf.reduce_sum(m * tf.abs(w - t)) for w, t, m in zip(weights, targets, masks)]
  return tau * tf.add_n(terms)


def flare_penalty_gradient(weights, targets, masks, tau: tf.Tensor):
  """Gradient of `flare_penalty` with respect to `weights`: `tau * m * sign(w - target)`."""
  return [tau * (m * tf.sign(w - t)) for w, t, m in zip(weights, targets, masks)]


def proximal_penalty(weights, server_weights, regularized, tau: tf.Tensor) -> tf.Tensor:
  """The authors' FedProx term `tau * sum (w - s)^2` over the regularized tensors."""
  terms = [
      tf.reduce_sum(tf.square(w - s))
      for w, s, reg in zip(weights, server_weights, regularized)
      if reg
  ]
  return tau * tf.add_n(terms) if terms else tf.zeros([], tf.float32)


def proximal_penalty_gradient(weights, server_weights, regularized, tau: tf.Tensor):
  """Gradient of `proximal_penalty`: `2 * tau * (w - s)` on regularized tensors, else 0."""
  return [(tau * 2.0) * (w - s) if reg else tf.zeros_like(w)
          for w, s, reg in zip(weights, server_weights, regularized)]
