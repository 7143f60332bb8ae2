"""The judge of the papers' claims: measures computed from runs, rules, verdicts.

A claim (`spec.Claim`, declared in `experiments/manifest.py`) is judged by tests, each a
measure (a function of `MEASURES`, by name, on seeds of runs selected by `spec.Select`), a
comparison and a threshold named in `THRESHOLDS`. Every number of the table is a measure's
value; every verdict is its rule's:

  not tested      no run the claim reads has trained a round (or a measure of `holds` has
                  no number, all of them finished: no runs, or data it cannot judge);
  in progress     a run it reads has not reached its declared rounds: the tests are shown
                  as read so far, and no verdict is given;
  holds           every run finished and every test of `holds` passes;
  partly          not that, but a test of `partly` passes;
  does not hold   neither, and a test of `holds` fails.

The papers give no thresholds; ours are named here, with what they mean.
"""

import operator
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from experiments import charts
from experiments import runs as runs_lib
from experiments import spec
from tff_flare.experiment import run_files

THRESHOLDS = {
    'NEAR': 0.05,  # Accuracy within this of another's is "near" it.
    'NEAR_LOSS': 0.1,  # A test loss within this (nats) of another's "follows" it.
    'HALF': 0.5,  # "Collapses": below half of its accuracy at the densest R.
    'MOVE': 0.1,  # A change of the model moving an accuracy by more than this "moves" it.
    'SURVIVES': 0.7,  # S / S_max at or above this: the masking penalty survives averaging.
    'LITTLE': 0.2,  # S / S_max at or below this: little of it survives.
    'TRAINS': 0.5,  # Final test accuracy at or above this: the model trains well.
    'ZERO': 0.0,
    'ALL': 1.0,  # A fraction of runs: every one.
}
# The final window: a comparison "at the end" reads the mean of a curve's last WINDOW
# evaluations (50 rounds at the MNIST runs' every 10), not one evaluation on a noisy plateau.
WINDOW = 5
_COMPARE = {
    '<': operator.lt,
    '<=': operator.le,
    '>': operator.gt,
    '>=': operator.ge,
    '==': operator.eq
}


class Value:
  """A measure's value: `number` (None without runs) and `text` (how the table shows it)."""

  def __init__(self, number: float | None, text: str):
    self.number, self.text = number, text


def _f(value: float | None) -> str:
  return '-' if value is None else f'{value:.3f}'


def _mean(seeds,
          algorithm: str,
          round_num: int,
          metric: str = 'accuracy',
          window: bool = False) -> float | None:
  """The mean over the seeds of the algorithm's value after `round_num` rounds (`window`:
  of its final window ending there)."""
  values = [
      _window(s, algorithm, round_num, metric) if window else s.at(algorithm, round_num, metric)
      for s in seeds
  ]
  return None if not values or None in values else statistics.mean(values)


def _known(values: Sequence[float | None]) -> list[float] | None:
  """`values` when every one is known, else None."""
  known = [v for v in values if v is not None]
  return known if len(known) == len(values) else None


def _at(seeds, algorithm: str, round_num: int, metric: str = 'accuracy') -> float:
  """`_mean` where every seed has evaluated the algorithm after `round_num` rounds."""
  value = _mean(seeds, algorithm, round_num, metric)
  assert value is not None, (algorithm, round_num)
  return value


def _rounds(seed, algorithm: str) -> set[int]:
  """The rounds at which any run of the seed evaluated the algorithm."""
  return set().union(*(set(c[algorithm].round) for c in seed.curves if algorithm in c))


def _window(seed, algorithm: str, round_num: int, metric: str = 'accuracy') -> float | None:
  """The mean of the algorithm's last WINDOW evaluations up to `round_num` in the seed (None
  where the seed has not evaluated it after `round_num` rounds)."""
  if seed.at(algorithm, round_num, metric) is None:
    return None
  rounds = sorted(r for r in _rounds(seed, algorithm) if r <= round_num)[-WINDOW:]
  return statistics.mean(seed.at(algorithm, r, metric) for r in rounds)


def _end(seed, names: Sequence[str], round_num: int | None) -> int | None:
  """`round_num`, or (None) the last evaluation every one of `names` reached in the seed."""
  if round_num is not None:
    return round_num
  common = set.intersection(*(_rounds(seed, a) for a in names))
  return max(common) if common else None


