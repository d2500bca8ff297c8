# Sourced by the scripts that run podman: PODMAN is the command with the options this machine
# needs, found out, not assumed.
# - crun rejects hybrid/v1 cgroups ("cgroup v1 not supported" or similar): runc then, when
#   the configured runtime is crun and the cgroups are not v2 (podman 4.3 as root worked so).
# - container ulimits may not exceed the host's hard limits (nofile was 20000 here), while
#   podman's default nofile is 1048576: containers get the host's hard limit instead.
PODMAN=(podman)
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] &&
   [ "$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null)" = crun ] && command -v runc >/dev/null; then
  PODMAN+=(--runtime runc)
fi
nofile_hard=$(ulimit -Hn)
if [ "$nofile_hard" != unlimited ] && [ "$nofile_hard" -lt 1048576 ]; then
  PODMAN_ULIMIT=(--ulimit "nofile=$nofile_hard:$nofile_hard")
else
  PODMAN_ULIMIT=()
fi
