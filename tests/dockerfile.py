"""A reader of this repository's Dockerfile and .dockerignore (and an importer of its build scripts,
lock/update.py and gpu/generate.py), for the packaging, lock and replay tests.

It knows what the Dockerfile uses: comment lines, ``\\`` continuations (the default escape character,
no heredocs), stages (``FROM image [AS name]``), exec-form (JSON) and shell-form arguments, ``ENV``
with ``key=value`` pairs and ``$VAR`` / ``${VAR}`` references, ``COPY`` without ``--from``, and
.dockerignore patterns (``**`` for any depth, a trailing ``/`` for folders).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def load_script(relative: str):
    """The repository's script at ``relative`` (e.g. ``lock/update.py``) imported as a module."""
    name = "repo_" + re.sub(r"\W", "_", relative.removesuffix(".py"))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / relative)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Stage:
    """One build stage: its ``FROM`` image, its ``AS`` name (or None) and its instructions."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def one(self, keyword: str) -> str:
        found = self.all(keyword)
        assert len(found) == 1, f"stage {self.name or self.base} has {len(found)} {keyword} instructions"
        return found[0]


def instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` of each instruction, continuations joined, comment lines dropped."""
    found, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical = (pending + stripped).strip()
        pending = ""
        if logical:
            keyword, _, args = logical.partition(" ")
            found.append((keyword.upper(), args.strip()))
    return found


def stages(text: str | None = None) -> list[Stage]:
    """The Dockerfile's stages in order (the last one is what ``docker build`` builds by default)."""
    text = DOCKERFILE.read_text(encoding="utf-8") if text is None else text
    out: list[Stage] = []
    for keyword, args in instructions(text):
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            assert len(words) in (1, 3), f"FROM {args}: expected `FROM image [AS name]`"
            out.append(Stage(words[0], name))
        else:
            assert out, f"{keyword} before the first FROM"
            out[-1].instructions.append((keyword, args))
    return out


def stage(name: str | None = None) -> Stage:
    """The stage called ``name``, or the default (last) stage."""
    all_stages = stages()
    if name is None:
        return all_stages[-1]
    matches = [s for s in all_stages if s.name == name]
    assert len(matches) == 1, f"the Dockerfile has {len(matches)} stages named {name}"
    return matches[0]


def exec_form(args: str) -> list[str] | None:
    """The argument list of an exec-form (JSON array) instruction, or None for the shell form."""
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


_REFERENCE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def expand(value: str, env: dict[str, str]) -> str:
    """Docker's substitution of ``$VAR`` and ``${VAR}`` (unset: empty) in ENV/COPY/WORKDIR values."""
    assert "${" not in _REFERENCE.sub("", value), f"{value}: only $VAR and ${{VAR}} are replayed"
    return _REFERENCE.sub(lambda m: env.get(m[1] or m[2], ""), value)


def env_pairs(args: str, env: dict[str, str]) -> list[tuple[str, str]]:
    """The ``(name, value)`` pairs one ``ENV`` sets, values expanded against ``env`` (the values
    before this instruction, as Docker does for every pair of one ENV)."""
    words = shlex.split(args, posix=True)
    if words and "=" not in words[0]:  # legacy `ENV name value with spaces`
        return [(words[0], expand(args.split(None, 1)[1], env))]
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        assert sep, f"ENV {args}: `{word}` is not name=value"
        pairs.append((name, expand(value, env)))
    return pairs


def copy_args(args: str) -> tuple[list[str], str]:
    """``(sources, destination)`` of one COPY/ADD's arguments (no ``--from``; flags dropped)."""
    words = exec_form(args) or shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    assert not any(f.startswith("--from") for f in flags), f"COPY {args}: COPY --from is not replayed"
    paths = [w for w in words if not w.startswith("--")]
    return paths[:-1], paths[-1]


def copy_steps(stage_: Stage) -> list[tuple[list[str], str]]:
    """``(sources, destination)`` of each COPY/ADD of ``stage_``."""
    return [copy_args(args) for keyword, args in stage_.instructions if keyword in ("COPY", "ADD")]


def ignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines() if DOCKERIGNORE.exists() else []
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    assert not any(p.startswith("!") for p in patterns), "exceptions (!pattern) are not replayed"
    return [p.rstrip("/") for p in patterns]


def _pattern_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as a regex (Go's filepath.Match plus ``**``: ``*`` and ``?`` stay within
    one path segment, ``**/`` is any number of folders)."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            close = pattern.index("]", i)
            out, i = out + pattern[i : close + 1], close + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether the build context leaves out ``relative`` (a path relative to the repository): a
    pattern matches it or one of its parent folders."""
    parts = PurePosixPath(relative).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(_pattern_regex(p).fullmatch(prefix) for p in patterns for prefix in prefixes)


def image_files(steps) -> dict[str, Path]:
    """Image path -> repository path of every file the COPY steps put into the image, after
    .dockerignore (Docker's rules: a folder source copies its contents; a file source into a
    destination ending in ``/``, or one of several sources, keeps its name)."""
    patterns = ignore_patterns()
    files = {}
    for sources, dest in steps:
        for source in sources:
            src = ROOT / source
            if not src.exists():
                continue  # reported by test_dockerfile_copies_only_files_of_the_build_context
            if src.is_dir():
                for path in sorted(src.rglob("*")):
                    relative = path.relative_to(ROOT).as_posix()
                    if path.is_file() and not ignored(relative, patterns):
                        files[str(PurePosixPath(dest) / path.relative_to(src).as_posix())] = path
            elif dest.endswith("/") or len(sources) > 1:
                files[str(PurePosixPath(dest) / src.name)] = src
            else:
                files[dest] = src
    return files
