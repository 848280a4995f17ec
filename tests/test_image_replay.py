"""The CPU image, built for real from the Dockerfile's own instructions, runs the action.

No Docker engine is available here, but debootstrap and chroot are (as root): the module fixture
makes the root filesystem of the Dockerfile's default stage the way ``docker build`` would,

1. ``FROM debian:<release>...``: ``debootstrap --variant=minbase <release>``, then what the official
   ``debian:<release>-slim`` image adds to that (its deb822 apt sources with -updates and -security,
   its dpkg excludes for documentation, manual pages and translations, its apt configuration, no
   package lists or cached .deb files);
2. each ``ENV``, ``COPY`` (from the repository, after .dockerignore) and ``RUN`` (``/bin/sh -c`` in
   a chroot with the stage's environment so far) in order. Like a build, each RUN sees the host's
   DNS configuration and proxy variables, and the CA bundle the host's pip trusts (``PIP_CERT`` or
   pip.conf's ``cert``: here TLS goes through an intercepting proxy) is lent to pip for the build
   and removed afterwards.

Then the tests run the image's ENTRYPOINT in the chroot as GitHub's runner would (workspace at
/github/workspace, every input as INPUT_<NAME>) on the shipped example, check what it wrote, and
print the installed size; and they resolve the GPU stage's Python packages with the image's own pip
for that stage's platform and Python. Needs root, debootstrap (``apt-get install debootstrap``;
.ci/run installs it), Debian's mirror and PyPI.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import junitparser
import pytest
import yaml
from packaging.version import Version

import dockerfile

ROOT = dockerfile.ROOT
MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # debian image's ENV PATH
EXAMPLE_OUTPUT = "save_infer_model/scale_0.tmp_1"
MAX_IMAGE_BYTES = 500 * 10**6  # issue 18: a slim CPU image, under 500 MB unpacked

pytestmark = pytest.mark.slow

# What debuerreotype (which makes the official Debian images) adds for a -slim image and for Docker.
SLIM_DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
"""
APT_CONF = {
    "docker-clean": (
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
        '/var/cache/apt/*.bin || true"; };\n'
        'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
        '/var/cache/apt/*.bin || true"; };\n'
        'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'
    ),
    "docker-gzip-indexes": 'Acquire::GzipIndexes "true";\n',
    "docker-no-languages": 'Acquire::Languages "none";\n',
    "docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
}


def installed_bytes(root: Path) -> int:
    """Apparent size of every file and symlink under ``root`` (hard links once), what an image's
    unpacked size counts; /proc, /sys and /dev are left out."""
    total, seen = 0, set()
    for folder, dirs, files in os.walk(root):
        if Path(folder) == root:
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            st = os.lstat(os.path.join(folder, name))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def mb(n: int) -> str:
    return f"{n / 10**6:.0f} MB"


@dataclass
class Image:
    root: Path
    env: dict[str, str]  # the image's environment (its ENV instructions over the base's PATH)
    entrypoint: list[str]
    sizes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str = "/", timeout: int = 600):
        """``argv`` in the chroot, in ``cwd`` (an image path), with exactly ``env``."""
        cmd = ["chroot", str(self.root), "/usr/bin/env", "-i", f"--chdir={cwd}"]
        cmd += [f"{k}={v}" for k, v in env.items()] + argv
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def describe(proc: subprocess.CompletedProcess) -> str:
    args = proc.args[proc.args.index("-i") + 2 :] if "-i" in proc.args else proc.args
    return f"{args} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"


def make_slim(root: Path, release: str) -> None:
    """Turn a debootstrap minbase tree into what the official debian:<release>-slim image holds."""
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(
        f"Types: deb\nURIs: {MIRROR}\nSuites: {release} {release}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {SECURITY_MIRROR}\nSuites: {release}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
        encoding="utf-8",
    )
    for name, text in APT_CONF.items():
        (root / "etc/apt/apt.conf.d" / name).write_text(text, encoding="utf-8")
    (root / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/docker").write_text(SLIM_DPKG_EXCLUDES, encoding="utf-8")
    share = root / "usr/share"
    for sub in ("groff", "info", "linda", "lintian/overrides", "man"):
        shutil.rmtree(share / sub, ignore_errors=True)
    for path in (share / "doc").glob("*/*"):
        if path.name != "copyright":
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    for path in (share / "locale").glob("*"):
        if path.name != "locale.alias":
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    for path in [*(root / "var/cache/apt/archives").glob("*.deb"), *(root / "var/lib/apt/lists").glob("*_*")]:
        path.unlink()


def host_ca_bundle() -> str | None:
    """The CA bundle the host's pip verifies TLS with: PIP_CERT, else pip.conf's ``cert``, else the
    system bundle (a TLS-intercepting proxy's CA is in it, not in the certifi bundle pip ships)."""
    if os.environ.get("PIP_CERT"):
        return os.environ["PIP_CERT"]
    for conf in ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.expanduser("~/.config/pip/pip.conf")):
        parser = configparser.ConfigParser()
        if parser.read(conf) and parser.has_option("global", "cert"):
            return parser.get("global", "cert")
    system = "/etc/ssl/certs/ca-certificates.crt"
    return system if os.path.isfile(system) else None


