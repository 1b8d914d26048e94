#!/usr/bin/env python3
"""Checks that every Python script under scripts/bench/ and scripts/fixtures/ names its pinned
requirements, and (with --install) that its imports work in a fresh virtualenv made from them.

Each such script's module docstring has exactly one line

    Requirements: scripts/requirements/ENV.txt

naming one environment's file in scripts/requirements/. Those files pin with `==` only; a
comment header says which scripts use the environment and what else it needs, and may say

    # Layer: OTHER.txt      this environment is installed on top of OTHER's (same venv, its
                            versions replacing OTHER's)
    # Install: --no-deps    extra pip options for this file

and `-r OTHER.txt` includes another file's pins. An import statement that runs in another
environment than the script's (a mode of the script meant for a second interpreter) says so on
its line with a comment `# requirements: ENV`; it is checked against that environment instead.

Static check (always; standard library only, no network):
- every script names exactly one existing requirements file;
- every top-level module the script imports anywhere (`import x`, `from x.y import z`, inside
  functions too), and every module the repository's own helper modules it imports import in
  turn, is the standard library, one of those helper modules (a `.py` file in scripts/,
  scripts/bench/, scripts/bench/gpu/ or scripts/fixtures/), the project's own wheel
  `culturelens`, or a distribution its environment pins (DIST below maps import names to
  distribution names where they differ);
- every requirements line is an exact `name==version` pin (or `-r FILE`), and every environment
  is named by at least one script (directly, by `-r` or as a layer).

--install ENV... (needs PyPI): for each environment, in order, a fresh venv (`uv venv`, then
`uv pip install -r FILE`, with uv pinned below and installed by pip into a venv of its own) in a
temporary folder (or --venvs DIR), then every import statement of every script that names the
environment is executed in it, each on its own, failing with the script, line and statement;
imports of `culturelens` are skipped (the wheel needs a cargo build; scripts/test_python.sh tests
it). Where transformers is installed, scripts/gpt2_bytes.py's byte map is compared with
transformers' own. A layered environment's venv starts as a hard-linked copy of its base's
(installed first when it is not already in the list), into which its own file is installed. Each
venv is deleted as soon as no later environment is layered on it, and what is left at the end,
unless --keep. uv keeps no downloads: it unpacks wheels as they stream in, so the disk holds
the installed packages only.

scripts/test.sh runs the static check and `--install-ci`: every environment but `hps`, which
it checks statically only (hpsv2 1.2.0's wheel lacks a data file that must be copied in by hand,
and its vendored open_clip needs tkinter); scripts/requirements/hps.txt says how to check it by
hand (`--run-imports ENV SCRIPT...` runs the import part alone, in the running python).

Usage: python3 scripts/check_requirements.py [--install ENV... | --install-ci] [--venvs DIR] [--keep]
"""

import argparse
import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
REQS = ROOT / "scripts" / "requirements"
SCRIPT_DIRS = [ROOT / "scripts" / "bench", ROOT / "scripts" / "fixtures"]
# Where the scripts find the repository's helper modules (each adds its own folder, or these,
# to sys.path).
HELPER_DIRS = [ROOT / "scripts", ROOT / "scripts" / "bench", ROOT / "scripts" / "bench" / "gpu",
               ROOT / "scripts" / "fixtures"]
OWN_WHEEL = "culturelens"
# Import name -> distribution name, where they differ.
DIST = {
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "icu": "pyicu",
    "open_clip": "open-clip-torch",
    "google": "protobuf",
    "yaml": "pyyaml",
    "dateutil": "python-dateutil",
    "dlib": "dlib-bin",
}
# The environments scripts/test.sh installs (see the docstring for the others).
CI_ENVS = ["stdlib", "light", "gender", "clip-slow", "torch", "classify", "diffusers-0.31", "words"]
REQ_LINE = re.compile(r"^Requirements: (\S+)$", re.MULTILINE)
TAG = re.compile(r"#\s*requirements:\s*([A-Za-z0-9._-]+)")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")


