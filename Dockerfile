# Image of the accuracy-gate Docker action (action.yml: runs.image: Dockerfile).
#
# CUDA, cuDNN, TensorRT (with its Python bindings) and Python 3 come from the NGC base image: they are
# not installed from PyPI here. The tag is pinned; check the NGC TensorRT release notes (TensorRT, CUDA
# and minimum driver versions) before bumping it.
# GitHub runs a Docker action without --gpus, so this image runs on the CPU unless the runner's Docker
# defaults to the NVIDIA runtime (the base image sets NVIDIA_VISIBLE_DEVICES).
FROM nvcr.io/nvidia/tensorrt:25.01-py3

# No USER and no WORKDIR: GitHub runs the container as root with the workspace mounted and made the
# working directory (/github/workspace), so the action reads and writes paths relative to it.
ENV PYTHONUNBUFFERED=1

COPY pyproject.toml README.md entrypoint.py /opt/accuracy-gate/
COPY gate/ /opt/accuracy-gate/gate/

# The package's own dependencies (numpy, onnx, onnxruntime, ...) come from pyproject.toml; the
# TensorRT runner also needs cuda-python (TensorRT itself is the base image's, so the [trt] extra,
# which would pull TensorRT from PyPI, is not installed).
RUN python3 -m pip install --no-cache-dir /opt/accuracy-gate "cuda-python>=12,<14"

ENTRYPOINT ["python3", "/opt/accuracy-gate/entrypoint.py"]
