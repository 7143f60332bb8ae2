"""The judge of the papers' claims: measures computed from runs, rules, verdicts.

A claim (`spec.Claim`, declared in `experiments/manifest.py`) is judged by tests, each a
measure (a function of `MEASURES`, by name, on seeds of runs selected by `spec.Select`), a
comparison and a threshold named in `THRESHOLDS`. Every number of the table is a measure's
value; every verdict is its rule's:

  not tested      no run the claim reads has trained a round (or a measure of `holds` has
                  no runs, all of them finished);
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
from typing import Optional

from experiments import charts
from experiments import runs as runs_lib
from experiments import spec

THRESHOLDS = {
    'NEAR': 0.05,  # Accuracy within this of another's is "near" it.
    'NEAR_BELOW': -0.05,  # "Robust": an accuracy no more than NEAR below another.
    'NEAR_LOSS': 0.1,  # A test loss within this (nats) of another's "follows" it.
    'HALF': 0.5,  # "Collapses": below half of its accuracy at the densest R.
    'MOVE': 0.1,  # A change of the model moving an accuracy by more than this "moves" it.
    'SLOPE': 0.2,  # Exponents of a power law this far apart scale differently (0.5 predicted).
    'SURVIVES': 0.7,  # S / S_max at or above this: the masking penalty survives averaging.
    'LITTLE': 0.2,  # S / S_max at or below this: little of it survives.
    'TRAINS': 0.5,  # Final test accuracy at or above this: the model trains well.
    'ZERO': 0.0,
    'ALL': 1.0,  # A fraction of runs: every one.
}
_COMPARE = {'<': operator.lt, '<=': operator.le, '>': operator.gt, '>=': operator.ge,
            '==': operator.eq}


class Value:
  """A measure's value: `number` (None without runs) and `text` (how the table shows it)."""

  def __init__(self, number: Optional[float], text: str):
    self.number, self.text = number, text


def _f(value: Optional[float]) -> str:
  return '-' if value is None else f'{value:.3f}'


def _mean(seeds, algorithm: str, round_num: int, metric: str = 'accuracy') -> Optional[float]:
  values = [s.at(algorithm, round_num, metric) for s in seeds]
  return None if not values or None in values else statistics.mean(values)


def _seeds(results, select: spec.Select):
  return results.select(select.figures, select.where, select.reaching)


def _with_count(text: str, seeds) -> str:
  return f'{text} ({len(seeds)} seed{"s" if len(seeds) != 1 else ""})'


# ---------------------------------------------------------------------------------------------
# Measures: `(results, **args) -> Value`.


def accuracy(results, select: spec.Select, algorithm: str, round: int,  # pylint: disable=redefined-builtin
             metric: str = 'accuracy') -> Value:
  """The algorithm's test accuracy (or `metric='loss'`) after `round` rounds: mean [min, max]
  over the seeds."""
  seeds = _seeds(results, select)
  values = [s.at(algorithm, round, metric) for s in seeds]
  if not values or None in values:
    return Value(None, '-')
  if len(values) == 1:
    return Value(values[0], _with_count(_f(values[0]), seeds))
  return Value(statistics.mean(values), _with_count(
      f'{_f(statistics.mean(values))} [{_f(min(values))}, {_f(max(values))}]', seeds))


def gap(results, select: spec.Select, above: str, below: str, round: int,  # pylint: disable=redefined-builtin
        below_select: Optional[spec.Select] = None, metric: str = 'accuracy') -> Value:
  """Mean accuracy (or loss) of `above` minus that of `below` after `round` rounds (`below`
  from `below_select` where given)."""
  a = _mean(_seeds(results, select), above, round, metric)
  b = _mean(_seeds(results, below_select or select), below, round, metric)
  number = None if a is None or b is None else a - b
  return Value(number, '-' if number is None else f'{number:+.3f}')


def ratio(results, select: spec.Select, algorithm: str, round: int,  # pylint: disable=redefined-builtin
          denominator: spec.Select) -> Value:
  """Mean accuracy over `select`'s seeds divided by that over `denominator`'s."""
  a = _mean(_seeds(results, select), algorithm, round)
  b = _mean(_seeds(results, denominator), algorithm, round)
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


def smallest_margin(results, selects: Sequence[spec.Select], above: str,
                    below: Sequence[str], round: int) -> Value:  # pylint: disable=redefined-builtin
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
  return Value(o.holds / o.evaluations, _with_count(
      f'{o.holds} of {o.evaluations} ({since}; the reverse at {o.reverse})', seeds))


