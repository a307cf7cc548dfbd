#!/usr/bin/env bash
# Builds (or finds in its cache) a guest image with Linux soft-RoCE (rxe) from Debian packages:
# a kernel and an initramfs holding static busybox, the rdma_rxe modules, iproute2's ip and
# rdma, ibverbs-utils (ibv_*_pingpong, ibv_devinfo), perftest, the rxe provider, and our /init
# and guest agent (scripts/rxe/guest/).
#
#   scripts/rxe/build-image.sh CACHE_DIR      prints the image directory (vmlinuz, initrd.img)
#
# Cache: CACHE_DIR/img-KEY/, KEY = a hash of this directory's scripts, the kernel ABI and the
# candidate version of every package in the image (the manifest of the last build: packages
# pulled in for a library are in it too). A package update or an edited script gives a new
# key, hence a rebuild; downloaded .debs are kept in CACHE_DIR/debs/. The kernel ABI comes from
# linux-image-amd64's dependency (never hard-coded). Needs apt-get (download only: nothing is
# installed), dpkg-deb, cpio, gzip, readelf, depmod/modprobe (kmod) and busybox-static.
set -euo pipefail

RXE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${1:?usage: build-image.sh CACHE_DIR}
mkdir -p "$CACHE/debs"
CACHE=$(cd "$CACHE" && pwd)

msg() { echo "build-image: $*" >&2; }
die() {
  msg "$*"
  exit 1
}
for t in apt-get apt-cache dpkg-deb dpkg cpio gzip readelf depmod modprobe sha256sum; do
  command -v "$t" >/dev/null || die "needs $t"
done
BUSYBOX=/bin/busybox
# Static: no program interpreter.
[[ -x $BUSYBOX ]] && ! readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP ||
  die "needs a static busybox (Debian package busybox-static)"

