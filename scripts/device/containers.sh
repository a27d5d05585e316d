#!/usr/bin/env bash
# The pinned path on a lent GPU machine: a Docker daemon with CDI, the machine's own software
# stack as a local base image, and the kit's GPU containers, against the host runtime in the same
# call. The machine has no Docker, no registry and no package index; the daemon binaries and the
# driver's missing wheels travel with the call (scripts/device/prepare.sh makes them).
#
#   bash scripts/device/prepare.sh                    # here, once: .whl/ and .device/
#   device run, carry [".whl", ".device"]:
#     bash scripts/device/containers.sh daemon docker host        # one call
#     bash scripts/device/containers.sh daemon rerun BUNDLE.tar.gz  # a fresh machine, later
#
# Stages, in the order given (each idempotent on a machine that is still warm):
#   daemon  unpack dockerd 26, containerd, runc; start dockerd (CDI on, no bridge, no iptables);
#           write a CDI spec for the GPUs from /dev/nvidia* and the driver folder /usr/local/nvidia
#           (what `nvidia-ctk cdi generate` writes on a server with the toolkit); import /usr,
#           /opt/torch and /etc as the image kit-host-stack:local (the driver folder left out:
#           it comes from the host through CDI, as on any GPU server)
#   docker  kit reproduce RECIPE --runtime docker --env ngc-pytorch --base-image kit-host-stack:local
#           (the environment image built on the first call: the time to the sealed bundle is the
#           first-run figure)
#   build   kit build RECIPE --env ngc-pytorch --base-image kit-host-stack:local: the image the
#           docker stage would build on its first run, alone (a call of the daemon and the build,
#           then warm calls whose runs start at once)
#   host    kit reproduce RECIPE --runtime host, the same recipe in the machine's own Python
#   rerun   kit reproduce BUNDLE of a bundle made by `docker` on another machine (a .tar.gz)
# KIT_ARGS adds options to the docker and host stages (--repeats 1), RERUN_ARGS to the rerun;
# REIMPORT=1 imports the base image anew. A stage named again writes a new bundle (NAME-2, ...):
# `docker host docker host` are interleaved rounds (runtime_ratio.py of
# reports/measurements/2026-11-24-h100x1-llama-container-rounds pairs them);
# PACK=0 leaves the bundles in /tmp/bundles for the caller to pack. `recipe=PATH` between stages
# switches the recipe for the stages after it, `only=NAME[,NAME]` keeps those of its benchmarks; BUDGET_S=N starts no stage after N seconds (a
# device call has 600).
#   podmand Podman 4.3 instead of Docker (carry .podman, made by `prepare.sh podman`, instead of
#           .device): unpack podman, conmon, catatonit, runc; start `podman system service` on
#           /run/podman/podman.sock (overlay storage under /tmp, cgroupfs, no network backend:
#           the kit's containers run with network none); the same CDI spec at cdiVersion 0.5.0
#           in /var/run/cdi (Podman 4.3 reads no newer); the same tar of / imported as the same
#           base image (`podman import`), so its content hash can be set beside Docker's
#   podman  kit reproduce RECIPE --runtime podman --env ngc-pytorch --base-image kit-host-stack:local
#   faults  the GPU path's faults: a GPU the CDI spec lacks, a container killed for memory, an
#           image without torch; each must be one line or a failed run, never a hang
# Logs and bundles go to $OUT (bundles as .tar.gz: the device tool returns 2 folder levels).
set -uo pipefail
: "${OUT:=/tmp/out}"
RECIPE=${RECIPE:-recipes/single_gpu.yaml}
STATE=/tmp/kit-device
BASE=kit-host-stack:local
mkdir -p "$OUT" "$STATE"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  rm -rf /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$PWD:${PYTHONPATH:-}"
export PATH="$STATE/bin:$PATH"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/device.log"; }
kit() { python3 -m kit "$@"; }

