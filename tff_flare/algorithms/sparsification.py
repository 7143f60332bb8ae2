"""Top-k sparsification of model updates: per tensor (the authors'), or over the whole update.

`keep_percent` is the paper's R: the percentage (not fraction) of a tensor's entries to keep,
so `keep_percent=0.001` keeps 0.001 % = 1e-5 of the entries. The authors sparsify each tensor
of a structure independently (`docs/faithfulness.md` R1, Q1-Q3); `TopKRule.GLOBAL` is the
compressor of the theory instead (one top-k over all `d` entries of the update).

Three rules choose what survives; the first two work in each tensor of `n` entries:

* `TopKRule.AUTHORS` (default): `k = float32(keep_percent) / 100 * float32(n)`,
  `k' = rne(k) + 2`, `v` = the `k'`-th largest magnitude (with duplicates), and entries with
  `|x| > v` (strictly) survive. Without ties this keeps `rne(k) + 1` entries, at least one per
  tensor; ties at `v` are dropped, so all-equal top magnitudes send nothing. `k' > n` is an
  error (the authors' code crashes there), raised here when the builder runs.
* `TopKRule.EXACT`: keeps exactly `k = max(1, rne(keep_percent / 100 * n))` entries, the
  indices of `tf.math.top_k` of `|x|` (ties broken towards the lower index).
* `TopKRule.GLOBAL`: the update's tensors flattened and concatenated into one vector of `d`
  entries, of which exactly `k = max(1, rne(keep_percent / 100 * d))` survive (`tf.math.top_k`
  of `|x|`, ties towards the lower index in that order). A small tensor (a bias) gets no entry
  of its own: the density sent is `k / d`, down to `1 / d`. Not the authors' (not a switch
  that reproduces anything): the setting of the top-k theory, for the scaling study.

All return the sent part and the residual, with `sent + residual == x` exactly (each entry
is in exactly one of them).

`keep_percent` may also be a float32 scalar tensor that changes from round to round (EC-FFL's
adaptive R'); under the authors' rule `k'` is then computed in the graph, with the same
float32 arithmetic, and capped at `n` (where the authors' code would crash; a deliberate fix).
"""

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import selection


class TopKRule(str, enum.Enum):
  """Which entries of a tensor survive top-k sparsification. A `str` enum: a rule equals its
  value (`TopKRule.GLOBAL == 'global'`), so a process built with either records the same."""

  AUTHORS = 'authors'
  EXACT = 'exact'
  GLOBAL = 'global'


def as_rule(rule: 'TopKRule | str') -> TopKRule:
  """A `TopKRule`, or its value (`'authors'`, `'exact'`, `'global'`), as a `TopKRule`.

  Raises:
    ValueError: anything else, naming the rules.
  """
  if isinstance(rule, TopKRule):
    return rule
  try:
    return TopKRule(rule)
  except ValueError:
    raise ValueError(f'topk_rule must be one of {", ".join(r.value for r in TopKRule)}, got '
                     f'{rule!r}.') from None


def _check_rule(rule: str) -> None:
  as_rule(rule)


BYTES_PER_VALUE = 4  # float32 value.
BYTES_PER_INDEX = 4  # int32 flat index within its tensor.


def validate_keep_percent(keep_percent: float) -> None:
  """Raises `ValueError` unless `0 < keep_percent <= 100` (the one check of R)."""
  if not hyperparameters.is_number(keep_percent):
    raise ValueError(f'keep_percent must be a number, got {keep_percent!r}.')
  if not 0.0 < keep_percent <= 100.0:
    raise ValueError(
        f'keep_percent must be in (0, 100] (a percentage: 0.001 keeps 0.001% of entries), '
        f'got {keep_percent}.')


KEEP_PERCENT = hyperparameters.Knob(
    0.001, "R: percent of each tensor's entries a client sends (the authors' rule keeps "
    'rne(R/100 n) + 1 of n).', validate_keep_percent)

TOPK_RULE = hyperparameters.Knob(
    TopKRule.AUTHORS.value, "Which entries top-k sends: authors (per tensor, the authors' "
    'count rne(R/100 n) + 1, ties at the cut dropped), exact (per tensor, exactly '
    'max(1, rne(R/100 n))) or global (exactly max(1, rne(R/100 d)) of the whole update\'s d '
    'entries: the top-k of the theory).', _check_rule)


