#!/usr/bin/env bash
# Builds node-llama-cpp's bundled llama.cpp with CUDA for the cards Radixgate serves, with
# node-llama-cpp's own CLI, then checks what every worker gets (native/check-backends.ts).
# See native/README.md for when you need this and what it changes.
#
#   native/build-cuda.sh                          # sm_86 (RTX 3090, A6000) + sm_90 (H100, H200)
#   CUDA_ARCHITECTURES=86 native/build-cuda.sh    # only the 3090/A6000 box
#   CUDA_ARCHITECTURES=native native/build-cuda.sh  # the GPUs in this machine (build on the server)
#   native/build-cuda.sh --config config.yml      # arguments go to the final check-backends
#
# Environment:
#   CUDA_ARCHITECTURES  CMAKE_CUDA_ARCHITECTURES for llama.cpp (default "86;90"; "native" = this
#                       machine's GPUs, needs CMake >= 3.24 and a visible GPU)
#   CUDA_PATH, CUDACXX  the toolkit to use (default: the nvcc on PATH, else /usr/local/cuda)
#   SKIP_CHECK=1        build only (a build machine without the target GPUs)
#
# Recipe from node-llama-cpp's docs (guide/CUDA.md, guide/building-from-source.md): custom
# llama.cpp CMake options go in NODE_LLAMA_CPP_CMAKE_OPTION_<name> environment variables
# before `npx --no node-llama-cpp source download --gpu cuda`; CUDACXX + CUDA_PATH fix
# "Failed to detect a default CUDA architecture". `source download` without --release takes
# the llama.cpp release bundled with node-llama-cpp (git bundle, no GitHub access needed).
#
# NOT RUN with CUDA by the author: written on a machine with no GPU and no cuBLAS. See the
# "Tested here" section of native/README.md.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO_ROOT="$(pwd)"
NLC_DIR="$REPO_ROOT/node_modules/node-llama-cpp"
ARCHS="${CUDA_ARCHITECTURES:-86;90}"

