#!/bin/sh
# Initialises the cluster once (password authentication from the network), then runs postgres.
set -eu
: "${POSTGRES_USER:=dhtcrawler}" "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  # UTF8 whatever the locale: the slim image has none, and initdb would pick SQL_ASCII.
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  createdb -U "$POSTGRES_USER" "$POSTGRES_DB" 2>/dev/null || true
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp
