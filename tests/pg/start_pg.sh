#!/usr/bin/env bash
# Starts the packaged PostgreSQL cluster (Debian's postgresql, installed by
# cmake/install-deps.sh) and makes sure the test role and database exist. Idempotent; never
# runs initdb (the package created the cluster). Prints the connection string on its last
# line: postgresql://dhtc_test:dhtc_test@127.0.0.1:PORT/dhtc_test
# Needs root (or the postgres user) on the machine; CI runs as root.
set -euo pipefail

version=${DHTC_PG_VERSION:-15}
cluster=${DHTC_PG_CLUSTER:-main}
role=dhtc_test
db=dhtc_test

as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; elif command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -c "$(printf '%q ' "$@")"; fi
}

if ! pg_lsclusters -h 2>/dev/null | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {found=1} END {exit !found}'; then
  echo "start_pg: no PostgreSQL $version/$cluster cluster (is the postgresql package installed?)" >&2
  exit 1
fi
status=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $4}')
if [ "$status" != online ]; then
  pg_ctlcluster "$version" "$cluster" start
fi
port=$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $3}')

# Wait (bounded) until the server accepts connections.
for _ in $(seq 1 50); do
  if as_postgres psql -p "$port" -Atqc 'SELECT 1' >/dev/null 2>&1; then break; fi
  sleep 0.2
done

as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -qc \
  "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE $role LOGIN PASSWORD '$role'; END IF; END \$\$;" >/dev/null
if ! as_postgres psql -p "$port" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
  as_postgres createdb -p "$port" -O "$role" "$db"
fi
echo "postgresql://$role:$role@127.0.0.1:$port/$db"
