"""The docs cannot go stale silently: every path, module, `python -m` program and flag that
README.md and docs/*.md name exists, every `module.name` the code's docstrings, comments and
messages name exists, and the README's Python snippet runs as printed."""

import ast
import collections
import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import tensorflow as tf

from tff_flare.experiment import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
# absl's own flags and the ones the environment sets, which no program of ours defines.
_ABSL = {'help', 'helpfull', 'helpshort', 'verbosity', 'flagfile', 'undefok', 'v'}


def _defined_flags() -> set[str]:
  """Every flag a program of `experiments/` or `benchmarks/` defines (read from the source:
  `flags.DEFINE_*('name', ...)`), and the configuration's fields (`config_flags.define`)."""
  names = {f.name for f in dataclasses.fields(config_lib.ExperimentConfig)}
  for folder in ('experiments', 'benchmarks'):
    for path in (ROOT / folder).glob('*.py'):
      for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
            node.func.attr.startswith('DEFINE') and node.args and
            isinstance(node.args[0], ast.Constant)):
          names.add(node.args[0].value)
  return names | _ABSL


# The folders whose Python files name each other in backticks.
_SOURCE_FOLDERS = ('tff_flare', 'experiments', 'benchmarks', 'tools', 'tests')


def _module_file(dotted: str):
  """The file of the project's module `a.b.c` (a module or a package), None if none."""
  base = ROOT.joinpath(*dotted.split('.'))
  return next((f for f in (base.with_suffix('.py'), base / '__init__.py') if f.exists()), None)


def _imported_modules(source: str) -> dict[str, pathlib.Path]:
  """`{name the file uses: module file}` of the project's modules a source imports."""
  found = {}
  for node in ast.walk(ast.parse(source)):
    if (isinstance(node, ast.ImportFrom) and node.module and
        node.module.split('.')[0] in _SOURCE_FOLDERS):
      for alias in node.names:
        file = _module_file(f'{node.module}.{alias.name}')
        if file:
          found[alias.asname or alias.name] = file
    elif isinstance(node, ast.Import):
      for alias in node.names:
        file = _module_file(alias.name) if alias.name.split('.')[0] in _SOURCE_FOLDERS else None
        if file:
          found[alias.asname or alias.name.split('.')[-1]] = file
  return found


def _code_spans(text: str) -> list[str]:
  return re.findall(r'`([^`\n]+)`', text) + re.findall(r'```[a-z]*\n(.*?)```', text, re.S)


class DocsTest(tf.test.TestCase):

  def test_every_path_module_program_and_flag_named_exists(self):
    flags = _defined_flags()
    missing = []
    for page in PAGES:
      text = page.read_text()
      spans = _code_spans(text)
      for target in re.findall(r'python -m ([\w.]+)', text):
        if not ((ROOT / (target.replace('.', '/') + '.py')).exists() or
                (ROOT / target.replace('.', '/') / '__init__.py').exists()):
          missing.append(f'{page.name}: python -m {target}')
      for span in spans:
        for flag in re.findall(r'(?<![\w-])--(?:no)?([a-z][a-z0-9_]*)(?![\w-])', span):
          if flag not in flags and flag.removeprefix('no') not in flags:
            missing.append(f'{page.name}: --{flag}')
        for path in re.findall(
            r'(?<![\w./<{-])((?:tff_flare|experiments|benchmarks|tests|'
            r'docs|tools|third_party)/[\w./-]*[\w/])', span):
          stem, _, attribute = path.rpartition('.')
          named = (ROOT / path).exists() or (attribute.isidentifier() and stem and
                                             (ROOT / f'{stem}.py').exists()
                                            )  # `tests/reference_numpy.simulate`.
          if '*' not in path and not named:
            missing.append(f'{page.name}: {path}')
        for module in re.findall(r'\b(tff_flare(?:\.\w+)+)', span):
          parts = module.split('.')
          # The longest prefix that is a module file; the rest must be names in it.
          for cut in range(len(parts), 0, -1):
            file = ROOT.joinpath(*parts[:cut]).with_suffix('.py')
            package = ROOT.joinpath(*parts[:cut], '__init__.py')
            if file.exists() or package.exists():
              source = (file if file.exists() else package).read_text()
              if any(
                  not re.search(rf'\b{re.escape(name)}\b', source) for name in parts[cut:cut + 1]):
                missing.append(f'{page.name}: {module}')
              break
          else:
            missing.append(f'{page.name}: {module}')
      for link in re.findall(r'\]\(([^)#]+)(?:#[^)]*)?\)', text):
        if not link.startswith('http') and not (page.parent / link).exists():
          missing.append(f'{page.name}: link {link}')
    self.assertEmpty(missing)

  def test_the_readme_snippet_runs_as_printed(self):
    snippet = re.search(r'```python\n(.*?)```', (ROOT / 'README.md').read_text(), re.S).group(1)
    directory = tempfile.mkdtemp(dir=self.get_temp_dir())
    (pathlib.Path(directory) / 'snippet.py').write_text(snippet)
    result = subprocess.run([sys.executable, 'snippet.py'],
                            cwd=directory,
                            capture_output=True,
                            text=True,
                            timeout=600,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    lines = result.stdout.splitlines()[-3:]
    self.assertEqual([line.split()[0] for line in lines], ['flare', 'ec', 'fedavg'])
    self.assertTrue(all('accuracy 0.' in line for line in lines), lines)
    self.assertNotIn('Traceback', result.stderr)
    self.assertNotIn('Exception ignored', result.stderr)
    self.assertTrue((pathlib.Path(directory) / 'runs' / 'digits' / 'metrics.csv').exists())

  def test_every_module_name_the_code_names_in_backticks_exists(self):
    # `module.name` in a docstring, comment or message: `module` as the file imports it, or a
    # module of that name in the library (or the file's own folder); `name` defined there, or
    # a module of that package.
    files = [
        p for folder in _SOURCE_FOLDERS for p in (ROOT / folder).rglob('*.py')
        if 'results' not in p.parts
    ]
    sources = {p: p.read_text() for p in files}
    by_name = collections.defaultdict(list)
    for path in files:
      by_name[path.parent.name if path.name == '__init__.py' else path.stem].append(path)

    def defines(file: pathlib.Path, name: str) -> bool:
      if file.name == '__init__.py' and _module_file(
          '.'.join(file.relative_to(ROOT).parent.parts + (name,))):
        return True
      return re.search(rf'\b{re.escape(name)}\b', sources[file]) is not None

    missing = []
    for path in files:
      imported = _imported_modules(sources[path])
      home = path.relative_to(ROOT).parts[0]
      for span in re.findall(r'`([^`\n]+)`', sources[path]):
        if '/' in span:  # A path: `test_every_path_module_program_and_flag_named_exists`.
          continue
        for module, name in re.findall(r'(?<![\w.])([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)(?![\w*])',
                                       span):
          if name == 'py':
            continue
          if module in imported:
            targets = [imported[module]]
          elif module in _SOURCE_FOLDERS:
            targets = [_module_file(module)] if _module_file(module) else []
          else:
            targets = [
                f for f in by_name.get(module, [])
                if f.relative_to(ROOT).parts[0] in {home, 'tff_flare'}
            ]
          if targets and not any(defines(f, name) for f in targets):
            missing.append(f'{path.relative_to(ROOT)}: `{span}`')
    self.assertEmpty(missing)


if __name__ == '__main__':
  tf.test.main()
