"""Hand-written run directories for the experiments' tests (no training).

`write_run(directory, curves, config)` writes what `run_experiment` would: a metrics.csv with
the given evaluations (and bytes, round seconds and densities every round) and config.json.
"""

import csv
import json
import pathlib
from collections.abc import Callable, Mapping, Sequence

# accuracy(round) -> value, or (accuracy, loss) per round.
CurveFn = Callable[[int], float]


def write_run(directory: pathlib.Path,
              curves: Mapping[str, CurveFn],
              config: Mapping,
              rounds: int,
              eval_rounds: Sequence[int],
              loss: Mapping[str, CurveFn] | None = None,
              density: float = 1e-3,
              extra: Mapping[str, CurveFn] | None = None,
              summary: bool = True) -> pathlib.Path:
  """A finished run: evaluations at `eval_rounds`, training rows for rounds 0..rounds-1.

  Args:
    curves: {algorithm: accuracy(round)}.
    config: the recorded configuration (`config.json` and `summary.json`).
    loss: {algorithm: loss(round)} (default 1 - accuracy).
    extra: {'<algorithm>/<column>': value(round)} on every training row.
  """
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  names = list(curves)
  extra = dict(extra or {})
  columns = ['round'] + [
      f'{n}/{c}' for n in names for c in ('eval/accuracy', 'eval/loss', 'bytes_uploaded',
                                          'round_seconds', 'train/communication/density')
  ] + list(extra)
  loss = loss or {}
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, columns)
    writer.writeheader()
    for r in range(rounds + 1):
      row: dict[str, float] = {'round': r}
      for n in names:
        if r in eval_rounds:
          row[f'{n}/eval/accuracy'] = curves[n](r)
          row[f'{n}/eval/loss'] = loss[n](r) if n in loss else 1.0 - curves[n](r)
        if r < rounds:
          row[f'{n}/bytes_uploaded'] = 100
          row[f'{n}/round_seconds'] = 0.5
          row[f'{n}/train/communication/density'] = density
      if r < rounds:
        row.update({k: fn(r) for k, fn in extra.items()})
      writer.writerow(row)
  record = dict(config, algorithms=names)
  (directory / 'config.json').write_text(json.dumps(dict(config=record, changes=[])))
  if summary:
    final = {n: dict(accuracy=curves[n](rounds), loss=1.0 - curves[n](rounds)) for n in names}
    (directory / 'summary.json').write_text(
        json.dumps(dict(config=record, rounds=rounds, final_eval=final)))
  return directory