def authors_cut_rank(num_elements: int, keep_percent: float) -> int:
  """The authors' `k' = rne(float32(R) / 100 * float32(n)) + 2` for a tensor of `n` entries."""
  k = np.float32(keep_percent) / np.float32(100.0) * np.float32(num_elements)
  return int(np.round(k)) + 2


def largest_authors_keep_percent(sizes: Sequence[int]) -> float:
  """The largest R (to 0.01 %) the authors' rule takes on tensors of these sizes."""
  low, high = 0.0, 100.0
  for _ in range(40):  # Bisection on the float: the rule's cut grows with R.
    middle = (low + high) / 2
    if all(authors_cut_rank(n, middle) <= n for n in sizes):
      low = middle
    else:
      high = middle
  return np.floor(low * 100) / 100


def exact_keep_count(num_elements: int, keep_percent: float) -> int:
  """Entries kept by `TopKRule.EXACT`: `max(1, rne(R / 100 * n))`, at most `n`."""
  return min(num_elements, max(1, int(np.round(keep_percent / 100.0 * num_elements))))


def kept_count_without_ties(num_elements: int, keep_percent: float, rule: TopKRule) -> int:
  """Entries that survive in a tensor of `n` entries with distinct nonzero magnitudes."""
  if rule == TopKRule.AUTHORS:
    return min(num_elements, authors_cut_rank(num_elements, keep_percent) - 1)
  return exact_keep_count(num_elements, keep_percent)


def check_rule_fits(shapes: Sequence[tf.TensorShape],
                    keep_percent: float,
                    rule: TopKRule,
                    names: Sequence[str] | None = None) -> None:
  """Checks that a valid R (`KEEP_PERCENT`'s check) and `rule` fit tensors of these shapes.

  Raises `ValueError` for an unknown rule, or where the authors' rule would ask for more
  entries than a tensor has.

  Args:
    shapes: fully defined shapes of the tensors to sparsify.
    keep_percent: the paper's R, in percent, in (0, 100].
    rule: the top-k rule.
    names: optional names of the tensors, for the message.
  """
  if not isinstance(rule, TopKRule):
    raise ValueError(f'rule must be a sparsification.TopKRule, got {rule!r}.')
  if rule != TopKRule.AUTHORS:  # The other rules keep at most every entry.
    return
  sizes = [int(tf.TensorShape(shape).num_elements()) for shape in shapes]
  for i, n in enumerate(sizes):
    cut = authors_cut_rank(n, keep_percent)
    if cut > n:
      name = names[i] if names else f'tensor {i}'
      raise ValueError(
          f'keep_percent={keep_percent} is too large for {name} with {n} entries under the '
          f"authors' top-k rule (it keeps rne(R/100 n) + 1 entries and needs the {cut}-th "
          f"largest of {n} magnitudes; the authors' code crashes here): the largest "
          f'keep_percent this model takes is {largest_authors_keep_percent(sizes)}.')


def authors_cut_rank_tf(num_elements: int, keep_percent: tf.Tensor) -> tf.Tensor:
  """`authors_cut_rank` for a float32 tensor `keep_percent`, capped at `n` (int32 scalar)."""
  k = tf.cast(keep_percent, tf.float32) / 100.0 * float(num_elements)
  return tf.minimum(tf.cast(tf.round(k), tf.int32) + 2, num_elements)


class Split(NamedTuple):
  """What `sparsify` returns: three nests like its input, and a count.

  Attributes:
    sent: the surviving entries, zeros elsewhere.
    residual: `input - sent`, exactly (zero where an entry was sent).
    num_sent: int64 scalar, the nonzero entries of `sent` (entries equal to 0 are not sent).
  """

  sent: Any
  residual: Any
  num_sent: tf.Tensor