say() { printf '\n== %s\n' "$*"; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# "12.4" -> 1204, for comparisons
version_number() { local major="${1%%.*}" minor="${1#*.}"; minor="${minor%%.*}"; echo $((10#$major * 100 + 10#${minor:-0})); }

say "preflight"

command -v node >/dev/null || die "node not found (Radixgate needs Node 20)"
[ -f "$NLC_DIR/package.json" ] || die "$NLC_DIR is missing: run 'npm ci' in $REPO_ROOT first"
NLC_VERSION="$(node -p "require('$NLC_DIR/package.json').version")"
echo "node $(node --version), node-llama-cpp $NLC_VERSION"
[ "$NLC_VERSION" = "3.21.1" ] || warn "Radixgate pins node-llama-cpp 3.21.1; this recipe was written against it, found $NLC_VERSION"

# nvcc: CUDACXX, else PATH, else CUDA_PATH, else /usr/local/cuda
NVCC="${CUDACXX:-}"
if [ -z "$NVCC" ]; then
  if command -v nvcc >/dev/null; then NVCC="$(command -v nvcc)"
  elif [ -n "${CUDA_PATH:-}" ] && [ -x "$CUDA_PATH/bin/nvcc" ]; then NVCC="$CUDA_PATH/bin/nvcc"
  elif [ -x /usr/local/cuda/bin/nvcc ]; then NVCC=/usr/local/cuda/bin/nvcc
  fi
fi
[ -n "$NVCC" ] && [ -x "$NVCC" ] || die "nvcc not found: install the CUDA Toolkit (12.4 or newer per node-llama-cpp's docs) and put its bin/ on PATH, or set CUDACXX=/usr/local/cuda-12.x/bin/nvcc"
# Follow wrapper scripts such as "exec /usr/local/cuda-13.0/bin/nvcc" to the real toolkit.
NVCC_REAL="$(readlink -f "$NVCC")"
if head -c 2 "$NVCC_REAL" | grep -q '#!'; then
  wrapped="$(grep -oE '/[^ "]*/bin/nvcc' "$NVCC_REAL" | head -n 1 || true)"
  [ -n "$wrapped" ] && [ -x "$wrapped" ] && NVCC_REAL="$(readlink -f "$wrapped")"
fi
export CUDACXX="$NVCC_REAL"
export CUDA_PATH="${CUDA_PATH:-$(dirname "$(dirname "$NVCC_REAL")")}"
CUDA_VERSION="$("$CUDACXX" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)"
[ -n "$CUDA_VERSION" ] || die "could not read the CUDA version from '$CUDACXX --version'"
echo "nvcc: $CUDACXX (CUDA $CUDA_VERSION), CUDA_PATH=$CUDA_PATH"
if [ "$(version_number "$CUDA_VERSION")" -lt 1108 ]; then
  die "CUDA $CUDA_VERSION is too old: sm_89/sm_90 need CUDA 11.8, node-llama-cpp documents 12.4 or newer"
elif [ "$(version_number "$CUDA_VERSION")" -lt 1204 ]; then
  warn "CUDA $CUDA_VERSION is older than the 12.4 node-llama-cpp documents; the build may still work"
fi

# ggml-cuda links cuBLAS: an nvcc-only toolkit (e.g. pip's nvidia-cuda-nvcc) cannot build it.
cublas_found=""
for dir in "$CUDA_PATH/lib64" "$CUDA_PATH/lib" "$CUDA_PATH"/targets/*/lib; do
  if compgen -G "$dir/libcublas.so*" >/dev/null; then cublas_found="$dir"; break; fi
done
if [ -z "$cublas_found" ] && command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  cublas_found="(ldconfig)"
fi
[ -n "$cublas_found" ] || die "cuBLAS (libcublas.so) not found under $CUDA_PATH: install the full CUDA Toolkit (e.g. apt 'cuda-toolkit-12-8', or at least libcublas-dev matching CUDA $CUDA_VERSION)"
echo "cuBLAS: $cublas_found"

if command -v cmake >/dev/null; then
  CMAKE_VERSION="$(cmake --version | sed -n 's/cmake version \([0-9.]*\).*/\1/p')"
  echo "cmake $CMAKE_VERSION"
  [ "$(version_number "$CMAKE_VERSION")" -ge 326 ] || warn "node-llama-cpp recommends CMake 3.26 or newer for CUDA builds (found $CMAKE_VERSION)"
  if [ "$ARCHS" = "native" ] && [ "$(version_number "$CMAKE_VERSION")" -lt 324 ]; then
    die "CUDA_ARCHITECTURES=native needs CMake >= 3.24 (llama.cpp otherwise silently builds its default list)"
  fi
else
  warn "cmake not found: node-llama-cpp will download its own (needs internet); install cmake to avoid that"
fi
command -v c++ >/dev/null || command -v g++ >/dev/null || die "no C++ compiler (install build-essential)"
command -v make >/dev/null || command -v ninja >/dev/null || die "neither make nor ninja found (install build-essential)"

# The GPUs in this machine: their compute capability must be among the architectures built.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  DRIVER_CUDA="$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
  echo "driver supports CUDA ${DRIVER_CUDA:-?}; GPUs:"
  nvidia-smi --query-gpu=index,name,compute_cap,memory.total --format=csv,noheader | sed 's/^/  /'
  if [ -n "$DRIVER_CUDA" ] && [ "$(version_number "$DRIVER_CUDA")" -lt "$(version_number "$CUDA_VERSION")" ]; then
    warn "the driver supports CUDA $DRIVER_CUDA, older than toolkit $CUDA_VERSION: the binary will fail with 'forward compatibility was attempted on non supported HW' or 'failed to initialize CUDA'. Update the driver or build with an older toolkit (CUDACXX=...)."
  fi
  if [ "$ARCHS" != "native" ]; then
    while IFS= read -r cap; do
      sm="${cap//./}"
      sm="${sm// /}"
      case ";$ARCHS;" in
        *";$sm;"* | *";$sm-real;"* | *";${sm}a-real;"* | *";${sm}a;"*) ;;
        *";$sm-virtual;"*) warn "sm_$sm is built as PTX only (JIT-compiled at first load)" ;;
        *) warn "a GPU here has compute capability $cap (sm_$sm), which CUDA_ARCHITECTURES=\"$ARCHS\" does not build" ;;
      esac
    done < <(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | sort -u)
  fi
  HAVE_GPU=1
