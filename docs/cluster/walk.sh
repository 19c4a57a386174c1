#!/usr/bin/env bash
# The walk-through of docs/cluster.md, on one machine: PostgreSQL (Debian's
# binaries, a private cluster in a temporary directory unless DATABASE_URL
# names an empty database), one nats-server, three simrelay nodes, nginx or
# HAProxy in front; a virtual phone paired through the balancer; a send
# through every node; kill -9 of the node holding the phone; sends through
# the others; every send on the phone, none twice.
#
#   make build && docs/cluster/walk.sh nginx     # or: haproxy
#
# Ports: 18080 (balancer), 18081-18083 (nodes), 14222 (NATS), as in
# nginx.conf and haproxy.cfg. Everything stops when the script ends; the
# logs stay in the directory it prints.
set -euo pipefail

lb=${1:-nginx}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SIMRELAY_BIN:-$root/bin/simrelay}
nats=${NATS_SERVER:-$(command -v nats-server || echo "$HOME/go/bin/nats-server")}
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
work=$(mktemp -d /tmp/simrelay-walk.XXXXXX)
chmod 755 "$work"
pids=()

say() { printf '\n== %s\n' "$*"; }
die() { printf 'walk: %s (logs in %s)\n' "$*" "$work" >&2; exit 1; }
stop_all() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "logs: $work"
}
trap stop_all EXIT
# wait_for DESCRIPTION COMMAND...: retry for up to 30 s.
wait_for() {
	local what=$1; shift
	for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	die "no $what within 30 s"
}

[ -x "$bin" ] || die "no $bin: run make build (or set SIMRELAY_BIN)"
[ -x "$nats" ] || die "no nats-server: apt-get install nats-server, or go install github.com/nats-io/nats-server/v2@v2.15.2 (or set NATS_SERVER)"
case $lb in
nginx) command -v nginx >/dev/null || die "no nginx: apt-get install nginx" ;;
haproxy) command -v haproxy >/dev/null || die "no haproxy: apt-get install haproxy" ;;
*) die "usage: walk.sh nginx|haproxy" ;;
esac

say "PostgreSQL"
if [ -n "${DATABASE_URL:-}" ]; then
	db=$DATABASE_URL
else
	[ -x "$pgbin/initdb" ] || die "no PostgreSQL: apt-get install postgresql (or give DATABASE_URL)"
	# A private cluster on a Unix socket in $work/pg. PostgreSQL refuses to
	# run as root: then it runs as the Debian package's user postgres.
	as=()
	mkdir -p "$work/pg"
	if [ "$(id -u)" = 0 ]; then
		as=(runuser -u postgres --)
		chown postgres "$work/pg"
	fi
	"${as[@]}" "$pgbin/initdb" -D "$work/pg/data" -U simrelay -A trust >"$work/initdb.log" 2>&1 || die "initdb failed"
	"${as[@]}" "$pgbin/postgres" -D "$work/pg/data" -k "$work/pg" -p 5432 -c listen_addresses= >"$work/postgres.log" 2>&1 &
	pids+=($!)
	wait_for "PostgreSQL" "$pgbin/pg_isready" -h "$work/pg" -p 5432
	"$pgbin/createdb" -h "$work/pg" -p 5432 -U simrelay simrelay
	db="postgres://simrelay@/simrelay?host=$work/pg&port=5432&sslmode=disable"
fi
export SIMRELAY_DATABASE_URL=$db
psql() { "$pgbin/psql" "$db" -Atq "$@"; }

say "nats-server on 127.0.0.1:14222"
"$nats" -a 127.0.0.1 -p 14222 >"$work/nats.log" 2>&1 &
pids+=($!)

say "a company (the admin command works on the database while nodes run too)"
key=$(SIMRELAY_PASSWORD='Walk-pass-123' "$bin" admin create-company --company Walk --email walk@example.com |
	sed -n 's/.*"apiKey":"\([^"]*\)".*/\1/p')
[ -n "$key" ] || die "no API key from admin create-company"

say "three nodes, each on its own port, behind one public URL"
# What every node needs: the same database, the same bus, the same public
# URL (the balancer's) and the same secrets (--admin-token here; Stripe's
# and SMTP's too where used); its own --node-name and --data-dir.
export SIMRELAY_ADMIN_TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
declare -A node_pid
for i in 1 2 3; do
	"$bin" serve --listen "127.0.0.1:1808$i" --data-dir "$work/node$i" --node-name "node$i" \
		--nats-url nats://127.0.0.1:14222 --public-url http://127.0.0.1:18080 \
		--trusted-proxies 127.0.0.1 >"$work/node$i.log" 2>&1 &
	node_pid[$i]=$!
	pids+=($!)
done
for i in 1 2 3; do wait_for "node$i ready" curl -fsS "http://127.0.0.1:1808$i/readyz"; done

say "$lb on 127.0.0.1:18080"
if [ "$lb" = nginx ]; then
	mkdir -p "$work/nginx" && chmod 777 "$work/nginx" # its workers run as nobody when started as root
	nginx -p "$work/nginx/" -c "$root/docs/cluster/nginx.conf" >"$work/nginx.log" 2>&1 &
else
	haproxy -db -f "$root/docs/cluster/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
fi
pids+=($!)
wait_for "$lb" curl -fsS http://127.0.0.1:18080/readyz

say "a virtual phone, paired and linked through the balancer"
"$bin" phone --api-key "$key" --server http://127.0.0.1:18080 --token-file "$work/phone.json" >"$work/phone.log" 2>&1 &
pids+=($!)
linked() { [ "$(psql -c "SELECT count(*) FROM device_links WHERE ended_at IS NULL")" = 1 ]; }
wait_for "phone link" linked
holder=$(psql -c "SELECT node FROM device_links WHERE ended_at IS NULL")
echo "the phone's link is on $holder"

send() { # send NODE TEXT
	curl -fsS -X POST "http://127.0.0.1:1808$1/chat/send" -H "Authorization: Bearer $key" \
		-H 'Content-Type: application/json' \
		-d "{\"device_fingerprint\":\"virtual-phone\",\"phone\":\"+15551234567\",\"message\":\"$2\"}" >/dev/null
}
on_phone() { grep -c -- "\"$1\"" "$work/phone.log"; }
want=()
say "a send through every node"
for i in 1 2 3; do send "$i" "walk via node$i"; want+=("walk via node$i"); done
for text in "${want[@]}"; do wait_for "'$text' on the phone" grep -q -- "\"$text\"" "$work/phone.log"; done
echo "all three on the phone"

say "kill -9 of $holder, then sends through the other nodes"
dead=${holder#node}
kill -9 "${node_pid[$dead]}"
wait "${node_pid[$dead]}" 2>/dev/null || true # reaped quietly
for i in 1 2 3; do
	[ "$i" = "$dead" ] && continue
	for n in 1 2; do send "$i" "after the kill $n via node$i"; want+=("after the kill $n via node$i"); done
done
for text in "${want[@]}"; do wait_for "'$text' on the phone" grep -q -- "\"$text\"" "$work/phone.log"; done
now=$(psql -c "SELECT node FROM device_links WHERE ended_at IS NULL")
echo "the phone linked again through the balancer, now on $now"

say "nothing lost, nothing twice"
for text in "${want[@]}"; do
	n=$(on_phone "$text")
	echo "$n x $text"
done
echo "${#want[@]} sends answered 2xx, each on the phone (the phone dedupes a resent job by its id)"
