#!/usr/bin/env bash
# Real PostgreSQL and MariaDB servers, from Debian's packages, for kplug's
# tests, CI and `make demo`: plain processes on 127.0.0.1 (no systemd, no
# Docker), every bit of state under one directory.
#
#   databases.sh install   apt-get install postgresql + mariadb-server when missing
#   databases.sh start     initialise (first time) and start both; wait until they answer
#   databases.sh env       print `export KPLUG_POSTGRES_DSN=... KPLUG_MARIADB_DSN=...`
#   databases.sh status    say what runs
#   databases.sh stop      stop both
#
# Typical use:   databases.sh install && databases.sh start && eval "$(databases.sh env)"
#
# Environment:
#   KPLUG_DB_DIR          state directory (default: <repo>/target/databases)
#   KPLUG_POSTGRES_PORT   PostgreSQL TCP port on 127.0.0.1 (default 55432)
#   KPLUG_MARIADB_PORT    MariaDB TCP port on 127.0.0.1 (default 53306)
#
# Both servers get a database `kplug` and a user `kplug` (password `kplug`)
# owning it. The user may also create databases named kplug_* (PostgreSQL:
# CREATEDB; MariaDB: rights on `kplug\_%`), so test suites can isolate
# themselves. These are throw-away development servers: durability is traded
# for speed (fsync off), and nothing listens beyond loopback.
#
# PostgreSQL refuses to run as root; as root the script runs it as the
# `postgres` user and MariaDB as `mysql` (both created by the packages), so
# those users must be able to reach the state directory.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DB_DIR=${KPLUG_DB_DIR:-$REPO/target/databases}
PG_PORT=${KPLUG_POSTGRES_PORT:-55432}
MY_PORT=${KPLUG_MARIADB_PORT:-53306}
WAIT_SECONDS=${KPLUG_DB_WAIT_SECONDS:-60}

PG_DATA=$DB_DIR/postgresql/data
PG_LOG=$DB_DIR/postgresql/server.log
MY_DATA=$DB_DIR/mariadb/data
MY_LOG=$DB_DIR/mariadb/server.log
MY_PID=$DB_DIR/mariadb/mariadbd.pid
# Unix sockets live here; their paths must stay under 108 bytes (checked in start).
RUN_DIR=$DB_DIR/run
MY_SOCK=$RUN_DIR/mysqld.sock

