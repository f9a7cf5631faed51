"""The deployment READMEs' commands, as the tests read them: fenced ``bash`` blocks, one command
per line, with the variables of the README's ``export`` lines substituted."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _expand(text: str, env: dict) -> str:
    return re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), text)


def readme_commands(path: Path) -> list[list[str]]:
    """Every command of the README's ``bash`` blocks, split like a shell would, ``export`` lines
    applied (and not returned)."""
    env, commands = {}, []
    for block in re.findall(r"```bash\n(.*?)```", path.read_text(), re.S):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            words = shlex.split(_expand(line, env))
            if words[0] == "export":
                for assignment in words[1:]:
                    name, _, value = assignment.partition("=")
                    env[name] = value
                continue
            commands.append(words)
    return commands


def commands_starting(path: Path, *prefix: str) -> list[list[str]]:
    found = [c for c in readme_commands(path) if c[:len(prefix)] == list(prefix)]
    if not found:
        raise AssertionError(f"{path} has no command starting {' '.join(prefix)}")
    return found


def flag_values(command: list[str], flag: str) -> list[str]:
    """Values of ``--flag VALUE`` / ``--flag=VALUE`` in a split command."""
    out = []
    for i, word in enumerate(command):
        if word == flag and i + 1 < len(command):
            out.append(command[i + 1])
        elif word.startswith(flag + "="):
            out.append(word[len(flag) + 1:])
    return out


def yaml_documents(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def submit_job_args() -> list[str]:
    """The Flink submission's ``ldp-marginals run`` arguments, from deploy/flink/submit-job.yaml."""
    (job,) = yaml_documents(DEPLOY / "flink" / "submit-job.yaml")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    if container["command"] != ["ldp-marginals", "run"]:
        raise AssertionError(f"submit-job.yaml runs {container['command']}, not ldp-marginals run")
    return list(container["args"])


def dockerfile(path: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        pending += line.rstrip("\\").strip() + " " if line.rstrip().endswith("\\") else line.strip()
        if line.rstrip().endswith("\\"):
            continue
        if pending:
            word, _, rest = pending.partition(" ")
            out.append((word.upper(), rest.strip()))
        pending = ""
    return out


