"""The flags every binary shares to choose where rounds execute.

  --execution=local|inprocess|remote  --workers=host:port,...  --worker_timeout_s=60
  --client_threads=N

`config_fields()` turns them into `ExperimentConfig` fields; `build_execution()` into an
execution mode (`tff_flare.execution.modes`), for a binary that runs rounds itself (the demo).
"""

from absl import flags

from tff_flare.execution import modes

EXECUTION = flags.DEFINE_enum(
    'execution', 'local', list(modes.EXECUTIONS),
    "local: TFF's local runtime (a worker_binary subprocess); inprocess: this Python process, "
    "no TFF runtime (TFF's own algorithms still run on TFF's local runtime); remote: the TFF "
    'workers of --workers (start each with python -m experiments.worker --port=PORT).')
WORKERS = flags.DEFINE_list(
    'workers', [], "With --execution=remote: host:port of each worker; a round's clients are "
    'split over them.')
WORKER_TIMEOUT_S = flags.DEFINE_float(
    'worker_timeout_s', 60.0, 'Seconds a worker may be unreachable (at start, or during a '
    'round while TFF retries) before the run stops with an error naming it.')
CLIENT_THREADS = flags.DEFINE_integer(
    'client_threads', None, 'With --execution=inprocess: clients trained at once (default: '
    'the number of CPUs).')


def config_fields() -> dict:
  """The flags as `ExperimentConfig` fields."""
  return dict(execution=EXECUTION.value, workers=tuple(WORKERS.value),
              worker_timeout_s=WORKER_TIMEOUT_S.value, client_threads=CLIENT_THREADS.value)


def build_execution() -> modes.Execution:
  """The execution mode the flags ask for; raises `ValueError` for a bad combination."""
  return modes.build_execution(EXECUTION.value, WORKERS.value,
                               timeout_s=WORKER_TIMEOUT_S.value,
                               num_threads=CLIENT_THREADS.value)