else
  HAVE_GPU=""
  [ "$ARCHS" = "native" ] && die "CUDA_ARCHITECTURES=native needs a visible NVIDIA GPU (nvidia-smi fails here)"
  warn "no NVIDIA GPU visible (nvidia-smi missing or failing): building, but the final check needs the target machine"
fi

# Other NODE_LLAMA_CPP_CMAKE_OPTION_* variables change the binary and its folder name too.
inherited_options="$(env | grep '^NODE_LLAMA_CPP_CMAKE_OPTION_' | grep -v '^NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CUDA_ARCHITECTURES=' || true)"
[ -z "$inherited_options" ] || warn "also building with these custom CMake options from the environment: $inherited_options"
[ -z "${NODE_LLAMA_CPP_GPU:-}" ] || warn "NODE_LLAMA_CPP_GPU=$NODE_LLAMA_CPP_GPU is set; --gpu cuda overrides it for the build"

say "build (CUDA_ARCHITECTURES=$ARCHS)"
if [ "$ARCHS" = "native" ]; then
  # No custom option: node-llama-cpp sets GGML_NATIVE=ON for a build on the machine that runs
  # it, and llama.cpp then uses CMAKE_CUDA_ARCHITECTURES=native. The folder is plain
  # linux-x64-cuda, which getLlama({gpu, build: "never"}) finds with no extra environment.
  unset NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CUDA_ARCHITECTURES
else
  export NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CUDA_ARCHITECTURES="$ARCHS"
fi
started=$(date +%s)
# Re-clones the bundled llama.cpp release into node_modules/node-llama-cpp/llama/llama.cpp and
# compiles it into node_modules/node-llama-cpp/llama/localBuilds/<folder>. Slow: node-llama-cpp's
# docs say up to an hour for CUDA.
npx --no node-llama-cpp source download --gpu cuda
echo "build took $(( $(date +%s) - started )) s"

LAST_BUILD="$(node -p "require('$NLC_DIR/llama/lastBuild.json').folderName")"
BUILD_DIR="$NLC_DIR/llama/localBuilds/$LAST_BUILD"
[ -f "$BUILD_DIR/buildDone.status" ] || die "node-llama-cpp reported success but $BUILD_DIR/buildDone.status is missing"
echo "local build: $BUILD_DIR"

say "how Radixgate picks this build"
if [ "$ARCHS" = "native" ]; then
  echo "The build has no custom CMake options: getLlama({gpu: \"cuda\" | \"auto\", build: \"never\"}) in every"
  echo "Radixgate worker now loads it instead of the prebuilt binary, with no extra environment."
else
  echo "The folder name carries a hash of the custom CMake options. getLlama({build: \"never\"}) finds"
  echo "this build only when the process has the SAME option in its environment; otherwise it silently"
  echo "keeps using the prebuilt binary. Start Radixgate with:"
  echo
  echo "  export NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CUDA_ARCHITECTURES='$ARCHS'"
  [ -z "$inherited_options" ] || echo "$inherited_options" | sed "s/^\([^=]*\)=\(.*\)$/  export \1='\2'/"
  echo
  echo "(systemd: Environment=...; docker: -e ...). Worker processes inherit it."
fi

if [ -n "${SKIP_CHECK:-}" ] || [ -z "$HAVE_GPU" ]; then
  say "check skipped"
  echo "Run on the GPU machine, with the environment above: npx tsx native/check-backends.ts --expect-local-build"
  exit 0
fi

say "check: which backend and device each worker gets"
npx tsx native/check-backends.ts --expect-local-build "$@"