def _ranges(chosen: Sequence[int], every: Sequence[int]) -> str:
  """`chosen` of the evaluation rounds `every`, as runs of neighbouring evaluations:
  '10-120, 140' ('none' when empty)."""
  runs: list[list[int]] = []
  for i, r in enumerate(every):
    if r in chosen:
      if runs and i > 0 and every[i - 1] == runs[-1][-1]:
        runs[-1].append(r)
      else:
        runs.append([r])
  return ', '.join(f'{run[0]}-{run[-1]}' if len(run) > 1 else f'{run[0]}' for run in runs) or 'none'


def _seeds(results, select: spec.Select):
  return results.select(select.figures, select.where, select.reaching)


def _with_count(text: str, seeds) -> str:
  return f'{text} ({len(seeds)} seed{"s" if len(seeds) != 1 else ""})'


# ---------------------------------------------------------------------------------------------
# Measures: `(results, **args) -> Value`.


def accuracy(
    results,
    select: spec.Select,
    algorithm: str,
    round: int,  # pylint: disable=redefined-builtin
    metric: str = 'accuracy',
    window: bool = False) -> Value:
  """The algorithm's test accuracy (or `metric='loss'`) after `round` rounds (`window`: its
  final window ending there): mean [min, max] over the seeds."""
  seeds = _seeds(results, select)
  values = [
      _window(s, algorithm, round, metric) if window else s.at(algorithm, round, metric)
      for s in seeds
  ]
  if not values or None in values:
    return Value(None, '-')
  if len(values) == 1:
    return Value(values[0], _with_count(_f(values[0]), seeds))
  return Value(
      statistics.mean(values),
      _with_count(f'{_f(statistics.mean(values))} [{_f(min(values))}, {_f(max(values))}]', seeds))


def gap(
    results,
    select: spec.Select,
    above: str,
    below: str,
    round: int,  # pylint: disable=redefined-builtin
    below_select: spec.Select | None = None,
    metric: str = 'accuracy',
    window: bool = False) -> Value:
  """Mean accuracy (or loss) of `above` minus that of `below` after `round` rounds (`below`
  from `below_select` where given; `window`: of the final windows ending there)."""
  a = _mean(_seeds(results, select), above, round, metric, window)
  b = _mean(_seeds(results, below_select or select), below, round, metric, window)
  number = None if a is None or b is None else a - b
  return Value(number, '-' if number is None else f'{number:+.3f}')


def ratio(
    results,
    select: spec.Select,
    algorithm: str,
    round: int,  # pylint: disable=redefined-builtin
    denominator: spec.Select,
    window: bool = False) -> Value:
  """Mean accuracy over `select`'s seeds divided by that over `denominator`'s (`window`: of
  the final windows ending at `round`)."""
  a = _mean(_seeds(results, select), algorithm, round, window=window)
  b = _mean(_seeds(results, denominator), algorithm, round, window=window)
  number = None if a is None or not b else a / b
  return Value(number, '-' if number is None else f'{number:.0%}')


def each(results, select: spec.Select, algorithm: str, round: int) -> Value:  # pylint: disable=redefined-builtin
  """The algorithm's test accuracy in each seed, in order (the number: their mean)."""
  seeds = _seeds(results, select)
  values = [s.at(algorithm, round) for s in seeds]
  if not values or None in values:
    return Value(None, '-')
  return Value(statistics.mean(values), ' / '.join(_f(v) for v in values))


def spread(results, select: spec.Select, algorithm: str, round: int) -> Value:  # pylint: disable=redefined-builtin
  """Largest minus smallest accuracy over the seeds."""
  values = [s.at(algorithm, round) for s in _seeds(results, select)]
  if len(values) < 2 or None in values:
    return Value(None, '-')
  return Value(max(values) - min(values), f'{max(values) - min(values):.3f}')


def smallest_margin(results, selects: Sequence[spec.Select], above: str, below: Sequence[str],
                    round: int) -> Value:  # pylint: disable=redefined-builtin
  """The smallest margin of `above` over the best of `below`, over every seed of `selects`."""
  margins = []
  for select in selects:
    for seed in _seeds(results, select):
      values = [seed.at(a, round) for a in (above, *below)]
      if None in values:
        return Value(None, '-')
      margins.append(values[0] - max(values[1:]))
  if not margins:
    return Value(None, '-')
  ahead = sum(m > 0 for m in margins)
  return Value(min(margins), f'{min(margins):+.3f} (ahead in {ahead} of {len(margins)} seed '
               'runs)')


