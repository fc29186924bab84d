# Sourced by the tests that start `htm serve --port 0`: the address it printed in LOG, waiting up
# to 10 s for it; fails (status 1) when it printed none.
#   BASE=$(serve_base serve.log) || { echo "FAIL: htm serve did not start: $(cat serve.log)"; exit 1; }
serve_base() {
  for _ in $(seq 100); do
    grep -q 'http://' "$1" && break
    sleep 0.1
  done
  local base
  base=$(grep -o 'http://[^/ ]*' "$1" | head -1)
  [[ -n $base ]] && echo "$base"
}
