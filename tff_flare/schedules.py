"""The regularization-strength schedule of FLARE and EC+FedProx.

The authors keep a Python scalar that starts at 1 and is multiplied by the decay `c` at the
start of every round, before training (spec §3.3, Q8). Round `r` (0-based) therefore uses

    tau_r = tau / tau_decay ** (r + 1),

so round 0 already uses `tau / tau_decay`. `tau` is the paper's TAU and `tau_decay` its c.
The power is computed in float64 and the result rounded to float32 (the authors' repeated
float64 products differ from the power by a few float64 ulps, below float32 resolution).
"""

import tensorflow as tf


def validate_tau(tau: float, tau_decay: float) -> None:
  """Raises `ValueError` for `tau < 0` or `tau_decay <= 0` (or non-finite values)."""
  if not tf.math.is_finite(float(tau)) or tau < 0:
    raise ValueError(f'tau (the paper\'s TAU) must be a finite number >= 0, got {tau}.')
  if not tf.math.is_finite(float(tau_decay)) or tau_decay <= 0:
    raise ValueError(f'tau_decay (the paper\'s c) must be a finite number > 0, got {tau_decay}.')


def tau_at_round(tau: float, tau_decay: float, round_num: int) -> float:
  """Python value of `tau / tau_decay ** (round_num + 1)` (float64)."""
  return float(tau) / float(tau_decay) ** (round_num + 1)


def tau_at_round_tf(tau: tf.Tensor, tau_decay: tf.Tensor, round_num: tf.Tensor) -> tf.Tensor:
  """The same inside a computation: computed in float64, returned as float32."""
  exponent = tf.cast(round_num, tf.float64) + 1.0
  value = _as_float64(tau) / tf.pow(_as_float64(tau_decay), exponent)
  return tf.cast(value, tf.float32)


def _as_float64(x) -> tf.Tensor:
  """A float64 tensor; Python floats are converted directly (not through float32)."""
  return tf.cast(x, tf.float64) if tf.is_tensor(x) else tf.constant(x, tf.float64)
