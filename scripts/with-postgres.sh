#!/usr/bin/env bash
# with-postgres.sh CMD…: runs CMD with a PostgreSQL server of its own, and
# STUDIO_TEST_POSTGRES set to its URL: a cluster initdb'd in a temporary
# directory, on a free loopback port, stopped and removed when CMD ends
# (however it ends). The store's tests run against it as well as SQLite
# (docs/postgres.md); `make test` installs Debian's postgresql first when
# it is missing (the postgres target).
#
# The server is tuned for tests: no fsync (a crash of the machine loses the
# scratch cluster, which nothing keeps). STUDIO_PG_FSYNC=on keeps fsync and
# commits as SQLite's synchronous=NORMAL does (no wait for the disk), for
# benchmarks that compare the two (scripts/bench.sh).
#
# PostgreSQL refuses to run as root: as root, the server runs as the
# postgres user Debian's package makes (or one made here when there is none).
set -euo pipefail

bindir=""
for d in "$(pg_config --bindir 2>/dev/null || true)" /usr/lib/postgresql/*/bin; do
	if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then bindir=$d; fi
done
if [ -z "$bindir" ]; then
	echo "with-postgres: no PostgreSQL server found (initdb, pg_ctl): install Debian's postgresql (make postgres)" >&2
	exit 1
fi

as=()
if [ "$(id -u)" = 0 ]; then
	if ! id postgres >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /usr/sbin/nologin postgres
	fi
	as=(runuser -u postgres --)
fi

fsync=${STUDIO_PG_FSYNC:-off}
case $fsync in on | off) ;; *) echo "with-postgres: STUDIO_PG_FSYNC is on or off, not $fsync" >&2; exit 2 ;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/studio-pg.XXXXXX")
chmod 755 "$tmp"
[ ${#as[@]} -eq 0 ] || chown postgres "$tmp"

stop() {
	"${as[@]}" "$bindir/pg_ctl" -D "$tmp/data" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM

"${as[@]}" "$bindir/initdb" -D "$tmp/data" -U studio --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; exit 1; }

# A free port: one nothing answers on; pg_ctl fails if another takes it
# first, and then the next is tried.
started=""
for _ in $(seq 1 20); do
	port=$((20000 + RANDOM % 40000))
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
	if "${as[@]}" "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t 60 \
		-o "-p $port -k $tmp -c listen_addresses=127.0.0.1 -c fsync=$fsync -c synchronous_commit=off -c full_page_writes=$fsync -c max_connections=300" \
		start >/dev/null 2>&1; then
		started=$port
		break
	fi
done
if [ -z "$started" ]; then
	echo "with-postgres: PostgreSQL did not start:" >&2
	cat "$tmp/server.log" >&2 || true
	exit 1
fi

export STUDIO_TEST_POSTGRES="postgres://studio@127.0.0.1:$started/postgres?sslmode=disable"
echo "with-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$started (fsync $fsync) in \$STUDIO_TEST_POSTGRES" >&2
"$@"
