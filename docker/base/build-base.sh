#!/usr/bin/env bash
# The project's base image, made without any container registry: a minimal Debian root file system from
# Debian's own packages (debootstrap --variant=minbase) with Python 3.11, imported into the engine as an image.
#
#   docker/base/build-base.sh TAG
#
# tasks/runtimes/images.py runs this with TAG = serving-eval/base:<hash of this file and its settings> (make images does
# it too); every runtime image under docker/<runtime>/ builds FROM it (build argument BASE_IMAGE).
# Settings (environment): DEBIAN_SUITE (bookworm: its python3 is 3.11, the tag of the CPU torch wheel),
# DEBIAN_MIRROR (default: debootstrap's own default mirror; set it to a company mirror).
# Needs root, debootstrap and the docker CLI.
set -euo pipefail
tag="${1:?usage: build-base.sh TAG}"
suite="${DEBIAN_SUITE:-bookworm}"
# python3-venv: the runtime venvs; libpython3.11: Triton's python-backend stub links it; ca-certificates: the
# system trust store that the CA build option (ca/ in a build context) adds to.
packages="python3,python3-venv,libpython3.11,ca-certificates"
root="$(mktemp -d "${TMPDIR:-/tmp}/serving-eval-base-XXXXXX")"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$root" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >"$root.log" 2>&1 \
  || { tail -30 "$root.log"; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# What an image does not need: package lists and caches, docs, man pages, locales but C.UTF-8.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
# The project's conventions, set once here for every image built on this base: a venv at /opt/venv (first on
# PATH; the builder image makes it, docker/builder/), the project's files in /opt/serving-eval (the working folder,
# importable), unbuffered output and no .pyc files written at run time.
mkdir -p "$root/opt/serving-eval"
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV VIRTUAL_ENV=/opt/venv PYTHONPATH=/opt/serving-eval PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1' \
  --change 'WORKDIR /opt/serving-eval' \
  --change 'CMD ["/bin/bash"]' \
  --message "serving-eval base: debootstrap --variant=minbase $suite + $packages" - "$tag" >/dev/null
echo "$tag"
