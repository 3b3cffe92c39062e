#!/usr/bin/env bash
# Installs what the container path needs, when missing, from Debian's packages (Debian/Ubuntu hosts):
#   docker.io    dockerd with containerd, runc and docker-init (about 12 s)
#   debootstrap  makes the project's Debian base image without any container registry (docker/base/build-base.sh)
# Needs root (or sudo) and the distribution's package mirror. `make engine` and .ci/run run it; starting and
# stopping the engine is tasks/runtimes/docker_engine.py's job.
set -euo pipefail
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
[ "${#need[@]}" -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "installing ${need[*]} (Debian packages) ..."
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
