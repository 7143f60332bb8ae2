"""The flags every binary shares to run its computations locally or on TFF workers.

  --execution=local|remote  --workers=host:port,...  --worker_timeout_s=60

`execution_context()` turns them into the context to run under (`remote.execution_context`),
`config_fields()` into `experiment.ExperimentConfig` fields.
"""

import contextlib

from absl import flags

from tff_flare import remote

EXECUTION = flags.DEFINE_enum(
    'execution', 'local', list(remote.EXECUTIONS),
    "local: TFF's local runtime in this process; remote: the TFF workers of --workers "
    '(start each with python -m tff_flare.worker --port=PORT).')
WORKERS = flags.DEFINE_list(
    'workers', [], "With --execution=remote: host:port of each worker; a round's clients are "
    'split over them.')
WORKER_TIMEOUT_S = flags.DEFINE_float(
    'worker_timeout_s', 60.0, 'Seconds a worker may be unreachable (at start, or during a '
    'round while TFF retries) before the run stops with an error naming it.')


def config_fields() -> dict:
  """The flags as `ExperimentConfig` fields."""
  return dict(execution=EXECUTION.value, workers=tuple(WORKERS.value),
              worker_timeout_s=WORKER_TIMEOUT_S.value)


def execution_context() -> contextlib.AbstractContextManager:
  """The context the flags ask for; raises `ValueError` for an inconsistent combination."""
  return remote.execution_context(EXECUTION.value, WORKERS.value,
                                  timeout_s=WORKER_TIMEOUT_S.value)
