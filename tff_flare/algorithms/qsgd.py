"""QSGD with error feedback: a compressor that the two papers do not use, as one module.

QSGD (Alistarh et al., 2017) quantizes each tensor `v` of the update to `s` levels of its
norm, stochastically and without bias:

    Q(v)_j = |v| * sign(v_j) * xi_j / s,   xi_j = l_j + 1 with probability s|v_j|/|v| - l_j,
                                           else l_j,  where l_j = floor(s |v_j| / |v|).

With error feedback (the accumulator of EC, `error_feedback`), client i sends
`y_i = Q(u_i)` of `u_i = d_i + a_i` and keeps `a_i <- u_i - y_i`; the server adds the mean.
The client's randomness is a stateless RNG seeded by its key (the number in its id, as the
masking study's independent masks) and its own round counter, kept in its state with the
accumulator, so a run is reproducible and resumes to the same numbers.

Counters: `entries_sent` the nonzeros of `y_i` (entries that quantize to 0 are not sent).
The byte count (`round_functions`) is the project's: a float32 value and an int32 index per
nonzero, or the dense tensor; QSGD's own bit packing (about log2(s + 1) + 1 bits an entry
and one norm per tensor) is not modelled.
"""

import collections
import dataclasses

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import sparsification

ROUNDS = 'rounds'  # The client's round counter in its state (int64), seeding its RNG.
QSGD_LEVELS = hyperparameters.Knob(4, 'qsgd_ef: quantization levels s of QSGD (>= 1).',
                                   hyperparameters.check_int('qsgd_levels', 1))


@dataclasses.dataclass(frozen=True)
class QsgdParams(hyperparameters.Params):
  """QSGD's knob: the levels s."""

  qsgd_levels: int = QSGD_LEVELS.field()


def quantize(v: tf.Tensor, levels: int, seed: tf.Tensor) -> tf.Tensor:
  """QSGD's `Q(v)` of one tensor (zero for a zero tensor), with the stateless `seed`."""
  norm = tf.norm(tf.reshape(v, [-1]))
  scaled = tf.math.divide_no_nan(float(levels) * tf.abs(v), norm)
  lower = tf.floor(scaled)
  up = tf.random.stateless_uniform(tf.shape(v), seed) < scaled - lower
  return norm * tf.sign(v) * (lower + tf.cast(up, v.dtype)) / float(levels)


def seed_of(client_key: tf.Tensor, round_num: tf.Tensor, tensor_index: int) -> tf.Tensor:
  """The stateless seed (int64[2]) of one tensor's quantization."""
  seed = tf.stack([tf.cast(client_key, tf.int64), tf.cast(round_num, tf.int64)])
  return tf.random.experimental.stateless_fold_in(seed, tensor_index)


def qsgd_compressor(levels: int) -> parts.Compressor:
  """QSGD with error feedback as a compressor (see the module docstring)."""

  def initial_state(specs):
    return collections.OrderedDict(error_feedback.zero_accumulator(specs),
                                   **{ROUNDS: tf.constant(0, tf.int64)})

  def compress(delta, client_state, params, client_input, num_examples):
    del params, num_examples
    corrected = [d + a for d, a in zip(delta, client_state[error_feedback.ACCUMULATOR])]
    round_num = client_state[ROUNDS]
    sent = [
        quantize(u, levels, seed_of(client_input, round_num, i)) for i, u in enumerate(corrected)
    ]
    return parts.ClientOutput(
        message=sent,
        client_state=collections.OrderedDict([(error_feedback.ACCUMULATOR,
                                               [u - y for u, y in zip(corrected, sent)]),
                                              (ROUNDS, round_num + 1)]),
        counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(sent)))

  return parts.Compressor(compress=compress,
                          initial_state=initial_state,
                          client_inputs=parts.client_keys())


@process.records_build
def build_qsgd_ef(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    qsgd_levels: int = QSGD_LEVELS.default,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds QSGD with error feedback: plain local training, then `qsgd_compressor`
  (`model_aggregator`: a `tff.aggregators` factory in place of the mean, `composer`).

  Raises:
    ValueError: for `qsgd_levels` not an int >= 1.
  """
  QsgdParams(qsgd_levels=qsgd_levels)  # Checks every knob.
  return composer.compose(model_fn,
                          parts.AlgorithmParts(compressor=qsgd_compressor(qsgd_levels)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