def ordering(results, select: spec.Select, above: str, below: str) -> Value:
  """Evaluations at which `above` beats `below` in every seed, of those every seed reached;
  the number is the share of them."""
  seeds = _seeds(results, select)
  if not seeds or any(s.curve(a) is None for s in seeds for a in (above, below)):
    return Value(None, '-')
  o = charts.ordering([s.curve(above) for s in seeds], [s.curve(below) for s in seeds])
  since = f'every one from round {o.since}' if o.since is not None else 'not at the last one'
  return Value(
      o.holds / o.evaluations,
      _with_count(f'{o.holds} of {o.evaluations} ({since}; the reverse at {o.reverse})', seeds))


def sooner(results,
           selects: Sequence[spec.Select],
           first: str,
           others: Sequence[str],
           round: int | None = None,
           fraction: float = 0.9) -> Value:  # pylint: disable=redefined-builtin
  """The share of seeds in which `first` reaches the target at an earlier evaluation than each
  of `others` (one that never reaches it is later): the target is `fraction` of the lowest of
  their final windows, ending at `round` (None: the last evaluation all of them reached); no
  number when a seed lacks one of them, or when one of them meets the target at its first
  evaluation (a target at the initial model's level, as when a method never leaves chance:
  nobody can be first)."""
  cells, wins = [], 0
  for select in selects:
    for seed in _seeds(results, select):
      names = (first, *others)
      missing = [charts.label(a) for a in names if seed.curve(a) is None]
      if missing:  # A comparison with a method the seed lacks is no comparison.
        return Value(None, f'{seed.refs[0]} has no {", ".join(missing)}')
      end = _end(seed, names, round)
      finals = _known([_window(seed, a, end) for a in names]) if end is not None else None
      if end is None or finals is None:
        return Value(None, '-')
      target = fraction * min(finals)
      at_start = [charts.label(a) for a in names if seed.at(a, min(_rounds(seed, a))) >= target]
      if at_start:
        return Value(
            None, f'{seed.refs[0]}: {", ".join(at_start)} meet the target {target:.3f} at the '
            'first evaluation, so none can be first')
      reached = [
          next((r for r in sorted(_rounds(seed, a)) if r <= end and seed.at(a, r) >= target),
               None) for a in names
      ]
      later = [r if r is not None else float('inf') for r in reached]
      wins += all(later[0] < other for other in later[1:])
      cells.append(f'{seed.refs[0]} to {target:.3f}: ' + ', '.join(
          f'{charts.label(a)} {"never" if r is None else r}' for a, r in zip(names, reached)))
  if not cells:
    return Value(None, '-')
  return Value(
      wins / len(cells), f'{"; ".join(cells)} ({charts.label(first)} first in '
      f'{wins} of {len(cells)} seeds)')


def leads(
    results,
    selects: Sequence[spec.Select],
    above: str,
    below: Sequence[str],
    round: int | None = None,
    margin: str = 'ZERO',
    metric: str = 'accuracy'  # pylint: disable=redefined-builtin
) -> Value:
  """The share of seeds in which `above`'s final window beats the best of `below`'s by more
  than THRESHOLDS[margin]: windows ending at `round` (None: the last evaluation all of them
  reached in the seed); no number when a seed lacks one of them. For the loss, lower is
  better."""
  sign = 1.0 if metric == 'accuracy' else -1.0  # The margin is how much better `above` is.
  margins, cells = [], []
  for select in selects:
    for seed in _seeds(results, select):
      names = (above, *below)
      missing = [charts.label(a) for a in names if seed.curve(a) is None]
      if missing:  # A comparison with a method the seed lacks is no comparison.
        return Value(None, f'{seed.refs[0]} has no {", ".join(missing)}')
      end = _end(seed, names, round)
      values = (_known([_window(seed, a, end, metric) for a in names]) if end is not None else None)
      if end is None or values is None:
        return Value(None, '-')
      best = max(values[1:]) if sign > 0 else min(values[1:])
      margins.append(sign * (values[0] - best))
      cells.append(f'{seed.refs[0]} {margins[-1]:+.3f} (round {end})')
  if not margins:
    return Value(None, '-')
  ahead = sum(m > THRESHOLDS[margin] for m in margins)
  return Value(
      ahead / len(margins), f'{"; ".join(cells)} (ahead by more than {margin} in '
      f'{ahead} of {len(margins)} seeds)')


