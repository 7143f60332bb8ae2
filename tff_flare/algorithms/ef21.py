"""EF21 with top-k compression, as defined and as the authors ran it.

Client i keeps a state `g_i` (zero at the start). Each round (`docs/faithfulness.md` R7):

    d_i = w_i - s,   c_i = TopK_R(d_i - g_i),   g_i <- g_i + c_i.

As defined (`dense_state_shortcut=False`, default): the client sends the sparse correction
`c_i`; the server keeps `G = (1/N) sum_{all i} g_i` through the running sum
`G <- G + (1/N) sum_{present i} c_i` (`N = total_clients`) and steps `s <- s + G`.

The authors' shortcut (`dense_state_shortcut=True`, Q12): the client sends its dense `g_i`
and the server steps `s <- s + mean_{present i} g_i`. Both agree under full participation
with zero initial states; with clients sitting out rounds they differ (the shortcut drops
the absent clients' states from the step).

Metrics: `entries_sent` counts what is on the wire (nonzeros of `c_i`, or of the dense `g_i`
under the shortcut); `correction_entries` always counts the nonzeros of `c_i`.
"""

import dataclasses
import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import sparsification

EF21_STATE = 'ef21_state'


@dataclasses.dataclass(frozen=True)
class Ef21Params(hyperparameters.Params):
  """EF21's knobs: the paper's R and the top-k rule (N, the population, comes from the run)."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()


def zero_ef21_state(specs) -> collections.OrderedDict:
  """A new client's state: `OrderedDict(ef21_state=[zeros shaped like each weight])`."""
  return collections.OrderedDict([(EF21_STATE, [tf.zeros(s.shape, s.dtype) for s in specs])])


def running_mean_of_corrections(total_clients: int) -> parts.Aggregation:
  """The server side of EF21: `G <- G + sum_present(c_i) / total_clients`; the update is `G`.

  The state `G` (shaped like the model) is the mean of all clients' EF21 states, present or
  not, as long as every client starts from zero. A non-finite client adds nothing and keeps
  its state, so this stays true.

  Raises:
    ValueError: unless `total_clients` is a positive int.
  """
  if not hyperparameters.is_int(total_clients) or total_clients < 1:
    raise ValueError(f'total_clients must be a positive int, got {total_clients!r}.')

  def initial_state(specs):
    return [tf.zeros(s.shape, s.dtype) for s in specs]

  def finalize(running, correction_sum, weight_sum):
    del weight_sum  # G is a mean over all clients, present or not.
    new_running = [g + c / float(total_clients) for g, c in zip(running, correction_sum)]
    return new_running, new_running

  return parts.Aggregation(initial_state=initial_state, finalize=finalize)


def ef21_compressor(keep_percent: float, rule: sparsification.TopKRule, *,
                    dense_state_shortcut: bool, total_clients: int | None) -> parts.Compressor:
  """EF21's client side (`c = TopK(d - g)`, `g <- g + c`) with its server aggregation."""

  def compress(delta, client_state, params, client_input, num_examples):
    del params, client_input, num_examples
    state = client_state[EF21_STATE]
    split = sparsification.sparsify([d - g for d, g in zip(delta, state)], keep_percent, rule)
    correction = split.sent
    new_state = [g + c for g, c in zip(state, correction)]
    message = new_state if dense_state_shortcut else correction
    return parts.ClientOutput(message=message,
                              client_state=collections.OrderedDict([(EF21_STATE, new_state)]),
                              counters=collections.OrderedDict(
                                  entries_sent=(sparsification.count_nonzero(message)
                                                if dense_state_shortcut else split.num_sent),
                                  correction_entries=split.num_sent))

  if dense_state_shortcut:
    aggregation = parts.weighted_mean()
  else:
    if total_clients is None:
      raise ValueError('EF21 without the dense-state shortcut needs total_clients (the N of '
                       "the server's running mean of client states).")
    aggregation = running_mean_of_corrections(total_clients)
  return parts.Compressor(compress=compress, initial_state=zero_ef21_state, aggregation=aggregation)


@process.records_build
def build_ef21(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    total_clients: int | None = None,
    dense_state_shortcut: bool = False,
    topk_rule: sparsification.TopKRule | str = sparsification.TOPK_RULE.default,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
) -> process.AlgorithmProcess:
  """Builds EF21.

  Unlike `tff.learning.algorithms`' processes, `next` takes and returns the round's client
  states (`process`): EF21's clients keep their state g from round to round, which TFF's
  learning processes have no place for; `tff_flare.simulate` (or `simulation.loop`) keeps
  them.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: the paper's R, the percentage of entries of each tensor to send.
    client_optimizer: local optimizer, re-initialized every round.
    total_clients: N, the number of clients whose states the server's running mean covers;
      required unless `dense_state_shortcut`.
    dense_state_shortcut: send the dense state and average the present clients' states (the
      authors' code) instead of the sparse correction with a server running sum.
    topk_rule: a `sparsification.TopKRule` or its value: `AUTHORS` (the default)
      reproduces the authors' counts, `GLOBAL` is one top-k over the whole update.
    server_optimizer: applied to the negated aggregate; default SGD with lr 1.

  Returns:
    An `AlgorithmProcess` with client state `OrderedDict(ef21_state=[...])`.

  Raises:
    ValueError: for an out-of-range `keep_percent`, or a missing/invalid `total_clients`.
  """
  Ef21Params(keep_percent=keep_percent, topk_rule=topk_rule)  # Checks every knob.
  rule = sparsification.as_rule(topk_rule)
  error_feedback.check_fits_model(model_fn, keep_percent, rule)
  compressor = ef21_compressor(keep_percent,
                               rule,
                               dense_state_shortcut=dense_state_shortcut,
                               total_clients=total_clients)
  return composer.compose(model_fn,
                          parts.AlgorithmParts(compressor=compressor),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer)
