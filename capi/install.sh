#!/usr/bin/env bash
# Installs devipc's C ABI under PREFIX:
#   PREFIX/lib/libdevipc.so.0          the shared library (its soname)
#   PREFIX/lib/libdevipc.so            -> libdevipc.so.0 (what `-ldevipc` links)
#   PREFIX/lib/libdevipc.a             the static library
#   PREFIX/include/devipc.h            the header
#   PREFIX/lib/pkgconfig/devipc.pc     `pkg-config --cflags --libs devipc`
#                                      (`--static` adds the system libraries libdevipc.a needs)
# usage: capi/install.sh PREFIX [PROFILE]   (PROFILE: release (default) or debug; build it
# first with `cargo build -p devipc-capi [--release]`)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:?usage: capi/install.sh PREFIX [release|debug]}"
profile="${2:-release}"
target="${CARGO_TARGET_DIR:-$root/target}/$profile"
for f in libdevipc.so libdevipc.a; do
  [ -f "$target/$f" ] || { echo "no $target/$f: build it first (cargo build -p devipc-capi, with --release for release)" >&2; exit 1; }
done
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
# What libdevipc.a needs from the system (rustc's native-static-libs for this target).
libs_private="-ldl -lgcc_s -lutil -lrt -lpthread -lm -lc"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$target/libdevipc.so" "$prefix/lib/libdevipc.so.0"
ln -sf libdevipc.so.0 "$prefix/lib/libdevipc.so"
install -m 0644 "$target/libdevipc.a" "$prefix/lib/libdevipc.a"
install -m 0644 "$root/include/devipc.h" "$prefix/include/devipc.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@LIBS_PRIVATE@|$libs_private|" \
  "$root/capi/devipc.pc.in" > "$prefix/lib/pkgconfig/devipc.pc"
echo "installed devipc $version under $prefix"
