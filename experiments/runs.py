"""The declared runs (`experiments/manifest.py`) in a results directory: seeds and selections.

A run directory itself is read by `tff_flare.experiment.run_files` (the one reader of the
files a run writes); this module resolves the manifest's references to run directories and
groups their curves into seeds.
"""

import dataclasses
import pathlib

from tff_flare.experiment import run_files
from tff_flare.experiment.run_files import Curve


@dataclasses.dataclass
class Seed:
  """One seed of an experiment: runs (one or more, joined) in declaration order; an
  algorithm's value at a round is the first of them that has it."""

  refs: list[str]
  curves: list[dict[str, Curve]]
  config: dict

  def algorithms(self) -> set[str]:
    return set().union(*(set(c) for c in self.curves))

  def at(self, algorithm: str, round_num: int, metric: str = 'accuracy') -> float | None:
    for run_curves in self.curves:
      if algorithm in run_curves:
        value = run_curves[algorithm].at(round_num, metric)
        if value is not None:
          return value
    return None

  def curve(self, algorithm: str) -> Curve | None:
    """The algorithm's curve from the first run that has it."""
    return next((c[algorithm] for c in self.curves if algorithm in c), None)


def matches(recorded: dict, where) -> bool:
  """Whether `recorded` (a configuration) has every value of `where` (floats to 1e-12)."""
  for key, wanted in where.items():
    value = recorded.get(key)
    if isinstance(wanted, float) or isinstance(value, float):
      if value is None or wanted is None or abs(float(value) - float(wanted)) > 1e-12:
        return False
    elif value != wanted:
      return False
  return True


class Results:
  """The manifest's runs in a results directory: references resolved, files read once.

  Args:
    root: the results directory (a run `<figure>/<run>` is `root/<figure>/<run>`).
    figures: the manifest's figures (`spec.Figure`).
  """

  def __init__(self, root: pathlib.Path, figures):
    self.root = pathlib.Path(root)
    self.figures = {f.name: f for f in figures}
    self._runs = {f'{f.name}/{r.name}': r for f in figures for r in f.runs}
    self._curves: dict[str, dict[str, Curve]] = {}

  def resolve(self, ref: str, figure: str | None = None) -> str:
    """A reference as `<figure>/<run>` (a bare run name is `figure`'s).

    Raises:
      KeyError: no such declared run.
    """
    full = ref if '/' in ref else f'{figure}/{ref}'
    if full not in self._runs:
      raise KeyError(f'No run {full!r} is declared in the manifest.')
    return full

  def path(self, ref: str) -> pathlib.Path:
    return self.root / self.resolve(ref)

  def run(self, ref: str):
    return self._runs[self.resolve(ref)]

  def curves(self, ref: str) -> dict[str, Curve]:
    """The run's curves; {} for a run with no evaluated round yet."""
    full = self.resolve(ref)
    if full not in self._curves:
      path = self.root / full
      self._curves[full] = run_files.curves(path) if run_files.has_curves(path) else {}
    return self._curves[full]

  def figure_runs(self, name: str) -> list[str]:
    """A figure's runs, its own then the ones it reads, as full references."""
    figure = self.figures[name]
    return ([f'{name}/{r.name}' for r in figure.runs] +
            [self.resolve(ref, name) for ref in figure.reads])

  def seed(self, refs) -> Seed:
    """A seed of the given runs (a reference or a tuple of references), in that order."""
    refs = [refs] if isinstance(refs, str) else list(refs)
    present = [r for r in refs if self.curves(r)]
    return Seed(present, [self.curves(r) for r in present],
                (run_files.config(self.path(present[0])) or {}) if present else {})

  def select(self, figures, where=None, reaching: int | None = None) -> list[Seed]:
    """The seeds of `spec.Select(figures, where, reaching)` (see there)."""
    refs = []
    for name in figures:
      refs += [r for r in self.figure_runs(name) if r not in refs]
    kept = []
    for ref in refs:
      run_curves = self.curves(ref)
      if not run_curves:
        continue
      if reaching is not None and max(c.last_round for c in run_curves.values()) < reaching:
        continue
      if where and not matches(run_files.config(self.path(ref)) or {}, where):
        continue
      kept.append(ref)
    seeds: dict[str, list[str]] = {}
    for ref in kept:
      run = self.run(ref)
      joined = ref.rsplit('/', 1)[0] + '/' + run.joins if run.joins else None
      if joined in seeds:
        seeds[joined].append(ref)
      else:
        seeds[ref] = [ref]
    return [self.seed(group) for group in seeds.values()]
