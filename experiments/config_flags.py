"""The binaries' flags, made from the experiment configuration's fields.

Every field of `ExperimentConfig` (its settings and every algorithm's knobs, each declared
once with its default and help: `tff_flare.algorithms.hyperparameters`) becomes a flag of the
same name, type, default and help:

  FLAGS = config_flags.define()                      # every field (run_experiment)
  FLAGS = config_flags.define(['rounds', 'seed'], defaults=dict(rounds=40))    # a subset
  config = config_lib.ExperimentConfig(**config_flags.values(FLAGS))

Types follow the field: an int, float, bool or str default (or annotation) gives that flag;
a sequence a list flag (comma-separated); a knob whose default is None (p, `reg_steps`: an
int or 'all') a string flag read back as an int where it is one.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import sys
import types
import typing
from typing import Any

from absl import flags

from experiments import presets
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import registry
from tff_flare.experiment import config as config_lib

# Fields whose flag is made by the binary itself (required, or not a flag at all).
NOT_FLAGS = ('output_dir',)
EXECUTION_FIELDS = ('execution', 'workers', 'worker_timeout_s', 'client_threads')


def _kind(field: dataclasses.Field, default: Any) -> str:
  annotation = field.type
  if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # X | None: X.
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    annotation = args[0] if len(args) == 1 else Any
  for kind, python_type in (('bool', bool), ('integer', int), ('float', float), ('string', str)):
    if annotation is python_type or (annotation is Any and type(default) is python_type):
      return kind
  if typing.get_origin(annotation) in (Sequence, list, tuple) or isinstance(default, tuple):
    return 'list'
  return 'string'


def define(names: Sequence[str] | None = None,
           *,
           defaults: dict | None = None,
           flag_values: flags.FlagValues = flags.FLAGS) -> dict[str, flags.FlagHolder]:
  """Defines a flag per configuration field (`names`, default: all but `NOT_FLAGS`).

  Args:
    names: the fields to define, in order.
    defaults: other defaults for some of them (the demo's 40 rounds, say).
    flag_values: where to define them.

  Returns:
    `{field name: flag holder}`.
  """
  fields = {f.name: f for f in dataclasses.fields(config_lib.ExperimentConfig)}
  names = [n for n in fields if n not in NOT_FLAGS] if names is None else list(names)
  # The flags belong to the binary that defines them: its --help lists them.
  caller = sys._getframe(1).f_globals.get('__name__')  # pylint: disable=protected-access
  module_name = sys.argv[0] if caller == '__main__' else caller
  holders = {}
  for name in names:
    field = fields[name]
    default = (defaults or {}).get(name, field.default)
    kind = _kind(field, default)
    help_text = hyperparameters.help_of(field) or name
    if kind == 'list':
      holders[name] = flags.DEFINE_list(name,
                                        list(default),
                                        help_text,
                                        flag_values=flag_values,
                                        module_name=module_name)
    else:
      holders[name] = getattr(flags, f'DEFINE_{kind}')(name,
                                                       default,
                                                       help_text,
                                                       flag_values=flag_values,
                                                       module_name=module_name)
  return holders


def _value(name: str, holder: flags.FlagHolder):
  value = holder.value
  if isinstance(value, list):
    return tuple(value)
  if name == 'reg_steps' and isinstance(value, str) and value.strip().lstrip('-').isdigit():
    return int(value)
  return value


def values(holders: dict[str, flags.FlagHolder],
           *,
           only_present: bool = False,
           flag_values: flags.FlagValues = flags.FLAGS) -> dict:
  """The flags' values as configuration fields (only those given, with `only_present`)."""
  return {
      name: _value(name, holder)
      for name, holder in holders.items()
      if not only_present or flag_values[holder.name].present
  }


def check_knobs_taken(holders: dict[str, flags.FlagHolder],
                      algorithms: Sequence[str],
                      *,
                      flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Refuses a knob given on the command line that none of the run's algorithms takes (it
  would change nothing: `--topk_rule=global` with EC-FFL alone, say).

  Raises:
    config_lib.ConfigError: naming the knobs and the algorithms that take them.
  """
  if not set(algorithms) <= set(registry.NAMES):
    return  # An unknown algorithm is named by the configuration's validation, not as a taker.
  given = [
      name for name, holder in holders.items()
      if name in registry.KNOB_NAMES and flag_values[holder.name].present
  ]
  unused = sorted(set(given) - config_lib.knobs_used(algorithms))
  if unused:
    takers = {
        name: [a for a in registry.NAMES if name in registry.knobs_of([a])] for name in unused
    }
    raise config_lib.ConfigError(
        f'{", ".join("--" + n for n in unused)} given, but no algorithm of this run '
        f'({", ".join(algorithms)}) takes it: ' +
        '; '.join(f'{n} is a knob of {", ".join(t)}' for n, t in takers.items()) + '.')


def build_config(holders: dict[str, flags.FlagHolder],
                 *,
                 preset: str | None,
                 output_dir: str,
                 flag_values: flags.FlagValues = flags.FLAGS) -> config_lib.ExperimentConfig:
  """The configuration the flags give: the preset's (if any) with the flags given on the
  command line over it, else every flag's value (`run_experiment`, `run_masking`)."""
  if preset:
    return presets.config_from_preset(preset, output_dir,
                                      **values(holders, only_present=True, flag_values=flag_values))
  return config_lib.ExperimentConfig(output_dir=output_dir,
                                     **values(holders, flag_values=flag_values))


def set_defaults(defaults: Mapping[str, Any], flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """`defaults` as the flags' defaults (the masking study's, `run_masking`)."""
  for name, value in defaults.items():
    flag_values.set_default(name, list(value) if isinstance(value, tuple) else value)


def config_of_args(
    args: Sequence[str],
    *,
    output_dir: str,
    defaults: Mapping[str, Any] = types.MappingProxyType({})
) -> config_lib.ExperimentConfig:
  """The configuration a binary of this project builds from command-line `args` (`--name=value`,
  `--preset=...`; over `defaults`, as `run_masking`'s study), parsed by absl as the binary
  parses them, without running it: a scheduler checks every run before it starts any.

  Raises:
    config_lib.ConfigError: a flag absl refuses (an unknown name, a value of another type).
  """
  flag_values = flags.FlagValues()
  holders = define(flag_values=flag_values)
  preset = flags.DEFINE_string('preset', None, 'preset', flag_values=flag_values)
  set_defaults(defaults, flag_values)
  try:
    flag_values(['check', *args])
  except flags.Error as e:
    raise config_lib.ConfigError(str(e)) from e
  return build_config(holders, preset=preset.value, output_dir=output_dir, flag_values=flag_values)