def sooner(results, selects: Sequence[spec.Select], first: str, second: str, round: int,  # pylint: disable=redefined-builtin
           fraction: float = 0.9) -> Value:
  """The share of seeds in which `first` reaches `fraction` of the lower of the two
  algorithms' accuracies after `round` rounds at an earlier evaluation than `second`."""
  cells, wins = [], 0
  for select in selects:
    for seed in _seeds(results, select):
      a, b = seed.curve(first), seed.curve(second)
      if a is None or b is None or a.at(round) is None or b.at(round) is None:
        continue
      target = fraction * min(a.at(round), b.at(round))
      reached = [next((r for r, v in zip(c.round, c.accuracy) if v >= target), None)
                 for c in (a, b)]
      wins += reached[0] < reached[1]
      cells.append(f'{reached[0]} / {reached[1]}')
  if not cells:
    return Value(None, '-')
  return Value(wins / len(cells), f'{", ".join(cells)} ({wins} of {len(cells)} sooner)')


def above_at_last(results, selects: Sequence[spec.Select], above: str,
                  below: Sequence[str], also: Sequence[str] = ()) -> Value:
  """The share of seeds in which `above` beats every one of `below` that the seed holds at
  the last evaluation they all reached (`also`: algorithms shown beside them)."""
  checks, cells = [], []
  for select in selects:
    for seed in _seeds(results, select):
      names = [a for a in (above, *below) if seed.curve(a) is not None]
      if above not in names or len(names) < 2:
        continue
      last = max(set.intersection(*(set(seed.curve(a).round) for a in names)))
      checks.append(all(seed.at(above, last) > seed.at(a, last) for a in names[1:]))
      shown = names + [a for a in also if seed.at(a, last) is not None]
      cells.append(f'round {last}: ' + ', '.join(
          f'{charts.label(a)} {_f(seed.at(a, last))}' for a in shown))
  if not checks:
    return Value(None, '-')
  return Value(sum(checks) / len(checks),
               f'{"; ".join(cells)} ({sum(checks)} of {len(checks)} runs)')


def missing_at(results, select: spec.Select, algorithms: Sequence[str], round: int) -> Value:  # pylint: disable=redefined-builtin
  """How many of `algorithms` no seed of `select` has evaluated after `round` rounds."""
  seeds = _seeds(results, select)
  missing = [a for a in algorithms if not any(s.at(a, round) is not None for s in seeds)]
  return Value(len(missing), ', '.join(charts.label(a) for a in missing) if missing else
               'none')


def without_runs(results, selects: Sequence[spec.Select]) -> Value:
  """How many of the selections have no seed yet (e.g. settings of a claim not run)."""
  missing = [s for s in selects if not _seeds(results, s)]
  return Value(len(missing), f'{len(missing)} of {len(selects)}')


def worst_drop(results, baseline: spec.Select, others: Sequence[spec.Select],
               algorithm: str, round: int) -> Value:  # pylint: disable=redefined-builtin
  """The lowest, over `others`, of (mean accuracy there - mean accuracy of `baseline`); None
  when one of them has no runs."""
  base = _mean(_seeds(results, baseline), algorithm, round)
  drops = [_mean(_seeds(results, s), algorithm, round) for s in others]
  if base is None or None in drops:
    return Value(None, '-')
  drops = [d - base for d in drops]
  return Value(min(drops), f'{min(drops):+.3f}')


def scaling_slopes(results, figure: str, algorithms: Sequence[str], baseline: str,
                   target_round: int) -> Value:
  """The slopes of log(rounds to the baseline's loss after `target_round` rounds) on
  log(kept fraction) of two algorithms (`charts.scaling_points`); the number is the first's
  minus the second's (positive: the first pays less for sparsity)."""
  drawing = spec.SparsityScaling(algorithms=tuple(algorithms), baseline=baseline,
                                 target_rounds=(target_round,), final_round=target_round)
  points = charts.scaling_points(drawing, results.figures[figure], results)
  slopes = [charts.fit_slope(*charts.scaling_series(
      points, a, lambda p: p.rounds_to.get(target_round))) for a in algorithms]
  if None in slopes:
    return Value(None, '-')
  return Value(slopes[0] - slopes[1], ', '.join(
      f'{charts.label(a)} {s:.2f}' for a, s in zip(algorithms, slopes)))


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


def survives_and_trains(results, cells: Sequence[str], process: str = 'mask_none') -> Value:
  """How many cells keep S / S_max above LITTLE and reach TRAINS accuracy, both."""
  rows = _masking_rows(results, cells, process)
  if len(rows) < len(cells):
    return Value(None, '-')
  both = [r['cell'] for r in rows if r['second_half_s_normalized'] > THRESHOLDS['LITTLE']
          and r['final_accuracy'] >= THRESHOLDS['TRAINS']]
  return Value(len(both), ', '.join(both) if both else 'none')


