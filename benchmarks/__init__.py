"""The project's timing programs. Importing this package, before TensorFlow, opts them in to
TensorFlow's reusing CPU allocator (`TF_CPU_ALLOCATOR_USE_BFC`, unless already set): without
it every large tensor an op outputs is fresh memory that the kernel maps page by page, which
costs more than the arithmetic of an elementwise op on the FC's 16.6M-entry kernels (measured
at commit 679a65b). TFF's worker processes inherit the setting. TensorFlow's C++ log lines are
off unless `TF_CPP_MIN_LOG_LEVEL` is set, as in `experiments/`.
"""

import os

os.environ.setdefault('TF_CPU_ALLOCATOR_USE_BFC', 'true')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
