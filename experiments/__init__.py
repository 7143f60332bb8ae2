"""The project's programs. Importing this package, before TensorFlow, silences TensorFlow's
C++ log lines unless `TF_CPP_MIN_LOG_LEVEL` is set, and opts the programs in to
TensorFlow's BFC allocator on the CPU (`TF_CPU_ALLOCATOR_USE_BFC`, unless already set):
FLARE's round on the FC takes 7.9 s with it and 8.6 s with oneDNN's allocator, TensorFlow's
default (docs/performance.md, "Memory"). Both keep what a round frees. A run that must give it
back (several algorithms beside TFF's FedAvg on a small machine) sets
`memory.SYSTEM_ALLOCATOR` in its environment (`TF_ENABLE_ONEDNN_OPTS=0
TF_CPU_ALLOCATOR_USE_BFC=false` for the C library's allocator, 1.7x slower, and glibc's
`MALLOC_MMAP_THRESHOLD_=1048576 MALLOC_TRIM_THRESHOLD_=0`, read when a process starts); the
memory estimate reads which one is on. TFF's worker processes inherit the setting.

Started as a program (`python -m experiments.<binary>`), the package also makes Ctrl-C during
the binary's imports a one-line exit (status 130); imported as a library it does nothing else.
"""

import os
import signal
import sys

os.environ.setdefault('TF_CPU_ALLOCATOR_USE_BFC', 'true')
# TensorFlow's C++ log lines (CUDA plugin registration, oneDNN and CPU-feature notes, grappler)
# are not the program's output: off unless the user asks (TF_CPP_MIN_LOG_LEVEL=0).
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def _interrupted_while_starting(signum, frame):
  del signum, frame
  sys.stderr.write('\nInterrupted (before anything ran).\n')
  os._exit(130)  # pylint: disable=protected-access


# A binary of this package is starting (`python -m experiments.<binary>`: while the module
# is located, Python sets argv[0] to '-m'): Ctrl-C during its imports (TensorFlow takes
# seconds) exits 130 with one line instead of a KeyboardInterrupt traceback. The binary's
# own handler (`cleanup.install_process_cleanup`) replaces this one once it starts.
if sys.argv[:1] == ['-m']:
  signal.signal(signal.SIGINT, _interrupted_while_starting)