def norm(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def scripts() -> list[pathlib.Path]:
    found = []
    for d in SCRIPT_DIRS:
        found += sorted(d.rglob("*.py"))
    return found


def helpers() -> dict[str, pathlib.Path]:
    return {p.stem: p for d in HELPER_DIRS for p in sorted(d.glob("*.py"))}


def rel(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


class EnvFile:
    """One requirements file: its pins (with -r includes), layer and pip options."""

    def __init__(self, name: str, errors: list[str]):
        self.name = name
        self.path = REQS / f"{name}.txt"
        self.pins: dict[str, str] = {}
        self.includes: list[str] = []
        self.layer = None
        self.pip_options: list[str] = []
        for n, raw in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{rel(self.path)}:{n}"
            if m := re.match(r"^#\s*Layer:\s*(\S+)\.txt\s*$", raw):
                self.layer = m.group(1)
            elif m := re.match(r"^#\s*Install:\s*(.+)$", raw):
                self.pip_options += m.group(1).split()
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if m := re.match(r"^-r\s+(\S+)\.txt$", line):
                self.includes.append(m.group(1))
            elif m := PIN.match(line):
                self.pins[norm(m.group(1))] = m.group(2)
            else:
                errors.append(f"{where}: not an exact `name==version` pin or `-r FILE.txt`: {line!r}")
        for other in [*self.includes, *([self.layer] if self.layer else [])]:
            if not (REQS / f"{other}.txt").is_file():
                errors.append(f"{rel(self.path)}: names {other}.txt, which does not exist")


def load_envs(errors: list[str]) -> dict[str, EnvFile]:
    return {p.stem: EnvFile(p.stem, errors) for p in sorted(REQS.glob("*.txt"))}


def provided(env: str, envs: dict[str, EnvFile]) -> set[str]:
    """The distributions an environment pins, with its includes and layers."""
    e = envs[env]
    out = set(e.pins)
    for other in [*e.includes, *([e.layer] if e.layer else [])]:
        if other in envs:
            out |= provided(other, envs)
    return out


def imports(path: pathlib.Path) -> list[tuple[int, str, str, str | None]]:
    """Every absolute import statement: (line, top-level module, source text, the environment a
    `# requirements: ENV` comment on its line names, else None)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            tops = [node.module.split(".")[0]]
        else:
            continue
        tag = TAG.search(lines[node.lineno - 1])
        for top in tops:
            out.append((node.lineno, top, ast.unparse(node), tag.group(1) if tag else None))
    return sorted(set(out), key=lambda x: (x[0], x[1], x[2]))


def third_party(path: pathlib.Path, local: dict[str, pathlib.Path], seen=None) -> dict[tuple, str]:
    """(top-level third-party module, environment tag or None) -> where it is first imported,
    following the repository's helper modules."""
    seen = set() if seen is None else seen
    seen.add(path)
    out: dict[tuple, str] = {}
    for line, top, _, tag in imports(path):
        if top in sys.stdlib_module_names or top == "__future__" or top == OWN_WHEEL:
            continue
        if top in local:
            if local[top] not in seen:
                for key, where in third_party(local[top], local, seen).items():
                    out.setdefault((key[0], key[1] or tag), where)
            continue
        out.setdefault((top, tag), f"{rel(path)}:{line}")
    return out


def named_env(path: pathlib.Path) -> tuple[str | None, str | None]:
    """(environment name, error) from the script's docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    found = REQ_LINE.findall(doc)
    if len(found) != 1:
        return None, (f"{rel(path)}: its docstring names {len(found)} requirements files "
                      f"(wants exactly one line `Requirements: scripts/requirements/ENV.txt`)")
    m = re.fullmatch(r"scripts/requirements/([A-Za-z0-9._-]+)\.txt", found[0])
    if not m or not (REQS / f"{m.group(1)}.txt").is_file():
        return None, f"{rel(path)}: `Requirements: {found[0]}` is not a file in scripts/requirements/"
    return m.group(1), None


def static_check() -> tuple[list[str], dict[str, list[pathlib.Path]]]:
    errors: list[str] = []
    envs = load_envs(errors)
    local = helpers()
    users: dict[str, list[pathlib.Path]] = {name: [] for name in envs}
    for path in scripts():
        env, err = named_env(path)
        if err:
            errors.append(err)
            continue
        users[env].append(path)
        for (mod, tag), where in sorted(third_party(path, local).items(), key=lambda x: (x[0][0], x[0][1] or "")):
            if tag and tag not in envs:
                errors.append(f"{where}: `# requirements: {tag}` names no file in scripts/requirements/")
                continue
            if tag and path not in users[tag]:
                users[tag].append(path)
            dist = norm(DIST.get(mod, mod))
            if dist not in provided(tag or env, envs):
                direct = where.startswith(rel(path) + ":")
                at, via = (where, "") if direct else (rel(path), f" (through {where})")
                errors.append(f"{at}: imports `{mod}`{via} (distribution {dist}), which "
                              f"scripts/requirements/{tag or env}.txt does not pin")
    used = {name for name, paths in users.items() if paths}
    for name in list(used):
        stack = [name]
        while stack:
            e = envs[stack.pop()]
            for other in [*e.includes, *([e.layer] if e.layer else [])]:
                if other in envs and other not in used:
                    used.add(other)
                    stack.append(other)
    for name in sorted(set(envs) - used):
        errors.append(f"scripts/requirements/{name}.txt: no script names it")
    return errors, users


# ---- --install -------------------------------------------------------------------------------

# The installer: uv, pinned, installed with pip into its own venv under the check's folder. It
# resolves `-r FILE` as pip does (exact pins, the highest versions of everything else) but
# downloads in parallel and unpacks wheels as they stream in, without keeping them: the torch
# environment took 38 s of wall time and 53 s of CPU with uv against 171 s and about 160 s of CPU
# with pip (stop 51, the 2-core dev VM), and the CPU is what the check takes from the cargo
# build it runs beside.
UV = "uv==0.13.9"


def uv_tool(root: pathlib.Path) -> pathlib.Path:
    """uv at the pinned version, installed unless a venv kept (--keep) by an earlier run has it."""
    tool = root / "uv-tool"
    uv = tool / "bin" / "uv"
    try:
        found = subprocess.run([str(uv), "--version"], capture_output=True, text=True).stdout.split()[1:2]
    except OSError:
        found = []
    if found != [UV.split("==")[1]]:
        subprocess.run([sys.executable, "-m", "venv", str(tool)], check=True)
        subprocess.run([str(tool / "bin" / "pip"), "install", "-q", "--no-cache-dir", "--disable-pip-version-check", UV],
                       check=True)
    return uv


def make_venv(name: str, envs: dict[str, EnvFile], root: pathlib.Path, uv: pathlib.Path) -> pathlib.Path:
    """A fresh venv with the environment's pins (`uv pip install -r FILE`). A layered environment
    starts as a copy of its base's venv made of hard links (`cp -al`: no second copy on disk, and
    the bytecode the base's import check compiled comes along), into which its own file is
    installed, its versions replacing the base's: as its header says to do by hand with pip,
    one file after the other in one venv. Files are only ever replaced in such a copy (uv removes
    a package's files and links in new ones; Python writes bytecode to a temporary file and
    renames it), never written in place, so the base's venv is unchanged."""
    e = envs[name]
    venv = root / name
    # uv's temporary files (downloads, sdist builds) go in the same folder, deleted with it.
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}

    def run(*cmd):
        subprocess.run([str(c) for c in cmd], check=True, env=env)

    shutil.rmtree(venv, ignore_errors=True)  # a venv kept (--keep) by an earlier run
    if e.layer:
        run("cp", "-al", root / e.layer, venv)
    else:
        run(uv, "venv", "-q", "--python", sys.executable, venv)
    if e.pins or e.includes:
        # No cache: a temporary one, deleted when the command ends (the installed files stay).
        run(uv, "pip", "install", "-q", "--no-cache", "--python", venv / "bin" / "python", *e.pip_options, "-r", e.path)
    return venv


def run_imports(env: str, paths: list[str]) -> int:
    """In the environment's own python: each import statement of each script, on its own."""
    for d in HELPER_DIRS:
        sys.path.insert(0, str(d))
    failed = 0
    for p in paths:
        path = ROOT / p
        named = named_env(path)[0]
        for line, top, stmt, tag in imports(path):
            if top == OWN_WHEEL or (tag or named) != env:
                continue
            try:
                exec(compile(stmt, f"{p}:{line}", "exec"), {})  # noqa: S102 (the check itself)
            except BaseException as exc:  # noqa: BLE001 (SystemExit in a helper counts too)
                failed += 1
                print(f"{p}:{line}: `{stmt}` failed in environment {env}: {type(exc).__name__}: {exc}")
    try:
        import transformers
    except ImportError:
        pass
    else:
        from gpt2_bytes import bytes_to_unicode
        try:
            from transformers.convert_slow_tokenizer import bytes_to_unicode as theirs
        except ImportError:
            from transformers.models.clip.tokenization_clip import bytes_to_unicode as theirs
        if list(bytes_to_unicode().items()) != list(theirs().items()):
            failed += 1
            print(f"scripts/gpt2_bytes.py: differs from transformers {transformers.__version__}'s bytes_to_unicode")
    return failed


def install_check(names: list[str], users: dict[str, list[pathlib.Path]], root: pathlib.Path, keep: bool) -> int:
    errors: list[str] = []
    envs = load_envs(errors)
    order: list[str] = []

    def add(name: str) -> None:
        if name in order:
            return
        if envs[name].layer:
            add(envs[name].layer)
        order.append(name)

    for name in names:
        if name not in envs:
            raise SystemExit(f"--install: no environment {name!r} (scripts/requirements/{name}.txt); "
                             f"there are {', '.join(sorted(envs))}")
        add(name)
    failed = 0
    uv = uv_tool(root)
    for name in order:
        start = time.monotonic()
        print(f"-- {name}: uv pip install -r scripts/requirements/{name}.txt"
              + (f" (layered on {envs[name].layer})" if envs[name].layer else ""), flush=True)
        try:
            venv = make_venv(name, envs, root, uv)
        except subprocess.CalledProcessError as exc:
            print(f"scripts/requirements/{name}.txt: installing it failed ({' '.join(exc.cmd[:2])}... exit {exc.returncode}, above)")
            return failed + 1
        installed = time.monotonic()
        paths = [rel(p) for p in users[name]]
        if name in names and paths:
            # transformers and diffusers may write a cache folder on import: not the user's.
            hf = {"HF_HOME": str(root / "hf-home"), "HF_HUB_OFFLINE": "1"}
            r = subprocess.run([str(venv / "bin" / "python"), __file__, "--run-imports", name, *paths],
                               env={**os.environ, **hf}, check=False)
            failed += r.returncode != 0
        du = subprocess.run(["du", "-sh", str(root)], capture_output=True, text=True, check=True).stdout.split()[0]
        print(f"-- {name}: installed in {installed - start:.0f} s, imports of {len(paths)} scripts in "
              f"{time.monotonic() - installed:.0f} s; venvs so far {du}", flush=True)
        # A venv no later environment is layered on is not needed any more: deleted now, so the
        # disk holds at most one base and its layer (the disk is shared with the cargo build).
        later = order[order.index(name) + 1:]
        if not keep and not any(envs[n].layer == name for n in later):
            shutil.rmtree(venv, ignore_errors=True)
        base = envs[name].layer
        if not keep and base and not any(envs[n].layer == base for n in later):
            shutil.rmtree(root / base, ignore_errors=True)
    return failed


def main() -> None:
    ap = argparse.ArgumentParser(description="Checks the scripts' pinned Python requirements (see the module docstring).")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--install", nargs="+", metavar="ENV", help="environments to install and import-check")
    group.add_argument("--install-ci", action="store_true", help=f"--install {' '.join(CI_ENVS)}")
    group.add_argument("--run-imports", nargs="+", metavar="ENV SCRIPT",
                       help="only execute the imports of these scripts that belong to ENV, here")
    ap.add_argument("--venvs", type=pathlib.Path, help="make the venvs here (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the venvs")
    args = ap.parse_args()
    if args.run_imports:
        failed = run_imports(args.run_imports[0], args.run_imports[1:])
        sys.exit(1 if failed else 0)
    errors, users = static_check()
    for e in errors:
        print(e)
    n = len(scripts())
    print(f"static: {n} scripts, {len(users)} environments, {len(errors)} problems")
    if errors:
        sys.exit(1)
    names = CI_ENVS if args.install_ci else args.install
    if not names:
        return
    root = args.venvs or pathlib.Path(tempfile.mkdtemp(prefix="culturelens-pyreqs-"))
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.iterdir())
    try:
        failed = install_check(names, users, root, args.keep)
    finally:
        if not args.keep:  # what this run made there, and the folder if that leaves it empty
            for made in set(root.iterdir()) - before:
                shutil.rmtree(made, ignore_errors=True)
            if not any(root.iterdir()):
                root.rmdir()
    if failed:
        sys.exit(f"install check: {failed} environment(s) with failing imports")
    print("install check: every import works")


if __name__ == "__main__":
    main()
