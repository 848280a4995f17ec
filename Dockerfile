# Images of the accuracy-gate actions: one Dockerfile, two targets (README "Images").
#
#   docker build .               The CPU image (the last stage): Debian trixie-slim, its python3 (3.13)
#                                and CPU onnxruntime. action.yml runs it on GitHub-hosted runners.
#   docker build --target gpu .  The GPU image: NVIDIA's CUDA 12.8 runtime + cuDNN 9 image, TensorRT
#                                10.8, onnxruntime-gpu 1.22 (a CUDA 12 build), cuda-python 12.9.
#                                gpu/action.yml runs it with `docker run --gpus` on self-hosted runners.
#
# - Base images are pinned by digest; Python packages come from lock/ (exact versions with sha256
#   hashes, installed with --no-deps --require-hashes): two builds install the same files. After a
#   change of pyproject.toml's dependencies run `python lock/update.py`.
# - Both bases' python3 is "externally managed" (PEP 668: /usr/lib/python3.X/EXTERNALLY-MANAGED makes
#   pip refuse to install into it), so everything goes into a virtual environment, /opt/venv, which
#   is first on PATH. The system Python and its dpkg-owned files stay untouched.
# - The dependencies are installed in a layer before the package's code is copied, so a code change
#   rebuilds only the last two layers. Each stage ends with a smoke import of what it ships.
# - apt packages are not pinned to versions (hadolint DL3008): Debian and Ubuntu remove superseded
#   versions from their archives, so a pin breaks the build at the next security update; the base
#   image's digest fixes the release.
# - GitHub runs a Docker action's container as root with the workspace mounted as its working
#   directory (/github/workspace), so the CPU stage has no USER and no WORKDIR.
# - tests/test_image_replay.py builds the last stage's root filesystem from these instructions
#   (debootstrap, then each RUN/COPY/ENV in a chroot) and runs the action in it: keep that stage to
#   FROM debian:<release>..., ENV, RUN, COPY and an exec-form ENTRYPOINT.

# --- gpu: CUDA 12.8 + cuDNN 9, TensorRT 10.8, onnxruntime-gpu 1.22, cuda-python 12.9 ---------------
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04@sha256:ac55d124da4882b497f732d8dfd9a702d5447a5f29d08d56da6f64f0a1eb34bc AS gpu

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# tensorrt-cu12 is a source package (its `tensorrt` module imports the bindings and libs wheels):
# NVIDIA_TENSORRT_DISABLE_INTERNAL_PIP keeps its setup.py from running a pip of its own, and it builds
# with lock/build.txt's setuptools. TensorRT's libraries are a wheel on NVIDIA's index only.
COPY lock/build.txt lock/gpu.txt lock/gpu-nvidia.txt /opt/accuracy-gate/lock/
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --no-deps --require-hashes -r /opt/accuracy-gate/lock/build.txt \
    && NVIDIA_TENSORRT_DISABLE_INTERNAL_PIP=1 pip install --no-cache-dir --no-deps --require-hashes \
        --no-build-isolation -r /opt/accuracy-gate/lock/gpu.txt \
    && pip install --no-cache-dir --no-deps --index-url https://pypi.nvidia.com \
        -r /opt/accuracy-gate/lock/gpu-nvidia.txt

COPY pyproject.toml README.md entrypoint.py /opt/accuracy-gate/
COPY gate/ /opt/accuracy-gate/gate/
# A C compiler for the compare kernel's compiled block, only in this layer (as in the CPU stage).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir --no-deps --no-build-isolation /opt/accuracy-gate \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /opt/accuracy-gate/build /opt/accuracy-gate/accuracy_gate.egg-info \
        /opt/accuracy-gate/gate \
    && pip check \
    && python -c "import sys; sys.path.insert(0, '/opt/accuracy-gate'); \
import tensorrt, onnxruntime, cuda.bindings.runtime, gate.cli; \
from gate.comparator.kernels_fused import kernel_name; \
assert kernel_name() == 'compiled', 'the compare kernel was not built'; \
assert tensorrt.__version__.startswith('10.'), tensorrt.__version__; \
assert 'CUDAExecutionProvider' in onnxruntime.get_available_providers(), onnxruntime.get_available_providers(); \
print('tensorrt', tensorrt.__version__, 'onnxruntime-gpu', onnxruntime.__version__)"

# NVIDIA's entrypoint first (CUDA forward compatibility on data-center GPUs, the banner), then the gate.
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh", "/opt/venv/bin/python", "/opt/accuracy-gate/entrypoint.py"]

# --- the CPU image (default target): Debian trixie-slim, Python 3.13, CPU onnxruntime -------------
FROM debian:trixie-20260918-slim@sha256:a99cfc517144bc59b1978475ec53b46ecabec7e43635402ee5b77cc54cd1b20a

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

COPY lock/build.txt lock/cpu.txt /opt/accuracy-gate/lock/
RUN python3 -m venv /opt/venv \
    && pip install --no-cache-dir --no-deps --require-hashes \
        -r /opt/accuracy-gate/lock/build.txt -r /opt/accuracy-gate/lock/cpu.txt

COPY pyproject.toml README.md entrypoint.py /opt/accuracy-gate/
COPY gate/ /opt/accuracy-gate/gate/
# The compare kernel's compiled block (gate/comparator/_fused.c) needs a C compiler to build; it is
# installed and removed in this one layer, so the image keeps only the built library. The source
# copy of gate/ is removed after the install: entrypoint.py puts /opt/accuracy-gate first on
# sys.path, where a copy without the built library would shadow the installed package (the smoke
# check imports as entrypoint.py does).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir --no-deps --no-build-isolation /opt/accuracy-gate \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /opt/accuracy-gate/build /opt/accuracy-gate/accuracy_gate.egg-info \
        /opt/accuracy-gate/gate \
    && pip check \
    && python -c "import sys; sys.path.insert(0, '/opt/accuracy-gate'); import onnxruntime, gate.cli; \
from gate.comparator.kernels_fused import kernel_name; \
assert kernel_name() == 'compiled', 'the compare kernel was not built'; \
providers = onnxruntime.get_available_providers(); \
assert 'CPUExecutionProvider' in providers and 'CUDAExecutionProvider' not in providers, providers; \
print('onnxruntime', onnxruntime.__version__)"

ENTRYPOINT ["/opt/venv/bin/python", "/opt/accuracy-gate/entrypoint.py"]
