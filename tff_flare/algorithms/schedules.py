"""The regularization-strength schedule of FLARE and EC+FedProx, as a server round schedule.

The authors keep a Python scalar that starts at 1 and is multiplied by the decay `c` at the
start of every round, before training (`docs/faithfulness.md` Q8). Round `r` (0-based)
therefore uses

    tau_r = tau / tau_decay ** (r + 1),

so round 0 already uses `tau / tau_decay`. `tau` is the paper's TAU and `tau_decay` its c.
The power is computed in float64 and the result rounded to float32 (the authors' repeated
float64 products differ from the power by a few float64 ulps, below float32 resolution).
"""

import collections
import math

import tensorflow as tf

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import parts


def validate_tau(tau: float, tau_decay: float) -> None:
  """Raises `ValueError` for `tau < 0` or `tau_decay <= 0` (or non-finite values)."""
  check_tau(tau)
  check_tau_decay(tau_decay)


def check_tau(tau: float) -> None:
  if not hyperparameters.is_number(tau) or not math.isfinite(tau) or tau < 0:
    raise ValueError(f'tau (the paper\'s TAU) must be a finite number >= 0, got {tau!r}.')


def check_tau_decay(tau_decay: float) -> None:
  if not hyperparameters.is_number(tau_decay) or not math.isfinite(tau_decay) or tau_decay <= 0:
    raise ValueError(f'tau_decay (the paper\'s c) must be a finite number > 0, got {tau_decay!r}.')


TAU = hyperparameters.Knob(
    0.05, 'TAU: the pull (FLARE) / proximal (EC+FedProx) strength '
    'before decay.', check_tau)
TAU_DECAY = hyperparameters.Knob(1.1, 'c: round r uses TAU / c**(r+1).', check_tau_decay)


def tau_at_round(tau: float, tau_decay: float, round_num: int) -> float:
  """Python value of `tau / tau_decay ** (round_num + 1)` (float64)."""
  return float(tau) / float(tau_decay)**(round_num + 1)


def tau_at_round_tf(tau: tf.Tensor, tau_decay: tf.Tensor, round_num: tf.Tensor) -> tf.Tensor:
  """The same inside a computation: computed in float64, returned as float32."""
  exponent = tf.cast(round_num, tf.float64) + 1.0
  value = _as_float64(tau) / tf.pow(_as_float64(tau_decay), exponent)
  return tf.cast(value, tf.float32)


def _as_float64(x) -> tf.Tensor:
  """A float64 tensor; Python floats are converted directly (not through float32)."""
  return tf.cast(x, tf.float64) if tf.is_tensor(x) else tf.constant(x, tf.float64)


def tau_schedule(tau: float, tau_decay: float) -> parts.RoundSchedule:
  """The server keeps `(round_num, tau, tau_decay)` and broadcasts `tau_r` each round.

  `tau_r` is computed inside the computation from the state, never by rebuilding the
  process; the round's metrics report it as `tau`.

  Raises:
    ValueError: see `validate_tau`.
  """
  validate_tau(tau, tau_decay)

  def initial_state():
    return collections.OrderedDict(round_num=tf.constant(0, tf.int32),
                                   tau=tf.constant(tau, tf.float64),
                                   tau_decay=tf.constant(tau_decay, tf.float64))

  def round_params(state):
    return collections.OrderedDict(
        tau=tau_at_round_tf(state['tau'], state['tau_decay'], state['round_num']))

  def advance(state):
    return collections.OrderedDict(round_num=state['round_num'] + 1,
                                   tau=state['tau'],
                                   tau_decay=state['tau_decay'])

  return parts.RoundSchedule(initial_state=initial_state,
                             round_params=round_params,
                             advance=advance,
                             report=round_params)
