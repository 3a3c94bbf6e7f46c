#!/usr/bin/env bash
# tests/layers.sh — check the layer table of the Makefile against the code.
#
# usage: tests/layers.sh [-m MAKEFILE] [-s SOURCE_ROOT] OBJ_DIR
#
# The table is the block of lines "#   dir/  [libcfs_x.a]  -> dir/ ... [syslibs]"
# in the Makefile's opening comment: each layer (a source folder) may use
# itself, the folders after its arrow, and the system libraries in brackets
# (c, xxhash, uring, fuse3, blkid, rbd, rados: what -l<name> links). For every layer this
# checks, on the objects of its .c files under OBJ_DIR (the build's obj/):
#   - symbols: each undefined symbol is defined in the layer itself, in a
#     layer it may use, or in one of its system libraries (nm);
#   - includes: each #include "dir/x.h" names its own folder or one it may
#     use; each #include <...> of a system library's header, a library it
#     may use;
#   - circles: the layer's modules (objects) do not call each other in a
#     circle, unless its line says "(circles: ...)".
# Prints each violation and "layers: ... ok" or exits 1. make check runs it.
set -euo pipefail
export LC_ALL=C

makefile=Makefile
src=.
while getopts m:s: opt; do
	case $opt in
	m) makefile=$OPTARG ;;
	s) src=$OPTARG ;;
	*) echo "usage: $0 [-m MAKEFILE] [-s SOURCE_ROOT] OBJ_DIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { echo "usage: $0 [-m MAKEFILE] [-s SOURCE_ROOT] OBJ_DIR" >&2; exit 2; }
objdir=$1
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The headers of each system library, for the #include <...> check.
declare -A syshdr=([xxhash]='xxhash.h' [uring]='liburing.h|liburing/.*' [fuse3]='fuse.*\.h'
	[blkid]='blkid.h|blkid/blkid.h' [rbd]='rbd/.*' [rados]='rados/.*')

