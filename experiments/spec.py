"""What the manifest declares: runs, grids of runs, figures, the drawings, claims and rules.

Everything here is data (frozen dataclasses); the code that schedules runs
(`experiments/schedule.py`), reads them (`tff_flare/experiment/run_files.py`; `runs.py`
resolves the declared ones), draws them (`charts.py`) and judges claims (`claims.py`) lives
elsewhere. `experiments/manifest.py` holds the declarations.

* A `Run` is one command of a binary: its flags and its rounds. A `Grid` declares runs over
  every combination of some parameters (`axes`), named by a pattern.
* A `Figure` is a figure or table of one of the papers: its grids (the runs it makes), the
  runs of other figures it also shows (`reads`), what draws it, and a short reading.
* A `Claim` is a sentence of a paper and the rule that judges it: tests, each a `Measure`
  (named, computed by `claims.py` from the runs), a comparison and a named threshold.

Run references are `'<figure>/<run>'` (or a run's name within its own figure).
"""

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from tff_flare.algorithms import hyperparameters

RUN_EXPERIMENT = 'experiments.run_experiment'
RUN_MASKING = 'experiments.run_masking'


@dataclasses.dataclass(frozen=True)
class Run:
  """One run: a binary's flags (`--name=value` as `name: value`; a bool as True/False) without
  `output_dir`, `rounds` and the execution flags, which the scheduler sets.

  Attributes:
    name: the run's directory under its figure's folder.
    flags: the binary's flags.
    rounds: the rounds the figure needs.
    binary: the module that runs it.
    joins: the name of another run of the figure this one completes (one algorithm each,
      the same client stream and initial model): the two are one seed.
  """

  name: str
  flags: Mapping[str, object]
  rounds: int
  binary: str = RUN_EXPERIMENT
  joins: str | None = None

  def __post_init__(self):
    if not hyperparameters.is_int(self.rounds) or self.rounds < 1:
      raise ValueError(f'{self.name}: rounds must be an int >= 1, got {self.rounds!r}.')


@dataclasses.dataclass(frozen=True)
class Option:
  """An axis value that sets several flags at once, named `name` in run names (e.g. the
  partition `dir0.5`: `partition=dirichlet, alpha=0.5`)."""

  name: str
  flags: Mapping[str, object]

  def __str__(self) -> str:
    return self.name


@dataclasses.dataclass(frozen=True)
class Grid:
  """Runs over every combination of `axes` (the first axis outermost), each `base` with one
  value per axis (an axis named after a flag sets that flag; an `Option` sets its flags),
  named by `name` (a `str.format` pattern of the axes, e.g. `'R{keep_percent}_seed{seed}'`);
  `joins` likewise names the run each completes."""

  name: str
  base: Mapping[str, object]
  rounds: int
  axes: Mapping[str, Sequence[object]] = dataclasses.field(default_factory=dict)
  binary: str = RUN_EXPERIMENT
  joins: str | None = None

  def runs(self) -> tuple[Run, ...]:
    names = list(self.axes)
    result = []
    for values in itertools.product(*(self.axes[n] for n in names)):
      point = dict(zip(names, values))
      flags = dict(self.base)
      for name, value in point.items():
        flags.update(value.flags if isinstance(value, Option) else {name: value})
      result.append(
          Run(self.name.format(**point), flags, self.rounds, self.binary,
              self.joins.format(**point) if self.joins else None))
    return tuple(result)


# ---------------------------------------------------------------------------------------------
# Drawings: which plot and table show a figure (`charts.draw`).


@dataclasses.dataclass(frozen=True)
class Group:
  """Seeds of one experiment drawn together: `seeds` are run references, a tuple of them one
  seed made of several runs (one algorithm each); the table gives `rounds`."""

  title: str
  seeds: tuple[str | tuple[str, ...], ...]
  rounds: tuple[int, ...]
  unit: str = 'seeds'  # What the runs vary (the table's caption).


@dataclasses.dataclass(frozen=True)
class SeedCurves:
  """Per group: test accuracy (or loss) against the round and the cumulative bytes, every seed
  thin and their mean bold (`<group>.png`), and a table of the mean [min, max] at the group's
  rounds with the orderings seed by seed (`<group>.md`)."""

  groups: Mapping[str, Group]
  metric: str = 'accuracy'  # Or 'loss'.


@dataclasses.dataclass(frozen=True)
class AgainstParameter:
  """Test accuracy against a run parameter (R, the learning rate) at `rounds`: the mean and
  the range over seeds per algorithm (`<name>.png`, `<name>.md`). A seed is a value of the
  run's `seed`; of two runs with one (parameter, seed, algorithm), the first declared that
  reached the round counts. FedAvg (no R) is a band."""

  name: str
  parameter: str
  rounds: tuple[int, ...]
  algorithms: tuple[str, ...]
  log_x: bool = True


@dataclasses.dataclass(frozen=True)
class MaskingTable:
  """The update-masking cells' table (`grid.md`, `grid.csv`) and plots: survival S, S/S_max
  over the rounds and their second half, the empirical S, the final accuracy."""


