"""Every algorithm by name: one row each, its parameters' class and its builder.

  hparams = registry.Hyperparameters(client_optimizer=..., keep_percent=0.01)
  process = registry.build('flare', model_fn, hparams)

A row is an `Algorithm`: the frozen dataclass of the knobs the algorithm takes
(`flare.FlareParams`, each field a `hyperparameters.Knob` with its default, help and check)
and `build(model_fn, params, context)`. `Hyperparameters` holds the run's values of every
knob (defaults from the knobs themselves) and what comes from the run rather than from a knob
(`Context`: the client optimizer, the population, which tensors are regularized, the seed).
`Knobs` is every knob of every algorithm, one field each: the experiment configuration
inherits it (`experiment.config`) and the flags are made from it, so a new algorithm is its
module plus one row here (and a field in `Knobs` for a knob of its own).
"""

from collections.abc import Callable
import dataclasses
from typing import Any

import attrs
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import ec
from tff_flare.algorithms import ec_ffl
from tff_flare.algorithms import ef21
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import flare
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import local_training
from tff_flare.algorithms import masking
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import process
from tff_flare.algorithms import qsgd
from tff_flare.algorithms import schedules
from tff_flare.algorithms import sparsification
from tff_flare.algorithms import tff_baselines


@dataclasses.dataclass(frozen=True)
class NoParams(hyperparameters.Params):
  """An algorithm without knobs of its own (FedAvg)."""


@attrs.frozen
class Context:
  """What a builder takes from the run, not from a knob.

  Attributes:
    client_optimizer: the local optimizer (re-initialized by every client every round).
    total_clients: N, the population EF21's server mean covers.
    is_regularized: predicate on a variable name (FLARE, EC+FedProx); None: every tensor.
    seed: the run's seed (update masking's round seeds).
    model_aggregator: a `tff.aggregators` factory in place of the weighted mean, for the
      algorithms that average (`composer.compose`); None: each algorithm's own aggregation.
    client_weighting: how the algorithms that average weigh their clients (uniform, the
      authors', or by examples; `composer.compose`).
  """

  client_optimizer: tff.learning.optimizers.Optimizer
  total_clients: int = 10
  is_regularized: Callable[[str], bool] | None = None
  seed: int = 0
  model_aggregator: composer.AggregationFactory | None = None
  client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM

  def options(self) -> dict:
    """The builder keywords of a composed algorithm that averages."""
    return dict(client_optimizer=self.client_optimizer,
                model_aggregator=self.model_aggregator,
                client_weighting=self.client_weighting)


Builder = Callable[[model_facts.ModelFn, Any, Context], process.AlgorithmProcess]


@attrs.frozen
class Algorithm:
  """A registry row: the parameters' class, the builder, whether the algorithm aggregates its
  own way (then it takes no `model_aggregator`), and how figures and tables name and colour it
  (`label`: the papers' name; `color`: a matplotlib colour)."""

  params: type
  build: Builder
  label: str
  color: str = 'black'
  own_aggregation: bool = False


def _given(params) -> dict:
  """The params as builder keywords; None (the task's default, unset) leaves the builder's."""
  return {k: v for k, v in dataclasses.asdict(params).items() if v is not None}


def _masked(mode: str, label: str) -> Algorithm:
  return Algorithm(
      masking.MaskingParams,
      lambda m, p, c: masking.build_masked_fedavg(m,
                                                  mask_mode=mode,
                                                  keep_probability=p.keep_probability,
                                                  num_mask_draws=p.num_mask_draws,
                                                  seed=c.seed,
                                                  **c.options()), label)