def curve_gap(
    results,
    select: spec.Select,
    above: str,
    below: str,
    round: int,  # pylint: disable=redefined-builtin
    metric: str = 'accuracy') -> Value:
  """The largest of `above` minus `below` (means over the seeds) over the evaluations after
  round 0 up to `round` that every seed of both reached: a curve read as a curve."""
  seeds = _seeds(results, select)
  if not seeds or any(s.at(a, round, metric) is None for s in seeds for a in (above, below)):
    return Value(None, '-')
  every = sorted(set.intersection(*(_rounds(s, a) for s in seeds for a in (above, below))))
  every = [r for r in every if 0 < r <= round]
  gaps = [(_at(seeds, above, r, metric) - _at(seeds, below, r, metric), r) for r in every]
  if not gaps:
    return Value(None, '-')
  largest, where = max(gaps)
  return Value(
      largest,
      _with_count(
          f'largest {largest:+.3f} at round {where}, '
          f'{gaps[-1][0]:+.3f} at round {gaps[-1][1]}', seeds))


def lead_rounds(results, selects: Sequence[spec.Select], above: str, below: str,
                round: int) -> Value:  # pylint: disable=redefined-builtin
  """The evaluations after round 0 up to `round` at which `above` beats `below` in every seed
  of every selection, and those at which it does not (the number: the share that do)."""
  seeds = [seed for select in selects for seed in _seeds(results, select)]
  if not seeds or any(s.at(a, round) is None for s in seeds for a in (above, below)):
    return Value(None, '-')
  every = sorted(r for r in set.intersection(*(_rounds(s, a)
                                               for s in seeds
                                               for a in (above, below))) if 0 < r <= round)
  ahead = [r for r in every if all(s.at(above, r) > s.at(below, r) for s in seeds)]
  behind = [r for r in every if r not in ahead]
  return Value(
      len(ahead) / len(every) if every else None,
      _with_count(f'ahead at rounds {_ranges(ahead, every)}; not at {_ranges(behind, every)}',
                  seeds))


def without_runs(results, selects: Sequence[spec.Select]) -> Value:
  """How many of the selections have no seed yet (e.g. settings of a claim not run)."""
  missing = [s for s in selects if not _seeds(results, s)]
  return Value(len(missing), f'{len(missing)} of {len(selects)}')


def worst_drop(results, baseline: spec.Select, others: Sequence[spec.Select], algorithm: str,
               round: int) -> Value:  # pylint: disable=redefined-builtin
  """The lowest, over `others`, of (mean accuracy there - mean accuracy of `baseline`); None
  when one of them has no runs."""
  base = _mean(_seeds(results, baseline), algorithm, round)
  known = _known([_mean(_seeds(results, s), algorithm, round) for s in others])
  if base is None or known is None:
    return Value(None, '-')
  drops = [d - base for d in known]
  return Value(min(drops), f'{min(drops):+.3f}')


def _scaling(results, figure: str):
  drawing = next(d for d in results.figures[figure].draw if isinstance(d, spec.SparsityScaling))
  return drawing, results.figures[figure]


def scaling_exponents(results, figure: str, gap: float) -> Value:
  """The exponents of rounds to within `gap` of f* in delta of the figure's two algorithms
  (`charts.exponent`): the number is how far the first's exceeds the second's beyond their
  intervals, `(e1 - e2) - (h1 + h2)` (positive: the first pays less for sparsity, by more
  than the seeds' spread); None before f* and two usable R."""
  drawing, fig = _scaling(results, figure)
  f_star = charts.optimum(results, fig)
  if f_star is None:
    return Value(None, 'f* not computed')
  points = charts.scaling_points(drawing, fig, results, f_star)
  fitted = [charts.exponent(points, a, gap, drawing.sparse_at_most) for a in drawing.algorithms]
  text = ', '.join(f'{charts.label(a)} {e.text()}' for a, e in zip(drawing.algorithms, fitted))
  means = _known([e.mean for e in fitted])
  if means is None:
    return Value(None, text)
  spread = sum(e.half_width or 0.0 for e in fitted)
  return Value(means[0] - means[1] - spread, text)


def chosen_tau(results, figure: str) -> Value:
  """1 when the study's TAU is the largest TAU of its grid whose loss is monotone, else 0;
  None before the grid and the study have runs."""
  drawing, fig = _scaling(results, figure)
  tau, grid = charts.chosen_tau(drawing, fig, results)
  if tau is None or not grid:
    return Value(None, '-')
  monotone = [t for t, m in grid.items() if m]
  choice = ', '.join(f'{t:g} {"monotone" if m else "not"}' for t, m in grid.items())
  return Value(1 if monotone and tau == max(monotone) else 0, f'TAU {tau:g} of {choice}')