@dataclasses.dataclass(frozen=True)
class SparsityScaling:
  """A convex model's rounds to a suboptimality against the kept fraction delta, log-log,
  with the exponents fitted per seed (`scaling.png`, `scaling.md`).

  Per run (`'R<R>_seed<s>'`) and algorithm: delta is the density its clients sent (mean
  over rounds); for each of `gaps`, the first evaluated round whose loss on the training
  objective is within `gap` of f* (`OPTIMUM_FILE` in the figure's folder,
  `experiments/optimum.py`); a run that has not reached it by its last round is censored
  there (a lower bound, drawn as such). Per seed a line is fitted to log(rounds) on
  log(delta) over the R whose delta is at most `sparse_at_most` and which every seed
  reached; an exponent is the mean over seeds with a 95 % t-interval. The runs named
  `tau_runs` + TAU chose FLARE's TAU: their losses are drawn beside, each marked monotone or
  not (`MONOTONE_SLACK`)."""

  algorithms: tuple[str, ...]
  gaps: tuple[float, ...]
  sparse_at_most: float
  tau_runs: str = 'tau'


OPTIMUM_FILE = 'optimum.json'
# A run's diagnostic of FLARE's pull at a checkpoint (`experiments/residual_agreement.py`):
# `<run>/residual_agreement_<round>.json`, shown under its figure (`charts.diagnostics`).
RESIDUAL_AGREEMENT_PREFIX = 'residual_agreement_'
# A loss curve is monotone when no evaluation exceeds the lowest before it by more than this
# fraction of it (the server model's full-batch loss after local minibatch steps).
MONOTONE_SLACK = 0.01

Drawing: TypeAlias = SeedCurves | AgainstParameter | MaskingTable | SparsityScaling


@dataclasses.dataclass(frozen=True)
class Figure:
  """A figure or table of one of the papers (or one of ours), and the runs it is made from.

  Attributes:
    name: its folder under the results directory.
    title: what it shows.
    paper: which paper's figure, table or claim it reproduces, in words.
    grids: the runs it makes, in the order they run.
    reads: runs of other figures it also shows, by reference (`'<figure>/<run>'`).
    draw: the drawings that make its images and tables.
    reading: what it shows, in a few words (no numbers: those are the tables').
    image: the image of its section of the results page (a file its drawing writes).
    differs: for a figure of a paper, how its setting differs from the paper's experiment
      (a stand-in says so); empty for one of ours.
  """

  name: str
  title: str
  paper: str
  grids: tuple[Grid, ...] = ()
  reads: tuple[str, ...] = ()
  draw: tuple[Drawing, ...] = ()
  reading: str = ''
  image: str | None = None
  differs: str = ''

  @property
  def runs(self) -> tuple[Run, ...]:
    return tuple(run for grid in self.grids for run in grid.runs())


# ---------------------------------------------------------------------------------------------
# Claims: a sentence of a paper and its rule.


@dataclasses.dataclass(frozen=True)
class Select:
  """Runs of some figures (their own and the ones they read) whose recorded configuration
  has every `where` value, as seeds: a run is a seed, with the runs that join it; of several
  seeds with one configuration and `seed`, each algorithm's curve comes from the first
  declared run that reached `reaching` (or has it at all)."""

  figures: tuple[str, ...]
  where: Mapping[str, object] = dataclasses.field(default_factory=dict)
  reaching: int | None = None


@dataclasses.dataclass(frozen=True)
class Measure:
  """A number computed from runs by `claims.MEASURES[kind]` with these arguments, shown as
  `label`."""

  kind: str
  label: str
  args: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Test:
  """`measure <comparison> THRESHOLDS[threshold]` (`claims.THRESHOLDS`)."""

  measure: Measure
  comparison: str  # '<', '<=', '>', '>=', '=='
  threshold: str


@dataclasses.dataclass(frozen=True)
class Sentence:
  """A sentence of a paper as `PAPER_CLAIMS.md` gives it: its id (F1-F10 FLARE, M1-M6
  masking), the part of the paper it is in, its words and the setting it is made in."""

  id: str
  part: str
  words: str
  setting: str


@dataclasses.dataclass(frozen=True)
class Claim:
  """A claim and its verdict (`experiments/claims.py`): **not tested** before its runs start,
  **in progress** until they reach their declared rounds (or the last round the claim reads);
  then **holds** when every test of `holds` passes; else **partly** when a test of `partly`
  does; else **does not hold** when a test of `holds` fails. `shows` are measured and
  reported beside.

  `name` is the row's short name (a sentence's id, or `ours: ...`); `quotes` are the papers'
  sentences the rule tests, none for a claim of ours; `claim` is what the rule asks, in a line;
  `here` is the setting of the runs it reads and how that differs from the sentences'."""

  name: str
  quotes: tuple[Sentence, ...]
  claim: str
  here: str
  figures: tuple[str, ...]
  holds: tuple[Test, ...]
  partly: tuple[Test, ...] = ()
  shows: tuple[Measure, ...] = ()
  note: str = ''


def partition_option(name: str) -> Option:
  """A partition by its short name, `iid`, `dir<alpha>` or `qskew<ratio>`, as an axis value.

  Raises:
    ValueError: another name, or a value that is no number.
  """
  if name == 'iid':
    return Option(name, dict(partition='iid'))
  for prefix, partition, knob in (('dir', 'dirichlet', 'alpha'), ('qskew', 'quantity_skew',
                                                                  'ratio')):
    if name.startswith(prefix):
      try:
        return Option(name, {'partition': partition, knob: float(name[len(prefix):])})
      except ValueError:
        raise ValueError(f'Partition {name!r}: {name[len(prefix):]!r} after {prefix!r} is not '
                         'a number.') from None
  raise ValueError(f'Unknown partition {name!r}: use iid, dir<alpha> or qskew<ratio>.')