start_daemon() {
  if python3 -c "import docker; docker.from_env().ping()" 2>/dev/null; then
    log "daemon: already answering"; return 0
  fi
  [ -x "$STATE/bin/dockerd" ] || tar -C "$STATE" -xJf .device/docker-bin.tar.xz
  # SECCOMP=unconfined starts the daemon with no seccomp filter for any container (an experiment:
  # what the filter costs a workload); the default keeps Docker's own profile
  local seccomp=""
  [ "${SECCOMP:-}" = unconfined ] && seccomp=', "seccomp-profile": "unconfined"'
  cat >"$STATE/daemon.json" <<JSON
{"features": {"cdi": true}, "cdi-spec-dirs": ["/etc/cdi"], "iptables": false, "ip6tables": false,
 "bridge": "none", "userland-proxy": false, "data-root": "/tmp/docker-root"$seccomp}
JSON
  setsid dockerd --config-file "$STATE/daemon.json" >"$OUT/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    python3 -c "import docker; docker.from_env().ping()" 2>/dev/null && break
    sleep 0.5
  done
  python3 -c "import docker; v = docker.from_env().version(); print('dockerd', v['Version'])" \
      | tee -a "$OUT/device.log"
}

write_cdi_spec() {  # [DIR VERSION]: Docker 26 reads /etc/cdi at 0.6.0, Podman 4.3 reads no newer than 0.5.0
  local dir=${1:-/etc/cdi}
  mkdir -p "$dir"
  CDI_DIR=$dir CDI_VERSION=${2:-0.6.0} python3 - <<'PY'
import glob, json, os, re
nodes = sorted(glob.glob("/dev/nvidia[0-9]*"), key=lambda p: int(re.sub(r"\D", "", p)))
common = [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                      "/dev/nvidia-modeset") if os.path.exists(p)]
lib = next(d for d in ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib") if os.path.isdir(d))
edits = {
    "deviceNodes": [{"path": p} for p in common],
    "mounts": [{"hostPath": "/usr/local/nvidia", "containerPath": "/usr/local/nvidia",
                "options": ["ro", "nosuid", "nodev", "bind"]}],
    "env": [f"LD_LIBRARY_PATH={lib}", "NVIDIA_VISIBLE_DEVICES=void"],
}
devices = [{"name": str(i), "containerEdits": {"deviceNodes": [{"path": p}]}}
           for i, p in enumerate(nodes)]
devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": p} for p in nodes]}})
spec = {"cdiVersion": os.environ["CDI_VERSION"], "kind": "nvidia.com/gpu", "devices": devices,
        "containerEdits": edits}
path = os.path.join(os.environ["CDI_DIR"], "nvidia.json")
with open(path, "w") as f:
    json.dump(spec, f, indent=1)
print(f"CDI spec {path} ({spec['cdiVersion']}):", ", ".join(d["name"] for d in devices), "| lib", lib)
PY
}

host_stack_tar() {  # / as the base image's one layer (the same bytes for Docker and Podman)
  # The same files must give the same layer on another machine: names sorted, owners numeric,
  # one mtime, and nothing a running machine writes (Python's byte code caches, the host's
  # identity files, ssh host keys)
  tar --sort=name --numeric-owner --mtime=@0 -C / -cf - \
      --exclude=usr/local/nvidia --exclude=__pycache__ --exclude='*.pyc' \
      --exclude=etc/hostname --exclude=etc/hosts --exclude=etc/resolv.conf \
      --exclude=etc/machine-id --exclude=etc/mtab --exclude=etc/ssh \
      bin sbin lib lib64 usr opt/torch etc \
      2>"$OUT/import-tar.log"
}

STACK_ENV_PATH=/opt/torch/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

podman_answers() {
  python3 -c "import docker; docker.DockerClient(base_url='unix:///run/podman/podman.sock').ping()" 2>/dev/null
}

