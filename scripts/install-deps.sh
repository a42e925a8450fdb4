#!/usr/bin/env bash
# Installs everything Octet needs to build and test: Debian packages and a Python venv.
# Idempotent: quiet and fast when everything is already present.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${OCTET_VENV:-$here/.venv}

pkgs=(
  cmake ninja-build g++ ccache clang-16 libclang-rt-16-dev pkg-config
  llvm-16-dev libmlir-16-dev mlir-16-tools llvm-16-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libopenblas-dev libgloo-dev libgtest-dev libzip-dev zlib1g-dev libzstd-dev libcurl4-openssl-dev libedit-dev libxml2-dev
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python venv with the independent oracles used by tests (onnx, onnxruntime, numpy). onnx is pinned
# because Import/onnx-node-tests.test runs the backend node tests that onnx package ships, and its
# must-pass list (test/Import/Inputs/onnx-node-tests-pass.txt) names that release's cases;
# onnxruntime 1.20.1 is the one that release was tested with here. Moving up (opset 23's Attention
# and RMSNormalization need onnx >= 1.18) means re-deriving that list with the new release.
py=${PYTHON:-python3}
stamp=$venv/.octet-deps-v1
if [ ! -f "$stamp" ]; then
  echo "install-deps: creating Python venv at $venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'numpy<2.3' 'onnx==1.17.0' 'onnxruntime==1.20.1' 'pyyaml'
  touch "$stamp"
fi
# matplotlib for the figures of fp8-run's logs (python -m octet.plot).
if [ ! -f "$venv/.octet-matplotlib" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check matplotlib && touch "$venv/.octet-matplotlib"
fi
# tensorboardX and wandb, the trackers fp8-run's logs reach (python -m octet.trackers), and
# safetensors for trained weights handed back to PyTorch (python -m octet.weights).
if [ ! -f "$venv/.octet-log-tools-2" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check tensorboardX wandb safetensors &&
    touch "$venv/.octet-log-tools-2"
fi
# cuDNN's C++ graph API (header-only; the CUDA backend's fused attention). Pinned: the frontend's
# API moves between releases and CudnnAttention.cpp is written against this one.
fe=nvidia-cudnn-frontend==1.32.0
if [ ! -f "$venv/.octet-${fe}" ]; then
  if "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$fe"; then
    touch "$venv/.octet-${fe}"
  else
    echo "install-deps: $fe could not be installed; the CUDA backend's attention will not use cuDNN"
  fi
fi