def _split_tensor(x: tf.Tensor, keep_percent, rule: TopKRule):
  """`(sent, residual, num_sent)` of one tensor."""
  n = x.shape.num_elements()
  if rule == TopKRule.AUTHORS:
    cut_rank = (authors_cut_rank_tf(n, keep_percent)
                if tf.is_tensor(keep_percent) else authors_cut_rank(n, keep_percent))
    return selection.split_by_magnitude(x, selection.kth_largest_magnitude(x, cut_rank))
  if tf.is_tensor(keep_percent):
    raise TypeError('A tensor keep_percent needs the authors\' rule.')
  k = exact_keep_count(n, keep_percent)
  if k == n:
    sent = tf.identity(x)
  else:
    flat = tf.reshape(x, [-1])
    indices = tf.math.top_k(tf.abs(flat), k=k, sorted=False).indices
    sent = tf.reshape(tf.scatter_nd(indices[:, tf.newaxis], tf.gather(flat, indices), [n]), x.shape)
  # Each entry is either copied into `sent` or left zero there, so this difference is exact.
  return sent, x - sent, tf.math.count_nonzero(sent, dtype=tf.int64)


def _split_global(leaves: list[tf.Tensor], keep_percent: float):
  """`(sent, residual, num_sent)` of `TopKRule.GLOBAL`: one top-k over every entry."""
  if tf.is_tensor(keep_percent):
    raise TypeError('A tensor keep_percent needs the authors\' rule.')
  sizes = [x.shape.num_elements() for x in leaves]
  flat = tf.concat([tf.reshape(x, [-1]) for x in leaves], axis=0)
  d = sum(sizes)
  k = exact_keep_count(d, keep_percent)
  if k == d:
    sent_flat = tf.identity(flat)
  else:
    indices = tf.math.top_k(tf.abs(flat), k=k, sorted=False).indices
    sent_flat = tf.scatter_nd(indices[:, tf.newaxis], tf.gather(flat, indices), [d])
  sent = [tf.reshape(piece, x.shape) for piece, x in zip(tf.split(sent_flat, sizes), leaves)]
  return sent, [x - y for x, y in zip(leaves, sent)], tf.math.count_nonzero(sent_flat,
                                                                            dtype=tf.int64)


def sparsify(structure, keep_percent: float, rule: TopKRule = TopKRule.AUTHORS) -> Split:
  """Top-k sparsifies a structure: each tensor independently, or all at once (`GLOBAL`).

  Args:
    structure: a nest of float tensors with fully defined shapes.
    keep_percent: the paper's R, in percent, in (0, 100]; or a float32 scalar tensor (see
      the module docstring).
    rule: which entries survive (see the module docstring).

  Returns:
    A `Split`: `sent` holds the surviving entries and zeros elsewhere, `residual = structure
    - sent` (zero where an entry was sent), `num_sent` counts the nonzeros of `sent`.

  Raises:
    ValueError: for `keep_percent` outside (0, 100], or too large for a tensor under the
      authors' rule (e.g. R = 100 always is: it asks for the (n+2)-th largest of n).
  """
  if not tf.is_tensor(keep_percent):  # The op's own guard, for a caller that is no builder.
    validate_keep_percent(keep_percent)
    check_rule_fits([t.shape for t in tf.nest.flatten(structure)], keep_percent, rule)
  leaves = tf.nest.flatten(structure)
  if rule == TopKRule.GLOBAL and leaves:
    sent, residual, num_sent = _split_global(leaves, keep_percent)
    return Split(sent=tf.nest.pack_sequence_as(structure, sent),
                 residual=tf.nest.pack_sequence_as(structure, residual),
                 num_sent=num_sent)
  parts = [_split_tensor(x, keep_percent, rule) for x in leaves]
  return Split(sent=tf.nest.pack_sequence_as(structure, [p[0] for p in parts]),
               residual=tf.nest.pack_sequence_as(structure, [p[1] for p in parts]),
               num_sent=(tf.reduce_sum(tf.stack([p[2] for p in parts])) if parts else tf.constant(
                   0, tf.int64)))


def count_nonzero(structure) -> tf.Tensor:
  """Total number of nonzero entries of a nest of tensors, as an int64 scalar."""
  counts = [tf.math.count_nonzero(t, dtype=tf.int64) for t in tf.nest.flatten(structure)]
  # Not `tf.add_n`: Grappler may turn an AddN into an AccumulateNV2 with a per-step temporary
  # variable, which two clients trained at once in this process would both create.
  return tf.reduce_sum(tf.stack(counts)) if counts else tf.constant(0, tf.int64)


def sparse_encoding_bytes(nonzero_entries: tf.Tensor) -> tf.Tensor:
  """Bytes of a (float32 value, int32 index) encoding of that many entries, int64."""
  return tf.cast(nonzero_entries, tf.int64) * (BYTES_PER_VALUE + BYTES_PER_INDEX)
