r"""Starts a TFF worker: TFF's executor service (the C++ `worker_binary` in the TFF package).

On every machine that should run clients:

  python -m experiments.worker --port=8000

then point a driver at the workers with `--execution=remote --workers=host1:8000,host2:8000`.
The command replaces itself with TFF's `worker_binary --port=PORT` (so signals reach the
service directly).
"""

import os

from absl import flags

from experiments import binary
from tff_flare.execution import workers

_PORT = flags.DEFINE_integer('port', 8000, 'Port the worker serves gRPC on.')
_MAX_CALLS = flags.DEFINE_integer('max_concurrent_computation_calls',
                                  -1, 'Clients one worker trains at once (e.g. to '
                                  'bound memory); non-positive: no limit.',
                                  lower_bound=-2**31,
                                  upper_bound=2**31 - 1)


def main(argv) -> None:
  if len(argv) > 1:
    raise binary.BadInput(f'Unexpected arguments {argv[1:]} (flags are --name=value).')
  try:
    command = workers.worker_command(_PORT.value, _MAX_CALLS.value)
  except ValueError as e:
    raise binary.BadInput(str(e)) from e
  if workers.port_in_use(_PORT.value):
    raise binary.BadInput(f'Port {_PORT.value} is in use on this machine (another worker or '
                          'server listens there); choose another --port.')
  print(f'Starting TFF worker on port {_PORT.value}: {" ".join(command)}', flush=True)
  os.execv(command[0], command)


if __name__ == '__main__':
  binary.run(main)
