# common.sh: what the measuring scripts share. Source it right after `set -euo pipefail`:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#
# It sets ROOT (the repository) and defines:
#   die MSG...      MSG on standard error after the script's name; exit status 2
#   need_smtlab     SMTLAB: as given, else the release build of $CARGO_TARGET_DIR or
#                   target/ (built when missing)
#   need_python3    python3, which the scripts read smtlab's JSON with
#   own_netns ARGS  run as root: the script again in a network namespace of its own
#                   with only loopback up (pass "$@"), so its traffic reaches nothing
#                   else; elsewhere it returns and the script goes on as it is
#   start_nginx DIR PORT CPU
#                   nginx ($NGINX, else the one on PATH or /usr/sbin) serving a 4 KiB
#                   file, DIR/html/f4k, on 127.0.0.1:PORT with one worker pinned to
#                   CPU (as nobody when root); its pid in NGINX_PID, its files in DIR
#   free_port       a TCP port free on 127.0.0.1 now
#   median, quartiles
#                   of the numbers on standard input, one a line (quartiles: the
#                   first and the third, on one line)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPT_NAME=$(basename "$0" .sh)

die() {
    echo "$SCRIPT_NAME: $*" >&2
    exit 2
}

need_smtlab() {
    SMTLAB=${SMTLAB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/smtlab}
    if [[ ! -x "$SMTLAB" ]]; then
        (cd "$ROOT" && cargo build --release -p smtlab >&2) || die "cargo build --release -p smtlab failed"
    fi
}

need_python3() {
    command -v python3 >/dev/null || die "python3 is needed to read smtlab's JSON"
}

own_netns() {
    if [ "$(id -u)" = 0 ] && [ -z "${SMTLAB_NETNS:-}" ] && command -v unshare >/dev/null; then
        exec unshare --net env SMTLAB_NETNS=1 bash "$0" "$@"
    fi
    if [ -n "${SMTLAB_NETNS:-}" ]; then
        ip link set lo up
    fi
}

start_nginx() {
    local dir=$1 port=$2 cpu=$3 user="" mask
    NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
    [ -x "$NGINX" ] || die "nginx is not installed: apt-get install nginx"
    mkdir -p "$dir/html"
    head -c 4096 /dev/urandom >"$dir/html/f4k"
    chmod 644 "$dir/html/f4k"
    [ "$(id -u)" = 0 ] && user="user nobody nogroup;"
    mask=$(python3 -c "print(format(1 << $cpu, 'b'))")
    cat >"$dir/nginx.conf" <<CONF
daemon off;
master_process on;
$user
worker_processes 1;
worker_cpu_affinity $mask;
error_log $dir/error.log;
pid $dir/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000000;
  client_body_temp_path $dir/body; proxy_temp_path $dir/proxy; fastcgi_temp_path $dir/fcgi;
  uwsgi_temp_path $dir/uwsgi; scgi_temp_path $dir/scgi;
  server { listen 127.0.0.1:$port backlog=4096; root $dir/html; }
}
CONF
    taskset -c "$cpu" "$NGINX" -c "$dir/nginx.conf" -p "$dir" &
    NGINX_PID=$!
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

quartiles() { sort -g | awk '{a[NR]=$1} END {printf "%s %s", a[int((NR+3)/4)], a[int((3*NR+1)/4)]}'; }
