#!/usr/bin/env bash
# ctest cli.completion: scripts/htm-completion.bash, called as bash calls it (COMP_WORDS,
# COMP_CWORD set, COMPREPLY read back): commands, a command's options, plugins of a kind after
# --set KIND.plugin= (split at '=' as readline splits, and whole), and the variants of the
# experiment file on the line.
set -uo pipefail
HTM=$1
SRC=$2
source "$SRC/scripts/htm-completion.bash"
fails=0
# expect WANTED WORD... : COMP_WORDS = (HTM WORD...), the cursor on the last word; COMPREPLY,
# sorted, must be WANTED. In this shell, not a subshell: the script's cache of htm's answers stays.
expect() {
  local wanted=$1 got
  shift
  COMP_WORDS=("$HTM" "$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  _htm
  got=$(printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
  if [[ $got != "$wanted" ]]; then
    echo "FAIL: htm $* <TAB>: wanted '$wanted', got '$got'"
    fails=$((fails + 1))
  fi
}
COMP_WORDS=("$HTM")  # htm's own answers, through the script's cache (each htm call loads libtorch)
_htm_ask --help
commands=$(sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p' <<<"$_htm_answer" | sort | tr '\n' ' ' | sed 's/ $//')
[[ $commands == *export*run* ]] || { echo "FAIL: no commands in htm --help: $commands"; exit 1; }
expect "$(printf '%s\n' $commands --help --version | sort | tr '\n' ' ' | sed 's/ $//')" ""
expect "$(printf '%s\n' $commands | grep '^r' | tr '\n' ' ' | sed 's/ $//')" r
[[ $commands == *" run runs "* ]] || { echo "FAIL: htm --help lacks run or runs: $commands"; exit 1; }
expect "--variant --verbose" run x.toml --v
_htm_ask plugins
# kind KIND [PREFIX]: htm plugins' names of that kind, sorted, on one line.
kind() { awk -v kind="$1" '/^$/ { exit } NR > 2 && $1 == kind { print $2 }' <<<"$_htm_answer" | grep "^${2-}" |
  sort | tr '\n' ' ' | sed 's/ $//'; }
policies=$(kind policy)
[[ $policies == *learned*random* ]] || { echo "FAIL: no policies in htm plugins: $policies"; exit 1; }
expect "$policies" run x.toml --set policy.plugin =
expect "$(kind policy r)" run x.toml --set policy.plugin = r
expect "$(kind policy r | sed -E 's/(^| )/\1policy.plugin=/g')" run x.toml --set policy.plugin=r
expect "$(kind merge)" run x.toml --set merge.plugin = ""
expect "$(kind loss ms)" run x.toml --set loss.main.plugin = ms
[[ $(kind policy r) == *random* && $(kind merge) == *mlp* && $(kind loss ms) == *mse* ]] ||
  { echo "FAIL: htm plugins lacks random, mlp or mse"; exit 1; }
expect "narrow wide" run "$SRC/tests/data/tiny_variants.toml" --variant ""
expect "narrow" config "$SRC/tests/data/tiny_variants.toml" -v n
expect "train.lr=0.001 train.lr=0.002" run "$SRC/tests/data/tiny.toml" --sweep train.lr = 1e-3,2e-3 --variant ""
# An experiment htm cannot resolve still offers its [variants.NAME] headers.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[policy]\nplugin = "nonexistent"\n[variants.alpha]\n[variants."beta"]  # quoted\n' > "$work/broken.toml"
expect "alpha beta" run "$work/broken.toml" --variant ""
((fails == 0)) || exit 1
echo "completion test passed"