say() { echo "databases.sh: $*" >&2; }
die() {
	echo "databases.sh: error: $*" >&2
	exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# The PostgreSQL binaries are not on PATH on Debian; take the newest installed major.
pg_bin() {
	local dir
	dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
	[ -n "$dir" ] && [ -x "$dir/initdb" ] || return 1
	echo "$dir"
}

have_postgres() { pg_bin >/dev/null; }
have_mariadb() { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; }
mariadbd_path() { command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd; }

# Run a command as the server's OS user: postgres/mysql when we are root,
# ourselves otherwise.
as_user() {
	local user=$1
	shift
	if is_root; then
		runuser -u "$user" -- "$@"
	else
		"$@"
	fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

log_tail() {
	echo "--- last lines of $1 ---" >&2
	tail -n 30 "$1" >&2 2>/dev/null || echo "(no log)" >&2
	echo "---" >&2
}

# ---------------------------------------------------------------- install ---

cmd_install() {
	local missing=()
	have_postgres || missing+=(postgresql)
	have_mariadb || missing+=(mariadb-server)
	if [ ${#missing[@]} -eq 0 ]; then
		say "PostgreSQL ($(pg_bin)) and MariaDB ($(mariadbd_path)) are installed"
		return
	fi
	is_root || die "${missing[*]} not installed; run as root, or: sudo apt-get install -y --no-install-recommends ${missing[*]}"
	say "installing ${missing[*]} from Debian's packages..."
	export DEBIAN_FRONTEND=noninteractive
	# Without systemd, the packages' post-install scripts would start the
	# servers on their default ports through init scripts. A policy-rc.d
	# that answers 101 ("action forbidden") stops that; we start our own.
	local policy=/usr/sbin/policy-rc.d added_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod +x "$policy"
		added_policy=1
	fi
	# apt-get update only when the package lists are empty or stale (the
	# install fails on a package it cannot find or fetch).
	local status=0
	if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
		apt-get update -q || status=$?
	fi
	if [ $status -eq 0 ]; then
		apt-get install -y -q --no-install-recommends "${missing[@]}" || {
			say "install failed; refreshing the package lists and trying again"
			apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"
		} || status=$?
	fi
	[ -n "$added_policy" ] && rm -f "$policy"
	[ $status -eq 0 ] || die "apt-get could not install ${missing[*]} (its output is above)"
	if ! { have_postgres && have_mariadb; }; then
		die "installed ${missing[*]} but cannot find initdb or mariadbd"
	fi
	say "installed ${missing[*]}"
}

# -------------------------------------------------------------- postgres ---

pg_running() {
	local bin
	bin=$(pg_bin) || return 1
	[ -f "$PG_DATA/PG_VERSION" ] && as_user postgres "$bin/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1
}

pg_psql() {
	# Superuser over the Unix socket (trust for local connections, see initdb below).
	"$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$RUN_DIR" -p "$PG_PORT" -U postgres -d postgres
}

pg_start() {
	local bin
	bin=$(pg_bin) || die "PostgreSQL is not installed; run: $0 install"
	if pg_running; then
		say "PostgreSQL already running on 127.0.0.1:$PG_PORT ($PG_DATA)"
		return
	fi
	if port_in_use "$PG_PORT"; then
		die "port $PG_PORT on 127.0.0.1 is already in use (another databases.sh with a different KPLUG_DB_DIR?); stop it, or choose another port with KPLUG_POSTGRES_PORT"
	fi
	if [ ! -f "$PG_DATA/PG_VERSION" ]; then
		say "initialising PostgreSQL in $PG_DATA"
		rm -rf "$PG_DATA"
		mkdir -p "$PG_DATA"
		is_root && chown postgres: "$PG_DATA" "$DB_DIR/postgresql"
		# trust on the Unix socket (inside the state dir, reachable only by
		# root and the server's user) for this script's set-up; passwords on TCP.
		as_user postgres "$bin/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
			--auth-local=trust --auth-host=scram-sha-256 >"$DB_DIR/postgresql/initdb.log" 2>&1 ||
			{
				log_tail "$DB_DIR/postgresql/initdb.log"
				die "initdb failed in $PG_DATA"
			}
		cat >>"$PG_DATA/postgresql.conf" <<-EOF

			# --- kplug dev/test server (examples/database-table/dev/databases.sh) ---
			listen_addresses = '127.0.0.1'
			unix_socket_directories = '$RUN_DIR'
			fsync = off
			synchronous_commit = off
			full_page_writes = off
			shared_buffers = 64MB
			max_connections = 100
		EOF
	fi
	say "starting PostgreSQL on 127.0.0.1:$PG_PORT"
	touch "$PG_LOG" && { ! is_root || chown postgres: "$PG_LOG"; }
	# The port is passed at start so KPLUG_POSTGRES_PORT can change between runs.
	if ! as_user postgres "$bin/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t "$WAIT_SECONDS" \
		-o "-p $PG_PORT -k $RUN_DIR" >/dev/null; then
		log_tail "$PG_LOG"
		die "PostgreSQL did not start within ${WAIT_SECONDS}s (log: $PG_LOG)"
	fi
	pg_psql <<-'EOF'
		DO $$ BEGIN
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kplug') THEN
		    CREATE ROLE kplug LOGIN CREATEDB PASSWORD 'kplug';
		  END IF;
		END $$;
		SELECT 'CREATE DATABASE kplug OWNER kplug' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'kplug')
		\gexec
	EOF
	# Prove the DSN we hand out works, over TCP with the password.
	PGPASSWORD=kplug "$bin/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U kplug -d kplug -c 'SELECT 1' >/dev/null ||
		die "PostgreSQL started but user kplug cannot connect to 127.0.0.1:$PG_PORT/kplug"
	say "PostgreSQL ready: postgresql://kplug:kplug@127.0.0.1:$PG_PORT/kplug"
}

pg_stop() {
	if pg_running; then
		say "stopping PostgreSQL"
		as_user postgres "$(pg_bin)/pg_ctl" stop -D "$PG_DATA" -m fast -w -t "$WAIT_SECONDS" >/dev/null
	else
		say "PostgreSQL not running"
	fi
}

# --------------------------------------------------------------- mariadb ---

my_pid() { [ -s "$MY_PID" ] && cat "$MY_PID"; }
my_alive() {
	local pid
	pid=$(my_pid) && kill -0 "$pid" 2>/dev/null
}

# The administrative account: root over the socket when we are root
# (unix_socket authentication), else the account mariadb-install-db made for us.
my_admin_user() { if is_root; then echo root; else id -un; fi; }

my_client() {
	mariadb --no-defaults --protocol=socket --socket="$MY_SOCK" -u "$(my_admin_user)"
}

my_ping() {
	mariadb-admin --no-defaults --protocol=socket --socket="$MY_SOCK" -u "$(my_admin_user)" \
		--connect-timeout=2 ping >/dev/null 2>&1
}

my_start() {
	have_mariadb || die "MariaDB is not installed; run: $0 install"
	if my_alive && my_ping; then
		say "MariaDB already running on 127.0.0.1:$MY_PORT ($MY_DATA)"
		return
	fi
	if port_in_use "$MY_PORT"; then
		die "port $MY_PORT on 127.0.0.1 is already in use (another databases.sh with a different KPLUG_DB_DIR?); stop it, or choose another port with KPLUG_MARIADB_PORT"
	fi
	local user_args=()
	is_root && user_args=(--user=mysql)
	if [ ! -d "$MY_DATA/mysql" ]; then
		say "initialising MariaDB in $MY_DATA"
		rm -rf "$MY_DATA"
		mkdir -p "$MY_DATA"
		is_root && chown mysql: "$MY_DATA"
		mariadb-install-db --no-defaults --datadir="$MY_DATA" "${user_args[@]}" \
			--auth-root-authentication-method=socket --skip-test-db \
			>"$DB_DIR/mariadb/install-db.log" 2>&1 || {
			log_tail "$DB_DIR/mariadb/install-db.log"
			die "mariadb-install-db failed in $MY_DATA"
		}
	fi
	say "starting MariaDB on 127.0.0.1:$MY_PORT"
	rm -f "$MY_PID" "$MY_SOCK"
	touch "$MY_LOG"
	is_root && chown mysql: "$MY_LOG" "$DB_DIR/mariadb"
	# setsid + nohup: the server outlives this script and the terminal.
	setsid nohup "$(mariadbd_path)" --no-defaults --datadir="$MY_DATA" "${user_args[@]}" \
		--bind-address=127.0.0.1 --port="$MY_PORT" --socket="$MY_SOCK" --pid-file="$MY_PID" \
		--log-error="$MY_LOG" --skip-name-resolve --skip-log-bin \
		--innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=64M \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
		</dev/null >>"$MY_LOG" 2>&1 &
	local pid=$! waited=0
	until my_ping; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log_tail "$MY_LOG"
			die "MariaDB exited during start-up (log: $MY_LOG)"
		fi
		if [ $waited -ge $((WAIT_SECONDS * 5)) ]; then
			log_tail "$MY_LOG"
			die "MariaDB did not answer within ${WAIT_SECONDS}s (log: $MY_LOG)"
		fi
		sleep 0.2
		waited=$((waited + 1))
	done
	my_client <<-'EOF'
		CREATE DATABASE IF NOT EXISTS kplug;
		CREATE USER IF NOT EXISTS 'kplug'@'%' IDENTIFIED BY 'kplug';
		CREATE USER IF NOT EXISTS 'kplug'@'localhost' IDENTIFIED BY 'kplug';
		GRANT ALL PRIVILEGES ON `kplug`.* TO 'kplug'@'%', 'kplug'@'localhost';
		GRANT ALL PRIVILEGES ON `kplug\_%`.* TO 'kplug'@'%', 'kplug'@'localhost';
	EOF
	mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$MY_PORT" -u kplug -pkplug kplug -e 'SELECT 1' >/dev/null ||
		die "MariaDB started but user kplug cannot connect to 127.0.0.1:$MY_PORT/kplug"
	say "MariaDB ready: mysql://kplug:kplug@127.0.0.1:$MY_PORT/kplug"
}

my_stop() {
	if my_alive; then
		local pid waited=0
		pid=$(my_pid)
		say "stopping MariaDB"
		kill -TERM "$pid"
		while kill -0 "$pid" 2>/dev/null; do
			if [ $waited -ge $((WAIT_SECONDS * 5)) ]; then
				die "MariaDB (pid $pid) did not stop within ${WAIT_SECONDS}s (log: $MY_LOG)"
			fi
			sleep 0.2
			waited=$((waited + 1))
		done
	else
		say "MariaDB not running"
	fi
}

# ---------------------------------------------------------------- commands ---

prepare_dirs() {
	mkdir -p "$DB_DIR/postgresql" "$DB_DIR/mariadb" "$RUN_DIR"
	DB_DIR=$(cd "$DB_DIR" && pwd)
	[ ${#RUN_DIR} -lt 90 ] || die "state directory $DB_DIR is too deep for Unix sockets (path limit 108 bytes); set KPLUG_DB_DIR to a shorter path"
	if is_root; then
		# The servers run as postgres and mysql: they must reach the state dir.
		local user
		for user in postgres mysql; do
			id "$user" >/dev/null 2>&1 || continue
			runuser -u "$user" -- test -x "$DB_DIR" ||
				die "user $user cannot reach $DB_DIR (a parent directory is not searchable); set KPLUG_DB_DIR to a path under /tmp or /var/tmp"
		done
		# Both servers put their sockets and lock files here.
		chmod 1777 "$RUN_DIR"
	fi
}

cmd_start() {
	local started=$SECONDS
	if ! { have_postgres && have_mariadb; }; then
		die "the database servers are not installed; run: $0 install"
	fi
	prepare_dirs
	pg_start
	my_start
	say "both servers ready in $((SECONDS - started))s; use them with: eval \"\$($0 env)\""
}

cmd_stop() {
	# Stopping does not need a state dir to exist: nothing to stop then.
	if [ ! -d "$DB_DIR" ]; then
		say "nothing to stop ($DB_DIR does not exist)"
		return
	fi
	pg_stop
	my_stop
}

cmd_status() {
	local rc=0
	if pg_running; then say "PostgreSQL running on 127.0.0.1:$PG_PORT"; else
		say "PostgreSQL not running"
		rc=1
	fi
	if my_alive && my_ping; then say "MariaDB running on 127.0.0.1:$MY_PORT"; else
		say "MariaDB not running"
		rc=1
	fi
	return $rc
}

cmd_env() {
	echo "export KPLUG_POSTGRES_DSN=postgresql://kplug:kplug@127.0.0.1:$PG_PORT/kplug"
	echo "export KPLUG_MARIADB_DSN=mysql://kplug:kplug@127.0.0.1:$MY_PORT/kplug"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	echo "usage: $0 install|start|env|status|stop" >&2
	exit 2
	;;
esac
