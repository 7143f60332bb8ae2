"""tff_flare: FLARE, its error-feedback baselines and update masking as TFF processes.

The package is laid out by concern (see the README's "How it fits together"):

  algorithms/  what a client and the server compute, composed into TFF processes
  tasks/       models, data sources and partitions
  simulation/  the round loop, client-state stores, checkpoints, evaluation
  execution/   where rounds run: TFF's local runtime, TFF workers, or in this process
  experiment/  one experiment's configuration and run (what the binaries call)

Importing it changes nothing in the interpreter: no signal handler, no patch, no thread.
"""