def cells(results, cells: Sequence[str], process: str = 'mask_none') -> Value:  # pylint: disable=redefined-outer-name
  """Each finished cell's S / S_max (second half) and final accuracy (the number: how many)."""
  rows = _masking_rows(results, cells, process)
  return Value(len(rows), ', '.join(f'{r["cell"]} {r["second_half_s_normalized"]:.3f} / '
                                    f'{r["final_accuracy"]:.3f}' for r in rows) or '-')


def accuracy_falls_with_survival(results, cells: Sequence[str],
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


MEASURES: dict[str, Callable[..., Value]] = {
    f.__name__: f for f in (accuracy, each, gap, ratio, spread, smallest_margin, ordering,
                            sooner, above_at_last, missing_at, without_runs, worst_drop, scaling_slopes,
                            survival, survives_and_trains, cells, accuracy_falls_with_survival)}


# ---------------------------------------------------------------------------------------------
# Verdicts and the table.


def measure(results, m: spec.Measure) -> Value:
  return MEASURES[m.kind](results, **m.args)


def _passes(results, test: spec.Test) -> tuple[Optional[bool], str]:
  value = measure(results, test.measure)
  threshold = THRESHOLDS[test.threshold]
  text = (f'{test.measure.label} {value.text} ({test.comparison} {test.threshold} = '
          f'{threshold:g}: ')
  if value.number is None:
    return None, text + 'no runs)'
  passed = _COMPARE[test.comparison](value.number, threshold)
  return passed, text + ('yes)' if passed else 'no)')


def _key(test: spec.Test) -> str:
  return repr((test.measure.kind, sorted(test.measure.args.items(), key=str), test.comparison,
               test.threshold))


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
      yield from visit(spec.Select((value,)) if key == 'figure' else value)


def runs_read(results, claim: spec.Claim) -> list[str]:
  """The declared runs a claim's measures read, as `<figure>/<run>`: every run of the
  figures they select (and the runs those read) whose flags do not contradict a selection's
  `where`, and the runs they name."""
  refs: list[str] = []
  for read in _reads(claim):
    if isinstance(read, str):
      candidates = [results.resolve(read)]
    else:
      candidates = [ref for name in read.figures for ref in results.figure_runs(name)
                    if all(k not in results.run(ref).flags or
                           runs_lib.matches({k: results.run(ref).flags[k]}, {k: v})
                           for k, v in read.where.items())]
    refs += [ref for ref in candidates if ref not in refs]
  return refs


def rounds_needed(claim: spec.Claim) -> Optional[int]:
  """The last round the claim's measures read (their `round` arguments), or None when one of
  them reads a whole run (the last evaluation, a curve, a masking cell)."""
  measures = [t.measure for t in claim.holds + claim.partly] + list(claim.shows)
  rounds = [m.args.get('round') for m in measures]
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
    done = runs_lib.rounds_done(results.path(ref))
    if done < declared:
      unfinished.append((ref, done, declared))
  return unfinished, len(refs)


def progress_text(results, claim: spec.Claim) -> str:
  """How far the runs a claim reads are: `k of n runs finished (<run> round r of N, ...)`."""
  unfinished, count = progress(results, claim)
  shown = ', '.join(f'{ref} round {done} of {declared}'
                    for ref, done, declared in unfinished[:3])
  more = f' and {len(unfinished) - 3} more' if len(unfinished) > 3 else ''
  return f'{count - len(unfinished)} of {count} runs finished' + (
      f' ({shown}{more})' if unfinished else '')


def verdict(results, claim: spec.Claim) -> tuple[str, list[str]]:
  """`(verdict, the tests' lines)` of a claim (see the module docstring); `progress_text`
  says how far its runs are."""
  unfinished, count = progress(results, claim)
  held = [_passes(results, t) for t in claim.holds]
  partial = [_passes(results, t) for t in claim.partly]
  shown = {_key(t) for t in claim.holds}  # A partial test that is a whole one is listed once.
  lines = [text for _, text in held] + [
      text for t, (_, text) in zip(claim.partly, partial) if _key(t) not in shown]
  if all(done == 0 for _, done, _ in unfinished) and len(unfinished) == count:
    return 'not tested', lines
  if unfinished:
    return 'in progress', lines
  if all(passed for passed, _ in held):
    return 'holds', lines
  if any(passed for passed, _ in partial):
    return 'partly', lines
  if any(passed is False for passed, _ in held):
    return 'does not hold', lines
  return 'not tested', lines


def figures_read(claim: spec.Claim) -> set[str]:
  """Every figure whose runs the claim's measures select (for checks of the manifest)."""
  found = set()
  for read in _reads(claim):
    found.update([read.split('/', 1)[0]] if isinstance(read, str) else read.figures)
  return found


Results = runs_lib.Results