def _masking_rows(results, refs: Sequence[str], process: str) -> list[dict]:
  rows = []
  for ref in refs:
    path = results.path(ref)
    if (path / 'summary.json').exists():
      rows += [r for r in charts.masking_rows(path) if r['process'] == process]
  return rows


def survival(results, cells: Sequence[str], reduce: str, process: str = 'mask_none') -> Value:
  """S / S_max over the second half of the rounds: the `reduce` ('min' or 'max') over the
  finished cells, each listed."""
  rows = _masking_rows(results, cells, process)
  if len(rows) < len(cells):
    return Value(None, '-')
  values = [r['second_half_s_normalized'] for r in rows]
  listed = ', '.join(f'{r["cell"]} {r["second_half_s_normalized"]:.3f}' for r in rows)
  return Value({'min': min, 'max': max}[reduce](values), listed)


def survives_and_trains(results,
                        cells: Sequence[str],
                        process: str = 'mask_none',
                        summary: str = 'second_half') -> Value:
  """How many cells keep S / S_max above LITTLE and reach TRAINS accuracy, both: S / S_max
  summarized over the rounds' `summary` ('second_half' or 'mean')."""
  rows = _masking_rows(results, cells, process)
  if len(rows) < len(cells):
    return Value(None, '-')
  both = [
      r['cell'] for r in rows if r[f'{summary}_s_normalized'] > THRESHOLDS['LITTLE'] and
      r['final_accuracy'] >= THRESHOLDS['TRAINS']
  ]
  return Value(len(both), ', '.join(both) if both else 'none')


def cells(results, cells: Sequence[str], process: str = 'mask_none') -> Value:  # pylint: disable=redefined-outer-name
  """Each finished cell's S / S_max (second half) and final accuracy (the number: how many)."""
  rows = _masking_rows(results, cells, process)
  return Value(
      len(rows), ', '.join(f'{r["cell"]} {r["second_half_s_normalized"]:.3f} / '
                           f'{r["final_accuracy"]:.3f}' for r in rows) or '-')


def accuracy_falls_with_survival(results,
                                 cells: Sequence[str],
                                 process: str = 'mask_none') -> Value:
  """1 when the final accuracy falls with every step up in mean S / S_max over the cells."""
  rows = _masking_rows(results, cells, process)
  if len(rows) < len(cells):
    return Value(None, '-')
  order = sorted(rows, key=lambda r: r['mean_s_normalized'])
  falls = all(a['final_accuracy'] > b['final_accuracy'] for a, b in zip(order, order[1:]))
  listed = ', '.join(f'{r["cell"]} S/S_max {r["mean_s_normalized"]:.3f} accuracy '
                     f'{r["final_accuracy"]:.3f}' for r in rows)
  return Value(float(falls), f'{listed} ({"falls" if falls else "does not fall"})')


_MEASURES: list[Callable[..., Value]] = [
    accuracy, each, gap, ratio, spread, smallest_margin, ordering, sooner, leads, curve_gap,
    lead_rounds, without_runs, worst_drop, scaling_exponents, chosen_tau, survival,
    survives_and_trains, cells, accuracy_falls_with_survival
]
MEASURES: dict[str, Callable[..., Value]] = {f.__name__: f for f in _MEASURES}

# ---------------------------------------------------------------------------------------------
# Verdicts and the table.


def measure(results, m: spec.Measure) -> Value:
  return MEASURES[m.kind](results, **m.args)


def _passes(results, test: spec.Test) -> bool | None:
  """Whether the test passes (None without runs)."""
  value = measure(results, test.measure)
  if value.number is None:
    return None
  return _COMPARE[test.comparison](value.number, THRESHOLDS[test.threshold])


def _key(m: spec.Measure) -> str:
  return repr((m.kind, sorted(m.args.items(), key=str)))


def _line(results, m: spec.Measure, tests: Sequence[tuple[str, spec.Test]]) -> str:
  """A measure and every test that reads it: `label value (<= NEAR = 0.05: yes; partly: ...)`."""
  value = measure(results, m)
  checks = []
  for role, test in tests:
    passed = _passes(results, test)
    word = 'no number' if passed is None else 'yes' if passed else 'no'
    checks.append(f'{role}{test.comparison} {test.threshold} = '
                  f'{THRESHOLDS[test.threshold]:g}: {word}')
  return f'{m.label} {value.text} ({"; ".join(checks)})'


