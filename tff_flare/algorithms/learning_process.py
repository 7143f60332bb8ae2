"""A process of this project as TFF's `tff.learning.templates.LearningProcess`.

    learning = tff_flare.as_learning_process(tff_flare.build_fedavg(model_fn, ...))
    state = tff.simulation.run_training_process(learning, select_clients, total_rounds=20)
    learning.get_model_weights(state)

so that TFF's own training loops (`tff.simulation.run_training_process`,
`tff.learning.programs.train_model`) and everything written for a `LearningProcess` drive it.
That takes a process whose clients keep nothing between rounds and take no per-client input
(this project's FedAvg, and any algorithm composed so): TFF's `next(state, client_data)` has
no place for a client's state or for a value tied to its id. FLARE, EC and EF21 keep an
accumulator on every client (`process.py`: their `next` carries the states in and out, and
`tff_flare.simulate` keeps them between rounds); update masking and QSGD draw from keys tied
to the client ids. They are refused with the reason.
"""

import tensorflow_federated as tff

from tff_flare.algorithms import process as process_lib


def as_learning_process(
    process: process_lib.AlgorithmProcess) -> tff.learning.templates.LearningProcess:
  """`process` as a `LearningProcess`: the same state, model weights and metrics.

  `next(state, client_data)` runs `process.next` with every client's (empty) state and input;
  its result is `LearningProcessOutput(state, metrics)`. A `LearningProcess` (TFF's own) is
  returned as it is.

  Raises:
    TypeError: not a process of this project.
    ValueError: a process whose clients keep a state or take an input (see the module
      docstring).
  """
  if isinstance(process, tff.learning.templates.LearningProcess):
    return process
  if not isinstance(process, process_lib.AlgorithmProcess):
    raise TypeError(f'as_learning_process takes a process of this project (tff_flare.build_*), '
                    f'got {type(process).__name__}.')
  state_type, data_type, client_state_type, client_input_type = (
      process.next.type_signature.parameter)
  for what, federated_type in (('keep a state', client_state_type),
                               ('take an input drawn from their ids', client_input_type)):
    member = federated_type.member
    if not (isinstance(member, tff.StructType) and len(member) == 0):  # pylint: disable=g-explicit-length-test
      raise ValueError(f"This process's clients {what} ({member}), which TFF's "
                       'next(state, client_data) has no place for: run it with '
                       'tff_flare.simulate.')

  @tff.federated_computation
  def initialize():
    return process.initialize()

  @tff.federated_computation(state_type, data_type)
  def next_fn(state, client_data):
    nothing = tff.federated_value((), tff.CLIENTS)
    output = process.next(state, client_data, nothing, nothing)
    return tff.learning.templates.LearningProcessOutput(state=output.state, metrics=output.metrics)

  return tff.learning.templates.LearningProcess(initialize, next_fn, process.get_model_weights,
                                                process.set_model_weights)