ALGORITHMS: dict[str, Algorithm] = {
    'flare':
        Algorithm(
            flare.FlareParams, lambda m, p, c: flare.build_flare(
                m, **_given(p), **c.options(), is_regularized=c.is_regularized), 'FLARE', 'C3'),
    'ec':
        Algorithm(ec.EcParams, lambda m, p, c: ec.build_ec(m, **_given(p), **c.options()), 'EC',
                  'C0'),
    'ec_fedprox':
        Algorithm(
            ec.EcFedProxParams, lambda m, p, c: ec.build_ec_fedprox(
                m, **_given(p), **c.options(), is_regularized=c.is_regularized), 'EC+FedProx',
            'C1'),
    'ec_ffl':
        Algorithm(ec_ffl.EcFflParams,
                  lambda m, p, c: ec_ffl.build_ec_ffl(m, **_given(p), **c.options()), 'EC-FFL',
                  'C4'),
    'ef21':
        Algorithm(
            ef21.Ef21Params,
            lambda m, p, c: ef21.build_ef21(
                m, **_given(p), client_optimizer=c.client_optimizer, total_clients=c.total_clients),
            'EF21',
            'C2',
            own_aggregation=True),
    'ef21_dense':
        Algorithm(
            ef21.Ef21Params,
            lambda m, p, c: ef21.build_ef21(
                m, **_given(p), client_optimizer=c.client_optimizer, dense_state_shortcut=True),
            "EF21 (authors' dense state)",
            'C2',
            own_aggregation=True),
    'fedavg':
        Algorithm(NoParams, lambda m, p, c: fedavg.build_fedavg(m, **c.options()), 'FedAvg', 'C7'),
    'mask_none':
        _masked('none', 'no mask'),
    'mask_independent':
        _masked('independent', 'independent masks'),
    'mask_synchronized':
        _masked('synchronized', 'synchronized masks'),
    'qsgd_ef':
        Algorithm(qsgd.QsgdParams,
                  lambda m, p, c: qsgd.build_qsgd_ef(m, **_given(p), **c.options()), 'QSGD+EF',
                  'C8'),
    'tff_fedavg':
        Algorithm(
            NoParams,
            lambda m, p, c: tff_baselines.build_tff_fedavg(m, client_optimizer=c.client_optimizer),
            'TFF FedAvg',
            'C5',
            own_aggregation=True),
    'tff_fedprox':
        Algorithm(
            tff_baselines.TffFedProxParams,
            lambda m, p, c: (tff_baselines.build_tff_fedprox(
                m, proximal_strength=p.tff_fedprox_strength, client_optimizer=c.client_optimizer)),
            'TFF FedProx',
            'C6',
            own_aggregation=True),
}
NAMES = tuple(ALGORITHMS)


def label(name: str) -> str:
  """The papers' name of algorithm `name` (the name itself for one not registered)."""
  return ALGORITHMS[name].label if name in ALGORITHMS else name


def color(name: str) -> str:
  """Algorithm `name`'s colour in figures (black for one not registered)."""
  return ALGORITHMS[name].color if name in ALGORITHMS else 'black'


