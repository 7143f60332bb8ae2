"""Top-k error feedback, the compressor of EC, EC+FedProx, EC-FFL and FLARE.

A client keeps an accumulator `a` (zero at the start, shaped like the model's trainable
weights). Each round it adds its local delta, sends the top-k of the sum and keeps the rest
(`docs/faithfulness.md` R4):

    u = delta + a,   y = TopK_R(u),   a <- u - y.

`topk_compressor(keep_percent)` is this as a `parts.Compressor`; with `keep_percent=None` it
takes R from the round's parameters (`params['keep_percent']`, EC-FFL's adapted R').
"""

import collections
from collections.abc import Sequence

import tensorflow as tf

from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import sparsification

ACCUMULATOR = 'accumulator'


def zero_accumulator(specs: Sequence[tf.TensorSpec]) -> collections.OrderedDict:
  """A new client's state: `OrderedDict(accumulator=[zeros shaped like each weight])`."""
  return collections.OrderedDict([(ACCUMULATOR, [tf.zeros(s.shape, s.dtype) for s in specs])])


def compress(delta, accumulator, keep_percent, rule: sparsification.TopKRule) -> parts.ClientOutput:
  """The error-feedback step, as a client's output.

  Args:
    delta: list of tensors, the local model delta `w - s`.
    accumulator: list of tensors shaped like `delta`, the residual kept from earlier rounds.
    keep_percent: the paper's R, in percent (a float, or a float32 tensor).
    rule: the top-k rule.

  Returns:
    A `parts.ClientOutput` whose message is `sent = TopK_R(delta + accumulator)` (and its
    nonzeros the `entries_sent`) and whose state is
    `OrderedDict(accumulator=delta + accumulator - sent)`.
  """
  corrected = [d + a for d, a in zip(delta, accumulator)]
  split = sparsification.sparsify(corrected, keep_percent, rule)
  return parts.ClientOutput(message=split.sent,
                            client_state=collections.OrderedDict([(ACCUMULATOR, split.residual)]),
                            counters=collections.OrderedDict(entries_sent=split.num_sent))


def topk_compressor(
    keep_percent: float | None,
    rule: sparsification.TopKRule = sparsification.TopKRule.AUTHORS) -> parts.Compressor:
  """Top-k error feedback as a compressor (see the module docstring)."""

  def compress_delta(delta, client_state, params, client_input, num_examples):
    del client_input, num_examples
    keep = params['keep_percent'] if keep_percent is None else keep_percent
    return compress(delta, client_state[ACCUMULATOR], keep, rule)

  return parts.Compressor(compress=compress_delta, initial_state=zero_accumulator)


def check_fits_model(model_fn, keep_percent: float, rule: sparsification.TopKRule) -> None:
  """Checks a valid R (`KEEP_PERCENT`'s check) and `rule` against every trainable tensor of
  the model.

  Raises:
    ValueError: an R the authors' rule cannot apply to a tensor (naming it).
  """
  facts = model_facts.model_facts(model_fn)
  sparsification.check_rule_fits([s.shape for s in facts.specs], keep_percent, rule, facts.names)