start_podman() {
  local dir=$STATE/podman sock=/run/podman/podman.sock
  if podman_answers; then
    log "podman: already answering"; return 0
  fi
  mkdir -p "$dir" "$STATE/bin" /etc/containers /run/podman /tmp/podman-root
  [ -x "$dir/bin/podman" ] || tar -C "$dir" -xJf .podman/podman-bin.tar.xz
  # podman and conmon find the carried libraries; runc (trixie's, as Docker's) uses the machine's
  # podman import first copies its input to TMPDIR: memory (/dev/shm) rather than disk
  printf '#!/bin/sh\nexport TMPDIR=/dev/shm\nLD_LIBRARY_PATH=%s/lib exec %s/bin/podman "$@"\n' "$dir" "$dir" >"$STATE/bin/podman"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/bin/conmon "$@"\n' "$dir" "$dir" >"$dir/conmon"
  printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec %s/bin/runc "$@"\n' "$dir" >"$dir/runc"
  chmod +x "$STATE/bin/podman" "$dir/conmon" "$dir/runc"
  # the libpod API's --init looks for catatonit where Debian puts it, whatever init_path says
  mkdir -p /usr/libexec/podman && cp "$dir/bin/catatonit" /usr/libexec/podman/catatonit
  echo '{"default": [{"type": "insecureAcceptAnything"}]}' >/etc/containers/policy.json
  cat >/etc/containers/storage.conf <<CONF
[storage]
driver = "overlay"
graphroot = "/tmp/podman-root"
runroot = "/run/containers/storage"
CONF
  cat >/etc/containers/containers.conf <<CONF
[engine]
image_copy_tmp_dir = "/dev/shm"
conmon_path = ["$dir/conmon"]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
[engine.runtimes]
runc = ["$dir/runc"]
[containers]
init_path = "$dir/bin/catatonit"
CONF
  log "limits: open files $(ulimit -Sn)/$(ulimit -Hn), memlock $(ulimit -Hl), processes $(ulimit -Hu), fs.nr_open $(cat /proc/sys/fs/nr_open), $(grep CapEff /proc/self/status | tr -s '\t' ' ')"
  setsid podman system service --time=0 "unix://$sock" >"$OUT/podman-service.log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    podman_answers && break
    sleep 0.5
  done
  podman version 2>&1 | tee -a "$OUT/device.log"
  podman info --format '{{.Store.GraphDriverName}} {{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}} cgroups {{.Host.CgroupsVersion}}' 2>&1 \
      | tr '\n' ' ' | tee -a "$OUT/device.log"; echo | tee -a "$OUT/device.log"
}

import_base_podman() {
  if podman image exists "$BASE"; then log "podman: base image $BASE already there"; return 0; fi
  log "podman: importing / (usr, opt/torch, etc; not the driver folder) as $BASE"
  local t0=$SECONDS
  host_stack_tar | podman import --change "ENV PATH=$STACK_ENV_PATH" --change "ENV LANG=C.UTF-8" \
      - "$BASE" 2>&1 | tail -1 | tee -a "$OUT/device.log"
  log "podman: import took $((SECONDS - t0)) s"
  podman image inspect "$BASE" --format '{{.Id}} {{.Size}} bytes, layers {{.RootFS.Layers}}' 2>&1 \
      | tee -a "$OUT/device.log"
}

stage_podman() {
  local out t0=$SECONDS
  out=$(fresh "/tmp/bundles/podman-$(basename "$RECIPE" .yaml)")
  log "podman: kit reproduce $RECIPE --runtime podman --env ngc-pytorch --base-image $BASE"
  kit reproduce "$RECIPE" --device cuda --runtime podman --env ngc-pytorch --base-image "$BASE" \
      --out "$out" ${KIT_ARGS:-} 2>&1 | tee -a "$OUT/podman.log"
  log "podman: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s from the command to the sealed bundle"
  [ "${PACK:-1}" = 1 ] && pack "$out"
}

import_base() {
  if [ "${REIMPORT:-0}" = 1 ]; then
    python3 -c "import docker; c = docker.from_env(); [c.images.remove(t, force=True) for t in ('$BASE',) if c.images.list(name=t)]"
  fi
  if python3 -c "import docker; docker.from_env().images.get('$BASE')" 2>/dev/null; then
    log "base image $BASE: already there"; return 0
  fi
  log "importing / (usr, opt/torch, etc; not the driver folder) as $BASE"
  local t0=$SECONDS
  host_stack_tar | python3 -c "
import sys, docker
api = docker.from_env(timeout=1800).api
print(api.import_image(src=sys.stdin.buffer, repository='kit-host-stack', tag='local', changes=[
    'ENV PATH=$STACK_ENV_PATH', 'ENV LANG=C.UTF-8']).strip().splitlines()[-1])"
  log "import took $((SECONDS - t0)) s"
  python3 -c "import docker; i = docker.from_env().images.get('$BASE'); print('$BASE', i.id, round(i.attrs['Size'] / 1e9, 1), 'GB, layers', i.attrs['RootFS']['Layers'])" | tee -a "$OUT/device.log"
}