# The key covers the image's inputs: build-image.sh itself and guest/ (not the host harness).
# The kernel ABI, e.g. 6.1.0-56-amd64: what linux-image-amd64 currently depends on.
ABI=$(apt-cache depends linux-image-amd64 2>/dev/null |
  sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
[[ -n $ABI ]] || die "cannot resolve the kernel ABI from 'apt-cache depends linux-image-amd64' (apt-get update?)"

# What the guest runs; the libraries they need are found below (ELF NEEDED, recursively).
SEED=(linux-image-"$ABI" libc6 libgcc-s1 ibverbs-utils ibverbs-providers libibverbs1 librdmacm1
  perftest iproute2)
BINARIES=(usr/bin/ibv_rc_pingpong usr/bin/ibv_ud_pingpong usr/bin/ibv_devinfo usr/bin/ibv_devices
  usr/bin/ib_write_bw usr/bin/ib_write_lat usr/bin/ib_read_bw usr/bin/ib_read_lat
  usr/bin/ib_send_bw usr/bin/ib_send_lat usr/bin/ib_atomic_bw usr/bin/ib_atomic_lat
  bin/ip bin/rdma)
MODULES=(rdma_rxe crc32_generic virtio_net virtio_pci)

# candidate_versions PKG...: "pkg=version" lines (apt's candidate), sorted.
candidate_versions() {
  apt-cache show --no-all-versions "$@" 2>/dev/null |
    awk '/^Package: /{p=$2} /^Version: /{print p "=" $2}' | sort -u
}

scripts_hash=$(cd "$RXE_DIR" && find build-image.sh guest -type f -print0 |
  sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
seed_key=$( (echo "$ABI $scripts_hash"; candidate_versions "${SEED[@]}") | sha256sum | cut -c1-16)

# A cached image is valid while every package of its manifest keeps its candidate version.
for dir in "$CACHE"/img-"$seed_key"-*/; do
  [[ -f $dir/manifest && -f $dir/initrd.img && -f $dir/vmlinuz ]] || continue
  mapfile -t pkgs < <(cut -d= -f1 "$dir/manifest")
  if [[ $(candidate_versions "${pkgs[@]}") == "$(cat "$dir/manifest")" ]]; then
    msg "cached: ${dir%/}"
    echo "${dir%/}"
    exit 0
  fi
done

t0=$(date +%s)
WORK=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STAGE=$WORK/stage # every package extracted
ROOT=$WORK/root   # the initramfs
mkdir -p "$STAGE" "$ROOT"/usr/{lib,lib64,bin,sbin}
ln -s usr/lib "$ROOT/lib"
ln -s usr/lib64 "$ROOT/lib64"

declare -A have=()
# fetch PKG...: downloads (once, into the cache) and extracts the packages into STAGE.
fetch() {
  local p f
  local want=()
  for p in "$@"; do [[ -n ${have[$p]:-} ]] || want+=("$p"); done
  ((${#want[@]})) || return 0
  local missing=()
  for p in "${want[@]}"; do
    compgen -G "$CACHE/debs/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  if ((${#missing[@]})); then
    msg "downloading ${missing[*]}"
    (cd "$CACHE/debs" && apt-get -o APT::Sandbox::User=root download -q "${missing[@]}" >/dev/null) ||
      die "apt-get download ${missing[*]} failed"
  fi
  for p in "${want[@]}"; do
    # The candidate version's file (older downloads of the same package stay in the cache).
    local v
    v=$(candidate_versions "$p" | cut -d= -f2- | sed 's/:/%3a/')
    f=$(compgen -G "$CACHE/debs/${p}_${v}_*.deb" | head -n 1) || true
    [[ -n $f ]] || die "no .deb for $p version $v in $CACHE/debs"
    dpkg-deb -x "$f" "$STAGE"
    have[$p]=1
  done
}

fetch "${SEED[@]}"
[[ -d $STAGE/lib/modules/$ABI ]] || die "linux-image-$ABI has no /lib/modules/$ABI"

# Library search path inside the stage (merged /usr: look in both).
LIBDIRS=(lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 usr/lib/x86_64-linux-gnu/libibverbs)
find_lib() {
  local d
  for d in "${LIBDIRS[@]}"; do
    [[ -e $STAGE/$d/$1 ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}
# The package owning a library (from the host's dpkg database: the host runs the same release).
owner_of() {
  dpkg -S "*/$1" 2>/dev/null | grep -v -- '-dev' | head -n 1 | cut -d: -f1 | cut -d, -f1
}

declare -A copied=()
copy_file() { # path relative to STAGE, symlinks followed but kept as names
  local rel=$1
  [[ -n ${copied[$rel]:-} ]] && return 0
  copied[$rel]=1
  # The initramfs is merged-/usr: /lib and /lib64 link to /usr/lib(64); /bin is busybox's.
  local dst=$rel
  case $rel in lib/* | lib64/* | bin/* | sbin/*) dst=usr/$rel ;; esac
  mkdir -p "$ROOT/$(dirname "$dst")"
  cp -L "$STAGE/$rel" "$ROOT/$dst"
}
# copy_elf REL: the file and, recursively, every library it needs (from the stage only).
copy_elf() {
  local rel=$1 lib found
  copy_file "$rel"
  for lib in $(readelf -d "$STAGE/$rel" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    if ! found=$(find_lib "$lib"); then
      local pkg
      pkg=$(owner_of "$lib")
      [[ -n $pkg ]] || die "$rel needs $lib: not in the staged packages, no package owns it here"
      fetch "$pkg"
      found=$(find_lib "$lib") || die "$rel needs $lib: package $pkg does not provide it"
    fi
    [[ -n ${copied[$found]:-} ]] || copy_elf "$found"
  done
}

for b in "${BINARIES[@]}"; do
  [[ -e $STAGE/$b ]] || b=usr/$b
  [[ -e $STAGE/$b ]] || die "no $b in the staged packages"
  copy_elf "$b"
done
# The dynamic loader at its absolute path, and the rxe provider (dlopen'ed by libibverbs).
copy_elf lib64/ld-linux-x86-64.so.2 2>/dev/null || copy_elf usr/lib64/ld-linux-x86-64.so.2
rxe_provider=$(cd "$STAGE" && ls usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -n 1)
[[ -n $rxe_provider ]] || die "no librxe provider in ibverbs-providers"
copy_elf "$rxe_provider"
mkdir -p "$ROOT/etc/libibverbs.d"
cp "$STAGE/etc/libibverbs.d/rxe.driver" "$ROOT/etc/libibverbs.d/"

# Kernel modules, in load order (modprobe's dependency resolution over the stage).
depmod -b "$STAGE" "$ABI"
: >"$ROOT/etc/rxe-modules"
for m in "${MODULES[@]}"; do
  deps=$(modprobe -d "$STAGE" -S "$ABI" --show-depends "$m") || die "module $m not found for $ABI"
  while read -r kind path _; do
    [[ $kind == insmod ]] || continue
    rel=${path#"$STAGE"/}
    rel=${rel#/}
    grep -qx "/$rel" "$ROOT/etc/rxe-modules" && continue
    mkdir -p "$ROOT/usr/$(dirname "$rel")"
    cp "$STAGE/$rel" "$ROOT/usr/$rel"
    echo "/$rel" >>"$ROOT/etc/rxe-modules"
  done <<<"$deps"
done

# busybox, our /init and agent.
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,tmp,run,root,etc}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for a in $("$BUSYBOX" --list); do
  [[ -e $ROOT/bin/$a ]] || ln -s busybox "$ROOT/bin/$a"
done
install -m 755 "$RXE_DIR/guest/init" "$ROOT/init"
install -m 755 "$RXE_DIR/guest/rxe-agent" "$ROOT/bin/rxe-agent"
install -m 755 "$RXE_DIR/guest/rxe-serve" "$ROOT/bin/rxe-serve"
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$ROOT/etc/hosts"

manifest=$(candidate_versions "${!have[@]}")
key=$(sha256sum <<<"$manifest" | cut -c1-8)
OUT=$CACHE/img-$seed_key-$key
rm -rf "$OUT.tmp"
mkdir -p "$OUT.tmp"
(cd "$ROOT" && find . -print0 | sort -z | cpio --null -o -H newc --quiet --owner=0:0) |
  gzip -6 >"$OUT.tmp/initrd.img"
cp "$STAGE/boot/vmlinuz-$ABI" "$OUT.tmp/vmlinuz"
echo "$manifest" >"$OUT.tmp/manifest"
echo "$ABI" >"$OUT.tmp/abi"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
# Older images of this cache are stale now (their inputs changed): remove them.
for old in "$CACHE"/img-*; do
  [[ $old == "$OUT" ]] || rm -rf "$old"
done
msg "built $OUT in $(($(date +%s) - t0)) s (kernel $ABI, initrd $(du -k "$OUT/initrd.img" | cut -f1) KiB, ${#have[@]} packages)"
echo "$OUT"
