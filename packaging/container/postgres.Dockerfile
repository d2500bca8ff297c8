# PostgreSQL for compose.yaml's fleet profile, made the same local way as the dhtcrawler image
# (FROM the debootstrapped debian:bookworm-slim): Debian's postgresql-15, initialised on first
# start from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data && chown postgres:postgres /var/lib/postgresql/data
COPY --chmod=755 postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
VOLUME /var/lib/postgresql/data
EXPOSE 5432/tcp
HEALTHCHECK --interval=10s --timeout=5s --retries=10 CMD ["pg_isready", "-h", "127.0.0.1"]
ENTRYPOINT ["postgres-entrypoint"]
