#!/usr/bin/env bash
# fs_layers.sh - no file of fs/ calls up: each .c calls functions only of
# the files listed before it in fs/fs.h's layer list (lowest first), read
# from the object files' symbol tables (what is called, not what is
# declared). The list in fs.h is the rule; a new call against it, or a .c
# the list does not name, fails here. killpriv.c, beside the layers with
# the cache managers, interposes writev: forget.c's writev reaches it by
# name, not as a call into a layer.
T_TIMEOUT=${T_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
t_require_cmd nm
objs=$NVCACHE_BUILD/fs/libnvfs.a.p
[ -d "$objs" ] || t_fail "no object files in $objs"
hdr=$T_ROOT/fs/fs.h

# rank of each file: the order of " *   name.c" lines in the layer list;
# the managers beside them rank 0
declare -A rank def
rank[stripe]=0 rank[cache_local]=0 rank[killpriv]=0
n=0
while read -r f; do
  n=$((n + 1)); rank[$f]=$n
done < <(sed -n '/Layers, lowest first/,/Beside them/p' "$hdr" |
         sed -n 's/^ \*   \([a-z_]*\)\.c .*/\1/p')
[ "$n" -ge 8 ] || t_fail "fs.h's layer list not found ($n files)"

files=("$objs"/*.o "$NVCACHE_BUILD/fs/nvcachefs.p/main.c.o")
for o in "${files[@]}"; do
  f=$(basename "$o" .c.o)
  [ -n "${rank[$f]:-}" ] || t_fail "fs/$f.c is not in fs.h's layer list"
  for s in $(nm --defined-only "$o" | awk '$2 ~ /^[TDR]$/ {print $3}'); do
    def[$s]=$f
  done
done

bad=0 edges=0
for o in "${files[@]}"; do
  f=$(basename "$o" .c.o)
  for s in $(nm -u "$o" | awk '{print $2}'); do
    t=${def[$s]:-}
    [ -z "$t" ] || [ "$t" = "$f" ] || [ "$s" = writev ] && continue
    edges=$((edges + 1))
    if [ "${rank[$t]}" -ge "${rank[$f]}" ]; then
      t_log "fs/$f.c calls $s of fs/$t.c, which is not below it"
      bad=1
    fi
  done
done
[ "$edges" -gt 20 ] || t_fail "only $edges calls between fs/ files found: the symbol tables were not read"
[ $bad = 0 ] || t_fail "fs/ calls up (see above; fs/fs.h lists the layers)"
t_log "$edges calls between fs/ files, none up"
