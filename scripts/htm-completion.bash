# Bash completion for htm (docs/cli.md): `source scripts/htm-completion.bash`, or install it as
# /usr/share/bash-completion/completions/htm (cmake --install does). It asks the htm being
# completed (the line's first word, else the one on PATH) rather than keeping lists of its own:
#   htm <TAB>                          the commands (htm --help)
#   htm run --<TAB>                    that command's options (htm run --help)
#   htm run FILE --set policy.plugin=<TAB>   the plugins of that kind (htm plugins); also
#                                      --set loss.NAME.plugin= and --sweep KIND.plugin=
#   htm run FILE --variant <TAB>       the variants of the experiment file on the line (htm config,
#                                      with the line's --sweep options; [variants.NAME] headers if
#                                      that fails)
# Anything else completes file names.

# The htm the line runs.
_htm_binary() {
  local first=${COMP_WORDS[0]/#\~/$HOME}
  if [[ $first == */* && -x $first ]]; then printf '%s\n' "$first"; else printf 'htm\n'; fi
}

# What `htm ARGS...` prints, in _htm_answer: asked once per shell and kept (each call of htm
# loads libtorch, about half a second). Called outside $(...), whose subshell would forget it.
declare -gA _htm_cache
_htm_ask() {
  local key
  key="$(_htm_binary)|${HTM_PLUGIN_PATH-}|$*"
  [[ -n ${_htm_cache[$key]-} ]] || _htm_cache[$key]=$("$(_htm_binary)" "$@" 2>/dev/null)
  _htm_answer=${_htm_cache[$key]}
}

# Plugins of one kind (policy, merge, loss, adapter, dataset), or of every kind, from _htm_answer.
_htm_plugins() {
  awk -v kind="$1" '
    /^$/ { exit }
    NR > 2 && (kind == "" || $1 == kind) { print $2 }' <<<"$_htm_answer"
}

# The variants of the experiment file on the line.
_htm_variants() {
  local file="" i args=()
  for ((i = 2; i < ${#COMP_WORDS[@]}; i++)); do
    local w=${COMP_WORDS[i]}
    if [[ -z $file && $w == *.toml && -f ${w/#\~/$HOME} ]]; then file=${w/#\~/$HOME}; fi
    if [[ $w == --sweep && $((i + 1)) -lt ${#COMP_WORDS[@]} ]]; then
      # --sweep k=v1,v2 arrives as "k" "=" "v1,v2" where '=' breaks words.
      local value=${COMP_WORDS[i + 1]}
      [[ ${COMP_WORDS[i + 2]} == = ]] && value+="=${COMP_WORDS[i + 3]}"
      args+=(--sweep "$value")
    fi
  done
  [[ -n $file ]] || return 0
  local names
  names=$("$(_htm_binary)" config "$file" --no-estimate "${args[@]}" 2>/dev/null |
    sed -nE 's/^# variant (.*) \(config hash [0-9a-f]+\)$/\1/p')
  [[ -n $names ]] || names=$(sed -nE 's/^[[:space:]]*\[variants\.("?)([^]"]+)\1\][[:space:]]*(#.*)?$/\2/p' "$file")
  printf '%s\n' "$names"
}

_htm() {
  COMPREPLY=()
  local cword=$COMP_CWORD cur=${COMP_WORDS[COMP_CWORD]} prev="" command=${COMP_WORDS[1]}
  ((cword > 0)) && prev=${COMP_WORDS[cword - 1]}
  if ((cword == 1)); then
    local commands
    _htm_ask --help
    commands=$(sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p' <<<"$_htm_answer")
    mapfile -t COMPREPLY < <(compgen -W "$commands --help --version" -- "$cur")
    return 0
  fi
  # KEY=VALUE after --set or --sweep: whole ("k=v"), or split at '=' ("k" "=" "v", or "k" "=").
  local key="" value="" option="" whole=""
  if [[ $cur == *=* && ($prev == --set || $prev == --sweep) ]]; then
    key=${cur%%=*} value=${cur#*=} option=$prev whole=1
  elif [[ $cur == = ]] && ((cword >= 2)); then
    key=$prev option=${COMP_WORDS[cword - 2]}
  elif [[ $prev == = ]] && ((cword >= 3)); then
    key=${COMP_WORDS[cword - 2]} value=$cur option=${COMP_WORDS[cword - 3]}
  fi
  if [[ ($option == --set || $option == --sweep) && $key == *.plugin ]]; then
    local kind=${key%.plugin}
    [[ $kind == loss.* ]] && kind=loss
    local plugins
    _htm_ask plugins
    plugins=$(_htm_plugins "$kind")
    mapfile -t COMPREPLY < <(compgen -W "$plugins" -- "$value")
    # Completing the whole "k=v" word (no '=' in COMP_WORDBREAKS): the key stays in front.
    if [[ -n $whole ]]; then COMPREPLY=("${COMPREPLY[@]/#/$key=}"); fi
    return 0
  fi
  if [[ $prev == --variant || $prev == -v ]]; then
    local variants
    variants=$(_htm_variants)
    mapfile -t COMPREPLY < <(compgen -W "$variants" -- "$cur")
    return 0
  fi
  if [[ $cur == -* ]]; then
    local options
    _htm_ask "$command" --help
    options=$(grep -oE -- '--[a-z][a-z-]*' <<<"$_htm_answer" | sort -u)
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
    return 0
  fi
  return 0  # file names (complete -o default)
}

complete -o default -F _htm htm