@dataclasses.dataclass
class Knobs:
  """A run's value of every algorithm's knob, one field each (the knobs are shared: FLARE's
  R is EC's), defaults the knobs' own. An algorithm takes the subset its Params declare;
  `check_knobs` holds the two to one declaration at import."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()
  tau: float = schedules.TAU.field()
  tau_decay: float = schedules.TAU_DECAY.field()
  mask_percentile: float = flare.MASK_PERCENTILE.field()
  reg_steps: int | str | None = local_training.REG_STEPS.field()
  local_epochs: int = local_training.LOCAL_EPOCHS.field()
  keep_probability: float = masking.KEEP_PROBABILITY.field()
  num_mask_draws: int = masking.NUM_MASK_DRAWS.field()
  qsgd_levels: int = qsgd.QSGD_LEVELS.field()
  tff_fedprox_strength: float = tff_baselines.TFF_FEDPROX_STRENGTH.field()


def knob_fields() -> dict[str, dataclasses.Field]:
  """Every knob of every algorithm, by name: the fields of `Knobs`."""
  return {field.name: field for field in dataclasses.fields(Knobs)}


def check_knobs() -> None:
  """Every algorithm's Params field is a field of `Knobs`, with its default and help; every
  field of `Knobs` is some algorithm's.

  Raises:
    ValueError: naming the knob and the algorithm that declare it otherwise.
  """
  fields = knob_fields()
  used = set()
  for name, algorithm in ALGORITHMS.items():
    for field in dataclasses.fields(algorithm.params):
      known = fields.get(field.name)
      if known is None:
        raise ValueError(f'Knob {field.name} of {name} is not a field of registry.Knobs.')
      if (known.default, dict(known.metadata)) != (field.default, dict(field.metadata)):
        raise ValueError(f'Knob {field.name} of {name} differs from its field in '
                         'registry.Knobs.')
      used.add(field.name)
  unused = sorted(set(fields) - used)
  if unused:
    raise ValueError(f'registry.Knobs has knobs no algorithm takes: {unused}.')


check_knobs()
KNOB_NAMES = tuple(knob_fields())


def knobs_of(names) -> set[str]:
  """The knobs the algorithms `names` take (a knob of none of them changes nothing)."""
  return {
      field.name for name in names if name in ALGORITHMS
      for field in dataclasses.fields(ALGORITHMS[name].params)
  }


class Hyperparameters:
  """The run's value of every knob (`knobs`, a `Knobs`; defaults: the knobs') and what comes
  from the run (`context`, a `Context`).

  Args:
    client_optimizer, total_clients, is_regularized, seed, model_aggregator,
      client_weighting: the `Context`.
    **knobs: values by knob name (`KNOB_NAMES`); the others keep their knob's default.

  Raises:
    ValueError: an unknown knob name.
  """

  def __init__(
      self,
      client_optimizer: tff.learning.optimizers.Optimizer,
      *,
      total_clients: int = 10,
      is_regularized: Callable[[str], bool] | None = None,
      seed: int = 0,
      model_aggregator: composer.AggregationFactory | None = None,
      client_weighting: tff.learning.ClientWeighting = (tff.learning.ClientWeighting.UNIFORM),
      **knobs):
    unknown = sorted(set(knobs) - set(KNOB_NAMES))
    if unknown:
      raise ValueError(f'Unknown hyperparameters {unknown}; known: {", ".join(KNOB_NAMES)}.')
    self.context = Context(client_optimizer=client_optimizer,
                           total_clients=total_clients,
                           is_regularized=is_regularized,
                           seed=seed,
                           model_aggregator=model_aggregator,
                           client_weighting=client_weighting)
    self.knobs = Knobs(**knobs)

  def params(self, name: str):
    """Algorithm `name`'s parameters (checked: `ValueError` for a value its knob refuses)."""
    params_class = ALGORITHMS[name].params
    return params_class(
        **{f.name: getattr(self.knobs, f.name) for f in dataclasses.fields(params_class)})


def check_take_model_aggregator(names, what: str = 'model_aggregator') -> None:
  """Raises `ValueError` naming the algorithms of `names` that aggregate their own way (and
  so take no `what`: a model_aggregator, a client_weighting other than uniform)."""
  own = [n for n in names if ALGORITHMS[n].own_aggregation]
  if own:
    raise ValueError(f'{", ".join(own)} aggregate(s) their own way: they take no {what}; '
                     'run them in another run.')


def build(name: str, model_fn: model_facts.ModelFn,
          hyperparameters: Hyperparameters) -> process.AlgorithmProcess:
  """The process of algorithm `name`.

  Raises:
    ValueError: an unknown name (listing the known ones), a bad hyperparameter, or a
      `model_aggregator` for an algorithm that aggregates its own way.
  """
  if name not in ALGORITHMS:
    raise ValueError(f'Unknown algorithm {name!r}; known: {", ".join(NAMES)}.')
  if not isinstance(hyperparameters, Hyperparameters):
    raise TypeError('hyperparameters must be a registry.Hyperparameters(client_optimizer=..., '
                    f'<knob>=...), got {type(hyperparameters).__name__}.')
  algorithm = ALGORITHMS[name]
  if hyperparameters.context.model_aggregator is not None:
    check_take_model_aggregator([name])
  if hyperparameters.context.client_weighting != tff.learning.ClientWeighting.UNIFORM:
    check_take_model_aggregator([name], 'client_weighting but uniform')
  return algorithm.build(model_fn, hyperparameters.params(name), hyperparameters.context)
