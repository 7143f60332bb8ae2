"""tff_flare: FLARE, its error-feedback baselines and update masking as TFF processes.

  import tff_flare
  processes = {'flare': tff_flare.build_flare(model_fn, client_optimizer=sgd, keep_percent=1.0),
               'fedavg': tff_flare.build_fedavg(model_fn, client_optimizer=sgd)}
  summary = tff_flare.simulate(processes, client_data, test_data=test, rounds=20,
                               clients_per_round=5, output_dir='runs/mine')

The builders take a `model_fn` returning a `tff.learning.models.VariableModel`, as
`tff.learning.algorithms` does; `simulate` runs their processes side by side on one's own
client data with the loop, checkpoints and files of the experiment binaries. The package is
laid out by concern (see the README's "How it fits together"):

  algorithms/  what a client and the server compute, composed into TFF processes
  tasks/       models, data sources and partitions
  simulation/  the round loop, client-state stores, checkpoints, evaluation
  execution/   where rounds run: in this process, TFF's local runtime, or TFF workers
  experiment/  a run's configuration (validated in one place) and the runner

Importing it changes nothing in the interpreter: no signal handler, no patch, no thread.
"""

from tff_flare.algorithms.ec import build_ec
from tff_flare.algorithms.ec import build_ec_fedprox
from tff_flare.algorithms.ec_ffl import build_ec_ffl
from tff_flare.algorithms.ef21 import build_ef21
from tff_flare.algorithms.fedavg import build_fedavg
from tff_flare.algorithms.flare import build_flare
from tff_flare.algorithms.masking import build_masked_fedavg
from tff_flare.algorithms.qsgd import build_qsgd_ef
from tff_flare.algorithms.tff_baselines import build_tff_fedavg
from tff_flare.algorithms.tff_baselines import build_tff_fedprox
from tff_flare.experiment.runner import simulate
