"""tff_flare: FLARE, its error-feedback baselines and update masking as TFF processes.

  import tff_flare
  processes = {'flare': tff_flare.build_flare(model_fn, client_optimizer=sgd, keep_percent=1.0),
               'fedavg': tff_flare.build_fedavg(model_fn, client_optimizer=sgd)}
  result = tff_flare.simulate(processes, client_data, test_data=test, rounds=20,
                              clients_per_round=5, output_dir='runs/mine')
  result.summary['final_eval'], result.model_weights['flare']

A process whose clients keep no state between rounds (FedAvg) also runs in TFF's own loops:
`tff_flare.as_learning_process(process)` is a `tff.learning.templates.LearningProcess`.

Without `output_dir` a run stays in memory (nothing written, no resume). `hooks=` takes
`tff_flare.Hook`s (`after_round` reads each round's `RoundRow`; returning True ends the run early)
and `release_managers=` TFF's `tff.program` release managers for every round's metrics.

The builders take a `model_fn` returning a `tff.learning.models.VariableModel`, as
`tff.learning.algorithms` does; `simulate` runs their processes side by side on one's own
client data with the loop, checkpoints and files of the experiment binaries. The package is
laid out by concern (see the README's "How it fits together"):

  algorithms/  what a client and the server compute, composed into TFF processes
  tasks/       models, data sources and partitions
  simulation/  the round loop, client-state stores, checkpoints, evaluation
  execution/   where rounds run: in this process, TFF's local runtime, or TFF workers
  experiment/  a run's configuration (validated in one place), the runner, the files a run
               writes (`run_files`: their one reader)

Importing it changes nothing in the interpreter: no signal handler, no patch, no thread; nor
does it load the task table or the data sources (`simulate` and its types load them at first
use). The first builder called registers an exit hook that stops TFF's workers
(`execution/cleanup.py`).
"""

import functools
import importlib
from typing import TYPE_CHECKING, Any

from tff_flare.algorithms import ec as _ec
from tff_flare.algorithms import ec_ffl as _ec_ffl
from tff_flare.algorithms import ef21 as _ef21
from tff_flare.algorithms import fedavg as _fedavg
from tff_flare.algorithms import learning_process as _learning_process
from tff_flare.algorithms import flare as _flare
from tff_flare.algorithms import masking as _masking
from tff_flare.algorithms import qsgd as _qsgd
from tff_flare.algorithms import tff_baselines as _tff_baselines
from tff_flare.execution import cleanup as _cleanup
from tff_flare.algorithms.process import AlgorithmProcess
from tff_flare.algorithms.registry import Hyperparameters
from tff_flare.simulation.loop import AlgorithmRow
from tff_flare.simulation.loop import Hook
from tff_flare.simulation.loop import RoundRow

if TYPE_CHECKING:
  from tff_flare.experiment.config import ConfigError
  from tff_flare.experiment.runner import SimulationResult
  from tff_flare.experiment.runner import simulate

# `simulate`, its result and its error live with the runner, which validates a run against
# the task table and the data sources: loaded at their first use, not when the package is
# imported (a user who only builds processes never loads them).
_WITH_THE_RUNNER = {
    'ConfigError': 'tff_flare.experiment.config',
    'SimulationResult': 'tff_flare.experiment.runner',
    'simulate': 'tff_flare.experiment.runner',
}


def __getattr__(name: str) -> Any:
  if name not in _WITH_THE_RUNNER:
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
  value = getattr(importlib.import_module(_WITH_THE_RUNNER[name]), name)
  globals()[name] = value
  return value


def __dir__() -> list[str]:
  return sorted({*globals(), *_WITH_THE_RUNNER})


__all__ = [
    'AlgorithmProcess',
    'AlgorithmRow',
    'ConfigError',
    'Hook',
    'Hyperparameters',
    'RoundRow',
    'SimulationResult',
    'build_ec',
    'build_ec_fedprox',
    'build_ec_ffl',
    'build_ef21',
    'build_fedavg',
    'build_flare',
    'build_masked_fedavg',
    'build_qsgd_ef',
    'build_tff_fedavg',
    'build_tff_fedprox',
    'as_learning_process',
    'simulate',
]


def _stopping_workers_at_exit(build):
  """`build`, which also registers (once) the stop of this Python process's TFF workers at
  its exit: TFF's default context starts a `worker_binary` that would outlive a plain script
  or notebook that calls `next` and hold its output open. At the first build, not on import."""

  @functools.wraps(build)
  def wrapped(*args, **kwargs):
    _cleanup.stop_workers_at_exit()
    return build(*args, **kwargs)

  return wrapped


build_ec = _stopping_workers_at_exit(_ec.build_ec)
build_ec_fedprox = _stopping_workers_at_exit(_ec.build_ec_fedprox)
build_ec_ffl = _stopping_workers_at_exit(_ec_ffl.build_ec_ffl)
build_ef21 = _stopping_workers_at_exit(_ef21.build_ef21)
build_fedavg = _stopping_workers_at_exit(_fedavg.build_fedavg)
build_flare = _stopping_workers_at_exit(_flare.build_flare)
build_masked_fedavg = _stopping_workers_at_exit(_masking.build_masked_fedavg)
build_qsgd_ef = _stopping_workers_at_exit(_qsgd.build_qsgd_ef)
build_tff_fedavg = _stopping_workers_at_exit(_tff_baselines.build_tff_fedavg)
build_tff_fedprox = _stopping_workers_at_exit(_tff_baselines.build_tff_fedprox)
as_learning_process = _learning_process.as_learning_process
