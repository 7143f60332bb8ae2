"""The project's programs. Importing this package, before TensorFlow, silences TensorFlow's
C++ log lines unless `TF_CPP_MIN_LOG_LEVEL` is set, and opts the programs in to
TensorFlow's reusing CPU allocator (`TF_CPU_ALLOCATOR_USE_BFC`, unless already set): without
it every large tensor an op outputs is fresh memory that the kernel maps page by page, which
costs more than the arithmetic of an elementwise op on the FC's 16.6M-entry kernels (measured
at commit 679a65b). TFF's worker processes inherit the setting.

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