def _reads(claim: spec.Claim):
  """What the claim's measures read: each `spec.Select` (a `figure` argument as one) and each
  named run `<figure>/<run>`."""

  def visit(value):
    if isinstance(value, spec.Select):
      yield value
    elif isinstance(value, (list, tuple)):
      for v in value:
        yield from visit(v)
    elif isinstance(value, str) and '/' in value:
      yield value

  for m in [t.measure for t in claim.holds + claim.partly] + list(claim.shows):
    for key, value in m.args.items():
      yield from visit(spec.Select((str(value),)) if key == 'figure' else value)


def runs_read(results, claim: spec.Claim) -> list[str]:
  """The declared runs a claim's measures read, as `<figure>/<run>`: every run of the
  figures they select (and the runs those read) whose flags do not contradict a selection's
  `where`, and the runs they name."""
  refs: list[str] = []
  for read in _reads(claim):
    if isinstance(read, str):
      candidates = [results.resolve(read)]
    else:
      candidates = [
          ref for name in read.figures for ref in results.figure_runs(name)
          if all(k not in results.run(ref).flags or
                 runs_lib.matches({k: results.run(ref).flags[k]}, {k: v})
                 for k, v in read.where.items())
      ]
    refs += [ref for ref in candidates if ref not in refs]
  return refs


def rounds_needed(claim: spec.Claim) -> int | None:
  """The last round the claim's tests read (their `round` arguments; what it shows beside is
  read where it is), or None when one of them reads a whole run (the last evaluation, a
  curve, a masking cell)."""
  rounds: list[Any] = [t.measure.args.get('round') for t in claim.holds + claim.partly]
  return None if not rounds or None in rounds else max(rounds)


def progress(results, claim: spec.Claim) -> tuple[list[tuple[str, int, int]], int]:
  """`([(run, rounds done, rounds needed) of each run not that far yet], runs read)`: a run
  is far enough at its declared rounds, or at the last round the claim reads if earlier."""
  refs = runs_read(results, claim)
  needed = rounds_needed(claim)
  unfinished = []
  for ref in refs:
    declared = results.run(ref).rounds
    declared = declared if needed is None else min(declared, needed)
    done = run_files.rounds_done(results.path(ref))
    if done < declared:
      unfinished.append((ref, done, declared))
  return unfinished, len(refs)


def progress_text(results, claim: spec.Claim) -> str:
  """How far the runs a claim reads are: `k of n runs finished (<run> round r of N, ...)`."""
  unfinished, count = progress(results, claim)
  shown = ', '.join(f'{ref} round {done} of {declared}' for ref, done, declared in unfinished[:3])
  more = f' and {len(unfinished) - 3} more' if len(unfinished) > 3 else ''
  return f'{count - len(unfinished)} of {count} runs finished' + (f' ({shown}{more})'
                                                                  if unfinished else '')


def verdict(results, claim: spec.Claim) -> tuple[str, list[str]]:
  """`(verdict, the tests' lines)` of a claim (see the module docstring), a line a measure
  with every test that reads it; `progress_text` says how far its runs are."""
  unfinished, count = progress(results, claim)
  held = [_passes(results, t) for t in claim.holds]
  partial = [_passes(results, t) for t in claim.partly]
  by_measure: dict[str, list[tuple[str, spec.Test]]] = {}
  for role, tests in (('', claim.holds), ('partly: ', claim.partly)):
    for t in tests:
      listed = by_measure.setdefault(_key(t.measure), [])
      if not any((t.comparison, t.threshold) == (u.comparison, u.threshold)
                 for _, u in listed):  # A partial test that is a whole one is listed once.
        listed.append((role, t))
  lines = [_line(results, tests[0][1].measure, tests) for tests in by_measure.values()]
  if all(done == 0 for _, done, _ in unfinished) and len(unfinished) == count:
    return 'not tested', lines
  if unfinished:
    return 'in progress', lines
  if all(held):
    return 'holds', lines
  if any(partial):
    return 'partly', lines
  if any(passed is False for passed in held):
    return 'does not hold', lines
  return 'not tested', lines


def figures_read(claim: spec.Claim) -> set[str]:
  """Every figure whose runs the claim's measures select (for checks of the manifest)."""
  found = set()
  for read in _reads(claim):
    found.update([read.split('/', 1)[0]] if isinstance(read, str) else read.figures)
  return found


Results = runs_lib.Results
