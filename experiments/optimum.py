"""f*: the minimum of a convex study's objective (`spec.SparsityScaling`), by full-batch L-BFGS.

`reproduce` computes it for a figure that needs it and has none yet, after the figure's runs
(`write_optimum`; a few minutes). The objective is what the figure's runs evaluate
(`--eval_data=train`): multinomial logistic regression's mean softmax cross-entropy over every
training example of the clients in use, read through the task itself (`tasks.build_task`
with the runs' task, source and data), in float64, from the zero model. scipy's L-BFGS runs
until the gradient's largest entry is below `GRADIENT_TOLERANCE` or `MAX_ITERATIONS`; f* is
its loss. Written to `<results>/<figure>/optimum.json` (`spec.OPTIMUM_FILE`): `f_star`,
`gradient_max`, `iterations`, `seconds`, `examples`; the figure reads f* there
(`charts.optimum`).
"""

import json
import pathlib
import time

import numpy as np

from experiments import schedule
from experiments import spec
from tff_flare.simulation import files

GRADIENT_TOLERANCE = 1e-7
MAX_ITERATIONS = 5_000

# The run flags that say which examples are the objective's.
_DATA_OPTIONS = ('source', 'data_path', 'total_clients', 'num_clients', 'partition', 'alpha',
                 'ratio', 'seed')


def needs_optimum(figure: spec.Figure) -> bool:
  return any(isinstance(d, spec.SparsityScaling) for d in figure.draw)


def objective_data(figure: spec.Figure, data_dir: str) -> tuple[np.ndarray, np.ndarray]:
  """`(x float64 [n, features], y int [n])`: the examples the figure's runs evaluate on."""
  from tff_flare.tasks import registry as tasks  # pylint: disable=g-import-not-at-top
  flags_of_run = dict(figure.runs[0].flags)
  options = {
      k: v.replace(schedule.DATA_DIR,
                   data_dir.rstrip('/') or '.') if isinstance(v, str) else v
      for k, v in flags_of_run.items()
      if k in _DATA_OPTIONS
  }
  task = tasks.build_task(str(flags_of_run['task']), eval_data='train', **options)
  xs, ys = [], []
  for batch in task.test_data:
    xs.append(batch['x'].numpy().astype(np.float64))
    ys.append(batch['y'].numpy().reshape(-1))
  return np.concatenate(xs), np.concatenate(ys).astype(np.int64)


def softmax_regression(x: np.ndarray, y: np.ndarray):
  """`theta -> (loss, gradient)` of the mean cross-entropy of `softmax(x W + b)`; theta is
  W [features, classes] then b [classes], flattened."""
  n, features = x.shape
  classes = int(y.max()) + 1
  onehot = np.eye(classes)[y]

  def loss_and_gradient(theta: np.ndarray):
    weights = theta[:features * classes].reshape(features, classes)
    logits = x @ weights + theta[features * classes:]
    logits -= logits.max(axis=1, keepdims=True)
    log_normalizer = np.log(np.exp(logits).sum(axis=1))
    loss = float(np.mean(log_normalizer - logits[np.arange(n), y]))
    residual = (np.exp(logits - log_normalizer[:, None]) - onehot) / n
    return loss, np.concatenate([(x.T @ residual).ravel(), residual.sum(axis=0)])

  return loss_and_gradient, features * classes + classes


def minimize(x: np.ndarray, y: np.ndarray) -> dict:
  """f* and how it was reached (`f_star`, `gradient_max`, `iterations`, `seconds`)."""
  import scipy.optimize  # pylint: disable=g-import-not-at-top
  start = time.monotonic()
  loss_and_gradient, size = softmax_regression(x, y)
  result = scipy.optimize.minimize(loss_and_gradient,
                                   np.zeros(size),
                                   jac=True,
                                   method='L-BFGS-B',
                                   options=dict(maxiter=MAX_ITERATIONS,
                                                maxfun=2 * MAX_ITERATIONS,
                                                gtol=GRADIENT_TOLERANCE,
                                                ftol=0.0))
  return dict(f_star=float(result.fun),
              gradient_max=float(np.abs(result.jac).max()),
              iterations=int(result.nit),
              seconds=round(time.monotonic() - start, 1),
              stopped=str(result.message),
              examples=int(len(y)))


def write_optimum(figure: spec.Figure, folder: pathlib.Path, data_dir: str) -> dict:
  """Computes f* of the figure's objective and writes it to `folder / spec.OPTIMUM_FILE`.

  Raises:
    ValueError, data_sources.DataSourceError: the figure's data cannot be read.
  """
  found = minimize(*objective_data(figure, data_dir))
  folder.mkdir(parents=True, exist_ok=True)
  files.write_file(folder / spec.OPTIMUM_FILE, json.dumps(found, indent=2) + '\n')
  return found
