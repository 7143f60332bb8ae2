"""TFF aggregation factories by name: what the server averages the clients' messages with.

`build(name, norm)` gives the `tff.aggregators` factory a run passes as `model_aggregator`
(`composer.compose`) to every algorithm whose server averages:

  mean       None: each algorithm's own weighted mean (the authors'; runs in-process too).
  tff_mean   `tff.aggregators.MeanFactory()`: TFF's weighted mean (the same numbers, within
             float rounding, `tests/algorithms/test_composer.py`).
  clipping   `tff.aggregators.clipping_factory(norm, MeanFactory())`: each client's message
             scaled to L2 norm <= `norm` before the mean.
  zeroing    `tff.aggregators.zeroing_factory(norm, MeanFactory())`: a client's message with
             a value over `norm` in absolute value (L-infinity norm) replaced by zeros.
  robust     `tff.learning.robust_aggregator()`: TFF's default robust mean (adaptive zeroing
             and clipping at norms estimated from the clients, TFF's defaults).

A factory other than `mean` makes the process run on TFF's runtime (the in-process executor
runs the project's own mean only). The message is what each algorithm sends: the top-k
update for FLARE and EC, the full update for FedAvg.
"""

import math

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import hyperparameters

NAMES = ('mean', 'tff_mean', 'clipping', 'zeroing', 'robust')
# The factories that take a norm (`--aggregator_norm`).
WITH_NORM = ('clipping', 'zeroing')


def check(name: str, norm: float | None) -> None:
  """Raises `ValueError` for an unknown name, or a norm missing, bad or not taken."""
  if name not in NAMES:
    raise ValueError(f'Unknown model aggregator {name!r}; known: {", ".join(NAMES)}.')
  if name in WITH_NORM:
    if (norm is None or not hyperparameters.is_number(norm) or not math.isfinite(norm) or
        norm <= 0):
      raise ValueError(f'model_aggregator={name} needs aggregator_norm, a finite number > 0; '
                       f'got {norm!r}.')
  elif norm is not None:
    raise ValueError(f'aggregator_norm applies to model_aggregator={" or ".join(WITH_NORM)} '
                     f'only (model_aggregator is {name}).')


def build(name: str, norm: float | None = None) -> composer.AggregationFactory | None:
  """The factory `name` stands for (see the module docstring); None for `mean`.

  Raises:
    ValueError: see `check`.
  """
  check(name, norm)
  if name == 'mean':
    return None
  if name == 'tff_mean':
    return tff.aggregators.MeanFactory()
  if name in WITH_NORM:
    assert norm is not None  # `check` refuses a missing one.
    build_factory = (tff.aggregators.clipping_factory
                     if name == 'clipping' else tff.aggregators.zeroing_factory)
    return build_factory(float(norm), tff.aggregators.MeanFactory())
  return tff.learning.robust_aggregator()