# ---- the table ---------------------------------------------------------------
layers=()
declare -A allowed syslibs circles
while IFS= read -r line; do
	[[ $line =~ ^#\ +([a-z0-9_/]+/)\ +(libcfs_[a-z0-9_]+\.a\ +)?-\>\ *([^[]*)\[([^]]*)\](.*)$ ]] || continue
	l=${BASH_REMATCH[1]}
	layers+=("$l")
	allowed[$l]="$l ${BASH_REMATCH[3]}"
	syslibs[$l]=${BASH_REMATCH[4]}
	[[ ${BASH_REMATCH[5]} == *"(circles"* ]] && circles[$l]=1
done < <(sed -n '1,/^[^#]/p' "$makefile")
[ ${#layers[@]} -gt 0 ] || { echo "layers: no layer table in $makefile" >&2; exit 2; }

fail=0
violation() { echo "layers: $*"; fail=1; }

# ---- symbols: who defines what -----------------------------------------------
declare -A objs_of layer_of_obj
for l in "${layers[@]}"; do
	objs=()
	for c in "$src/$l"*.c; do
		[ -e "$c" ] || continue
		o=$objdir/$l$(basename "${c%.c}").o
		[ -e "$o" ] || { echo "layers: $o missing (build first)" >&2; exit 2; }
		objs+=("$o")
		layer_of_obj[$o]=$l
	done
	objs_of[$l]="${objs[*]}"
done

# symbol -> defining object, over every layer
defs=$tmp/defs
for l in "${layers[@]}"; do
	for o in ${objs_of[$l]}; do
		nm --defined-only -g "$o" | awk -v o="$o" 'NF == 3 { print $3, o }'
	done
done | sort -u -k1,1 >"$defs"

# The dynamic symbols of a system library (following a linker script's GROUP).
sys_symbols() {
	local f files=() p
	f=$("$cc" -print-file-name="lib$1.so")
	if [ -e "$f" ] && [ "$(head -c 4 "$f" | tail -c 3)" != ELF ]; then
		for p in $(sed -n 's/^[[:space:]]*GROUP[[:space:]]*(//p' "$f" | grep -o '/[^ )]*'); do
			files+=("$p")
		done
	else
		files=("$f")
	fi
	for p in "${files[@]}"; do
		case $p in
		*.a) nm --defined-only -g "$p" 2>/dev/null | awk 'NF == 3 { print $3 }' ;;
		*) nm -D --defined-only "$p" 2>/dev/null | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' ;;
		esac
	done | sort -u
}
# The compiler's own helpers (libgcc: __popcountdi2, ...) are every layer's.
nm --defined-only -g "$("$cc" -print-libgcc-file-name)" 2>/dev/null | awk 'NF == 3 { print $3 }' |
	sort -u >"$tmp/toolchain"
# Every library of the table and every one we know headers of: a symbol from
# a library no layer may link is still named.
all_sys=$( (for l in "${layers[@]}"; do echo ${syslibs[$l]}; done; echo c "${!syshdr[@]}") |
	tr ' ' '\n' | grep . | sort -u)
for s in $all_sys; do
	sys_symbols "$s" >"$tmp/sys-$s"
	[ -s "$tmp/sys-$s" ] || { echo "layers: no symbols found for -l$s" >&2; exit 2; }
done

checked_syms=0
for l in "${layers[@]}"; do
	edges=$tmp/edges-${l//\//_}
	: >"$edges"
	for o in ${objs_of[$l]}; do
		echo "$o $o" >>"$edges"
		nm -u "$o" | awk '{ print $NF }' | sort -u >"$tmp/undef"
		# symbol, defining object (or nothing)
		join -a1 "$tmp/undef" "$defs" >"$tmp/resolved"
		while read -r sym def; do
			checked_syms=$((checked_syms + 1))
			if [ -n "$def" ]; then
				dl=${layer_of_obj[$def]}
				if [ "$dl" = "$l" ]; then
					echo "$o $def" >>"$edges"
				elif [[ " ${allowed[$l]} " != *" $dl "* ]]; then
					violation "${o#"$objdir"/} uses $sym of $dl, which $l may not use"
				fi
				continue
			fi
			case $sym in
			__asan_* | __ubsan_* | __tsan_* | __sanitizer_* | __lsan_* | _GLOBAL_OFFSET_TABLE_) continue ;;
			esac
			grep -qxF "$sym" "$tmp/toolchain" && continue
			ok=
			for s in ${syslibs[$l]}; do
				if grep -qxF "$sym" "$tmp/sys-$s"; then ok=1; break; fi
			done
			[ -n "$ok" ] && continue
			from=
			for s in $all_sys; do grep -qxF "$sym" "$tmp/sys-$s" && from="$from -l$s"; done
			if [ -n "$from" ]; then
				violation "${o#"$objdir"/} uses $sym from$from, which $l may not link"
			else
				violation "${o#"$objdir"/} uses $sym, defined in no layer and no library of the table"
			fi
		done <"$tmp/resolved"
	done
	# ---- circles between the modules of the layer ------------------------
	if [ -z "${circles[$l]:-}" ] && ! tsort "$edges" >/dev/null 2>"$tmp/tsort"; then
		violation "modules of $l call each other in a circle:" \
			"$(grep -v 'input contains a loop' "$tmp/tsort" | sed "s|.*$objdir/||" | awk '!seen[$0]++' | tr '\n' ' ')"
	fi
done

# ---- includes ----------------------------------------------------------------
checked_incs=0
for l in "${layers[@]}"; do
	for f in "$src/$l"*.[ch]; do
		[ -e "$f" ] || continue
		while IFS=: read -r n inc; do
			checked_incs=$((checked_incs + 1))
			if [[ $inc =~ ^\"([^\"]+)\" ]]; then
				target=${BASH_REMATCH[1]}
				dir=${target%/*}/
				[[ $target == */* ]] || dir=$l
				[[ " ${allowed[$l]} " == *" $dir "* ]] ||
					violation "${f#"$src"/}:$n includes \"$target\" of $dir, which $l may not use"
			elif [[ $inc =~ ^\<([^\>]+)\> ]]; then
				target=${BASH_REMATCH[1]}
				for s in "${!syshdr[@]}"; do
					[[ $target =~ ^(${syshdr[$s]})$ ]] || continue
					[[ " ${syslibs[$l]} " == *" $s "* ]] ||
						violation "${f#"$src"/}:$n includes <$target> of -l$s, which $l may not link"
				done
			fi
		done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]' "$f" |
			sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*/\1:/')
	done
done

[ $fail -eq 0 ] || exit 1
echo "layers: ${#layers[@]} layers, $checked_syms symbols, $checked_incs includes: ok"