def build_only_env(root: Path) -> dict[str, str]:
    """What a build lends each RUN beyond the image's ENV: the host's proxies, its CA bundle for pip."""
    env = {k: v for k, v in os.environ.items() if k.lower() in ("http_proxy", "https_proxy", "no_proxy")}
    env["HOME"] = "/root"
    cert = host_ca_bundle()
    if cert and Path(cert).is_file():
        shutil.copyfile(cert, root / "tmp/build-ca.crt")
        env["PIP_CERT"] = "/tmp/build-ca.crt"
    return env


def copy_into(root: Path, args: str, env: dict[str, str]) -> None:
    sources, dest = dockerfile.copy_args(args)
    dest = dockerfile.expand(dest, env)
    steps = [(sources, dest)]
    for image_path, source in dockerfile.image_files(steps).items():
        target = root / image_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the image replay needs root (debootstrap and chroot)")
    if shutil.which("debootstrap") is None:
        pytest.fail("debootstrap is not on PATH: apt-get install debootstrap (.ci/run does)")
    cpu = dockerfile.stage()
    match = re.fullmatch(r"debian:([a-z]+)(?:-\d{8})?-slim(?:@sha256:[0-9a-f]{64})?", cpu.base)
    assert match, f"FROM {cpu.base}: the replay needs a debian:<release>-slim base"
    release = match[1]
    root = tmp_path_factory.mktemp("image") / "rootfs"
    started = time.monotonic()
    proc = subprocess.run(
        ["debootstrap", "--variant=minbase", release, str(root), MIRROR],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"debootstrap failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    make_slim(root, release)
    shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")  # as a build's RUN sees it
    img = Image(root=root, env={"PATH": DEFAULT_PATH}, entrypoint=[])
    img.seconds["debootstrap"] = time.monotonic() - started
    img.sizes["base"] = installed_bytes(root)
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    try:
        build_env = build_only_env(root)
        started = time.monotonic()
        for keyword, args in cpu.instructions:
            if keyword == "ENV":
                img.env.update(dockerfile.env_pairs(args, img.env))
            elif keyword == "COPY":
                copy_into(root, args, img.env)
            elif keyword == "RUN":
                argv = dockerfile.exec_form(args) or ["/bin/sh", "-c", args]
                proc = img.run(argv, env={**img.env, **build_env})
                assert proc.returncode == 0, f"RUN {args[:200]}\n{describe(proc)}"
            elif keyword == "ENTRYPOINT":
                img.entrypoint = dockerfile.exec_form(args)
            else:
                pytest.fail(f"{keyword} {args}: not replayed (keep the CPU stage to ENV, COPY, RUN, ENTRYPOINT)")
        img.seconds["build"] = time.monotonic() - started
        (root / "tmp/build-ca.crt").unlink(missing_ok=True)
        img.sizes["image"] = installed_bytes(root)
        img.sizes["venv"] = installed_bytes(root / "opt/venv")
        yield img
    finally:
        subprocess.run(["umount", "-l", str(root / "proc")], check=False)
        shutil.rmtree(root, ignore_errors=True)  # ~400 MB; pytest keeps the last three tmp folders


def runner_env(img: Image, workspace: str, commands: str) -> dict[str, str]:
    """The environment a GitHub runner gives the Docker action's container, for the example."""
    env = dict(img.env)
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for name, spec in action["inputs"].items():
        default = str(spec.get("default", ""))
        env[f"INPUT_{name.upper()}"] = "" if "${{" in default else default
    env.update(
        INPUT_CONFIG="examples/ppocr-cls/gate.toml",
        INPUT_COMMENT_MODE="off",
        HOME="/github/home",
        GITHUB_WORKSPACE=workspace,
        GITHUB_OUTPUT=f"{commands}/set_output",
        GITHUB_STEP_SUMMARY=f"{commands}/step_summary",
        GITHUB_ACTIONS="true",
        GITHUB_EVENT_NAME="push",
        GITHUB_REPOSITORY="octo/repo",
        GITHUB_SHA="0" * 40,
        GITHUB_WORKFLOW="accuracy-gate",
        RUNNER_OS="Linux",
        CI="true",
    )
    return env


def test_cpu_image_runs_the_action_on_the_shipped_example(image, capsys):
    workspace, commands = "/github/workspace", "/github/file_commands"
    host_ws = image.root / workspace.lstrip("/")
    shutil.copytree(
        ROOT / "examples/ppocr-cls", host_ws / "examples/ppocr-cls", ignore=shutil.ignore_patterns("__pycache__")
    )
    (image.root / commands.lstrip("/")).mkdir(parents=True)
    (image.root / "github/home").mkdir(parents=True)
    for name in ("set_output", "step_summary"):
        (image.root / commands.lstrip("/") / name).touch()
    started = time.monotonic()
    # The action compares with the compiled block the image built: entrypoint.py's folder first on
    # sys.path once shadowed it with a source copy of gate/ that has no built library.
    env = runner_env(image, workspace, commands) | {"ACCURACY_GATE_COMPARE_KERNEL": "compiled"}
    proc = image.run(image.entrypoint, env=env, cwd=workspace)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, describe(proc)

    outputs = (image.root / commands.lstrip("/") / "set_output").read_text(encoding="utf-8")
    assert "passed=true" in outputs.splitlines() and "failed_outputs=[]" in outputs.splitlines(), outputs
    assert EXAMPLE_OUTPUT in (image.root / commands.lstrip("/") / "step_summary").read_text(encoding="utf-8")
    suite = junitparser.JUnitXml.fromfile(str(host_ws / "accuracy-gate-junit.xml"))
    cases = [case for s in suite for case in s]
    assert len(cases) == 1 and cases[0].is_passed, [c.result for c in cases]
    report = json.loads((host_ws / "accuracy-gate-report.json").read_text(encoding="utf-8"))
    assert report["passed"] is True, report
    assert [row["output"] for row in report["rows"]] == [EXAMPLE_OUTPUT]
    assert report["facts"]["onnxruntime_version"] == locked("cpu")["onnxruntime"]

    with capsys.disabled():
        print(
            f"\n[image replay] CPU image {mb(image.sizes['image'])} installed "
            f"(debian slim base {mb(image.sizes['base'])}, /opt/venv {mb(image.sizes['venv'])}); "
            f"debootstrap {image.seconds['debootstrap']:.0f} s, Dockerfile steps {image.seconds['build']:.0f} s, "
            f"action run {seconds:.1f} s"
        )
    assert image.sizes["image"] < MAX_IMAGE_BYTES, f"the CPU image is {mb(image.sizes['image'])} unpacked"


def locked(name: str) -> dict[str, str]:
    """Name -> version of lock/<name>.txt."""
    out = {}
    for line in (ROOT / "lock" / f"{name}.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            requirement = line.split()[0]
            package, version = requirement.split("==")
            out[package] = version
    return out


def test_cpu_image_installs_exactly_the_lock_into_a_venv_beside_an_externally_managed_python(image):
    system = [p for p in (image.root / "usr/lib").glob("python3.*") if (p / "EXTERNALLY-MANAGED").is_file()]
    assert system, "Debian's python3 is externally managed (PEP 668): the image must use a venv"
    env = dict(image.env)
    proc = image.run(["/usr/bin/python3", "-c", "import onnxruntime"], env=env)
    assert proc.returncode != 0 and "No module named 'onnxruntime'" in proc.stderr, describe(proc)
    where = "import gate, onnxruntime; print(gate.__file__); print(onnxruntime.__file__)"
    proc = image.run(["python", "-c", where], env=env)
    assert proc.returncode == 0, describe(proc)
    assert all(line.startswith("/opt/venv/lib/python3.") for line in proc.stdout.splitlines()), proc.stdout

    proc = image.run(["pip", "list", "--format=json"], env=env)
    assert proc.returncode == 0, describe(proc)
    installed = {normalized(p["name"]): p["version"] for p in json.loads(proc.stdout)}
    expected = {**locked("build"), **locked("cpu"), "pip": installed.get("pip"), "accuracy-gate": "0.1.0"}
    assert installed == expected
    assert "onnxruntime-gpu" not in installed


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve_gpu(image: Image, update, requirements: list[str], constraints: str | None = None) -> list[dict]:
    """pip's dry-run report in the image (its pip, >= 25) for the gpu stage's Python and platform."""
    argv = ["python", "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-"]
    argv += ["--target", "/tmp/gpu-target", "--python-version", update.GPU.python, "--implementation", "cp"]
    argv += [arg for platform in update.GPU.platforms() for arg in ("--platform", platform)]
    argv += ["--only-binary=:all:"]
    if constraints is not None:
        (image.root / "tmp/gpu-constraints.txt").write_text(constraints, encoding="utf-8")
        argv += ["-c", "/tmp/gpu-constraints.txt"]
    env = {**image.env, **build_only_env(image.root)}
    proc = image.run(argv + requirements, env=env, timeout=600)
    assert proc.returncode == 0, describe(proc)
    return [
        {
            "name": update.normalize(item["metadata"]["name"]),
            "version": item["metadata"]["version"],
            "sha256": item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256", ""),
        }
        for item in json.loads(proc.stdout)["install"]
    ]


def gpu_invariants(resolved: dict[str, str]) -> None:
    """cuda-python 12, a CUDA 12 onnxruntime-gpu, TensorRT 10 for CUDA 12, no CPU onnxruntime, no CUDA 13."""
    assert "onnxruntime" not in resolved, "the CPU onnxruntime must not come with [gpu]"
    assert Version("1.19") <= Version(resolved["onnxruntime-gpu"]) < Version("1.27"), resolved["onnxruntime-gpu"]
    assert Version(resolved["cuda-python"]).major == 12 and Version(resolved["cuda-bindings"]).major == 12
    assert Version(resolved["tensorrt-cu12-bindings"]).major == 10
    assert not [name for name in resolved if "cu13" in name], resolved


def test_gpu_stage_python_resolution(image, capsys):
    """The gpu stage's packages for its Python 3.12 / manylinux x86_64: the lock is pip's resolution
    of [gpu] under the lock's own versions (same files), and a fresh resolution of [gpu], what
    `pip install accuracy-gate[gpu]` gives a pip user today, keeps the CUDA 12 invariants."""
    update = dockerfile.load_script("lock/update.py")
    pins = {update.requirement_name(p): p for p in update.GPU_PINS}
    trt_version = pins[update.TRT_META].split("==")[1]

    def requirements(pinned: bool) -> list[str]:
        out = []
        for requirement in update.project_requirements(["gpu"]):
            name = update.requirement_name(requirement)
            if name == update.TRT_META:  # an sdist: resolved through its bindings wheel
                out.append(f"{update.TRT_BINDINGS}{requirement[len(update.TRT_META) :]}")
            else:
                out.append(pins.get(name, requirement) if pinned else requirement)
        return out + (list(update.TRT_LIBS_REQUIRES) if pinned else [])

    lock_lines = [ln for ln in (ROOT / "lock/gpu.txt").read_text(encoding="utf-8").splitlines() if ln[:1].isalnum()]
    lock = {ln.split("==")[0]: (ln.split("==")[1].split()[0], ln.split("sha256:")[1]) for ln in lock_lines}
    constraints = "".join(f"{name}=={version}\n" for name, (version, _) in lock.items())
    wanted = requirements(pinned=True) + [f"{update.TRT_BINDINGS}=={trt_version}"]
    pinned = resolve_gpu(image, update, wanted, constraints)
    assert {r["name"]: (r["version"], r["sha256"]) for r in pinned} == {
        name: value for name, value in lock.items() if name != update.TRT_META
    }, "lock/gpu.txt is not pip's resolution of [gpu] (regenerate it: python lock/update.py)"
    assert lock[update.TRT_META][0] == trt_version
    nvidia = (ROOT / "lock/gpu-nvidia.txt").read_text(encoding="utf-8").splitlines()
    assert f"{update.TRT_LIBS}=={trt_version}" in nvidia
    gpu_invariants({r["name"]: r["version"] for r in pinned})

    fresh = resolve_gpu(image, update, requirements(pinned=False))
    fresh_versions = {r["name"]: r["version"] for r in fresh}
    gpu_invariants(fresh_versions)

    summary = [
        f"GPU stage resolution (pip {image_pip_version(image)} in the replayed CPU image, "
        f"--python-version {update.GPU.python} --platform manylinux_2_{update.GPU.glibc_minor}_x86_64 and below):",
        f"  locked (lock/gpu.txt, what the image installs; + {update.TRT_LIBS}=={trt_version} from NVIDIA's index):",
        *[f"    {r['name']}=={r['version']}" for r in sorted(pinned, key=lambda r: r["name"])],
        f"    {update.TRT_META}=={trt_version} (sdist, hash-locked)",
        "  fresh `accuracy-gate[gpu]` for pip users (tensorrt-cu12 resolved through its bindings wheel):",
        *[f"    {name}=={version}" for name, version in sorted(fresh_versions.items())],
    ]
    with capsys.disabled():
        print("\n[image replay] " + "\n".join(summary))


def image_pip_version(image: Image) -> str:
    proc = image.run(["python", "-m", "pip", "--version"], env=dict(image.env))
    return proc.stdout.split()[1] if proc.returncode == 0 else "?"
