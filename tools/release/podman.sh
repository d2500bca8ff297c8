# Sourced by the scripts that run podman (image.sh, release-check.sh). `podman_configure IMAGE`
# exports CONTAINERS_CONF, a containers.conf made for this machine, found out by trying, not
# assumed, so that plain `podman` and `podman-compose` (the README's lines, as written) work:
# - crun rejects hybrid/v1 cgroups: runc then, when the cgroups are not v2 (podman 4.3 as
#   root worked so);
# - container ulimits must stay within what the host allows: nofile at most the hard limit
#   (20000 here), and nproc lower than podman's default for root (here even the host's hard
#   limit of 96367 was refused, 32768 worked): the highest of a few values that starts IMAGE.
podman_configure() { # image
  local image=$1 conf nofile nproc n
  conf=$(mktemp --suffix=.containers.conf)
  nofile=$(ulimit -Hn)
  [ "$nofile" = unlimited ] && nofile=1048576
  printf '[engine]\n' >"$conf"
  if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] && command -v runc >/dev/null; then
    printf 'runtime = "runc"\n' >>"$conf"
  fi
  export CONTAINERS_CONF=$conf
  nproc=""
  for n in $(ulimit -Hu) 65536 32768 16384 8192 4096; do
    [ "$n" = unlimited ] && continue
    if podman run --rm --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$n:$n" --entrypoint /bin/true "$image" 2>/dev/null; then
      nproc=$n; break
    fi
  done
  [ -n "$nproc" ] || { echo "podman: no nproc limit lets a container start here" >&2; return 1; }
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$nofile" "$nofile" "$nproc" "$nproc" >>"$conf"
  echo "podman: $(grep -h -E 'runtime|ulimits' "$conf" | tr '\n' ' ')(CONTAINERS_CONF=$conf)"
}