only_benchmark() {  # RECIPE cut to the benchmarks named, in that order (by name or kind: hbm-copy,decode-dp)
  local cut="$STATE/$(basename "$RECIPE" .yaml)-${1//,/+}${VARIANTS:+-${VARIANTS//,/+}}.yaml"
  python3 scripts/device/cut_recipe.py "$RECIPE" "$1" "$cut" || exit 2
  RECIPE=$cut; log "recipe: $RECIPE (only $1)"
}

fresh() {  # a bundle folder not used yet: NAME, then NAME-2, NAME-3 (stages may repeat: rounds)
  local out=$1 n=2
  while [ -e "$out" ]; do out=$1-$n; n=$((n + 1)); done
  echo "$out"
}

pack() {  # pack a bundle folder into $OUT
  tar -czf "$OUT/$(basename "$1").tar.gz" -C "$(dirname "$1")" "$(basename "$1")"
}

stage_docker() {
  local out t0=$SECONDS
  out=$(fresh "/tmp/bundles/docker-$(basename "$RECIPE" .yaml)")
  log "docker: kit reproduce $RECIPE --runtime docker --env ngc-pytorch --base-image $BASE"
  kit reproduce "$RECIPE" --device cuda --runtime docker --env ngc-pytorch --base-image "$BASE" \
      --out "$out" ${KIT_ARGS:-} 2>&1 | tee -a "$OUT/docker.log"
  log "docker: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s from the command to the sealed bundle"
  [ "${PACK:-1}" = 1 ] && pack "$out"
}

stage_build() {  # the environment image alone, so a later call's runs start at once
  local t0=$SECONDS
  log "build: kit build $RECIPE --env ngc-pytorch --base-image $BASE"
  kit build "$RECIPE" --env ngc-pytorch --base-image "$BASE" 2>&1 | tee -a "$OUT/build.log"
  log "build: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s"
}

stage_host() {
  local out t0=$SECONDS
  out=$(fresh "/tmp/bundles/host-$(basename "$RECIPE" .yaml)")
  log "host: kit reproduce $RECIPE --runtime host"
  kit reproduce "$RECIPE" --device cuda --runtime host --out "$out" ${KIT_ARGS:-} 2>&1 | tee -a "$OUT/host.log"
  log "host: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s"
  [ "${PACK:-1}" = 1 ] && pack "$out"
}

stage_rerun() {
  local archive=$1 t0=$SECONDS out
  mkdir -p /tmp/received && tar -xzf "$archive" -C /tmp/received
  local bundle=/tmp/received/$(tar -tzf "$archive" | head -1 | cut -d/ -f1)
  out=$(fresh "/tmp/bundles/rerun-$(basename "$bundle")")
  log "rerun: kit reproduce $bundle --base-image $BASE (recorded runtime: docker)"
  kit reproduce "$bundle" --base-image "$BASE" --out "$out" ${RERUN_ARGS:-} 2>&1 | tee -a "$OUT/rerun.log"
  log "rerun: exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s"
  [ "${PACK:-1}" = 1 ] && pack "$out"
}

stage_faults() {
  log "faults: GPU 7 that the CDI spec lacks; a container killed for memory; an image without torch"
  python3 scripts/device/gpu_faults.py 2>&1 | tee "$OUT/faults.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,power.draw,temperature.gpu \
    --format=csv | tee -a "$OUT/device.log"
while [ $# -gt 0 ]; do
  if [ -n "${BUDGET_S:-}" ] && [ "$SECONDS" -gt "$BUDGET_S" ]; then
    log "stopping before '$*': $SECONDS s used, BUDGET_S=$BUDGET_S"; break
  fi
  case $1 in
    recipe=*) RECIPE=${1#recipe=}; log "recipe: $RECIPE" ;;
    only=*) only_benchmark "${1#only=}" ;;
    daemon) start_daemon; write_cdi_spec | tee -a "$OUT/device.log"; import_base ;;
    build) stage_build ;;
    docker) stage_docker ;;
    podmand) start_podman; write_cdi_spec /var/run/cdi 0.5.0 | tee -a "$OUT/device.log"; import_base_podman ;;
    podman) stage_podman ;;
    host) stage_host ;;
    rerun) shift; stage_rerun "$1" ;;
    faults) stage_faults ;;
    *) echo "unknown stage $1" >&2; exit 2 ;;
  esac
  shift
done
log "done"
