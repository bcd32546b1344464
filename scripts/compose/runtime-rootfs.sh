#!/usr/bin/env bash
# runtime-rootfs.sh OUT EXECUTABLE...: lays out in OUT the whole file system of the runtime image (Dockerfile, stage
# 2 starts from scratch): the executables, stripped, in OUT/usr/local/bin; every shared library they load, at the
# path it is loaded from here (the Swift runtime, Foundation with its ICU data, libpq and its dependencies, glibc and
# the dynamic loader); the time zone rules; an unprivileged user; /tmp. Then checks, inside OUT, that the dynamic
# loader finds every library of every executable. Run in the build stage, which has the same Debian and toolchain
# the executables were linked against.
set -euo pipefail
out=$1
shift
mkdir -p "$out/usr/local/bin" "$out/etc" "$out/tmp"
chmod 1777 "$out/tmp"

libraries=()
for executable in "$@"; do
    install -m 755 "$executable" "$out/usr/local/bin/"
    strip "$out/usr/local/bin/$(basename "$executable")"
    # `ldd` prints "name => /path (address)" for each library and "/path (address)" for the loader.
    while read -r library; do
        libraries+=("$library")
    done < <(ldd "$executable" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
for library in $(printf '%s\n' "${libraries[@]}" | sort -u); do
    cp --dereference --parents "$library" "$out/"
done

# Users' local days and ISO weeks need the IANA rules (Foundation's TimeZone reads /usr/share/zoneinfo); the
# leap-second variants are not used.
mkdir -p "$out/usr/share"
cp -a /usr/share/zoneinfo "$out/usr/share/"
rm -rf "$out/usr/share/zoneinfo/right"

cat >"$out/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/usr/sbin/nologin
habitflow:x:10001:10001:HabitFlow:/nonexistent:/usr/sbin/nologin
PASSWD
cat >"$out/etc/group" <<'GROUP'
root:x:0:
habitflow:x:10001:
GROUP
echo 'hosts: files dns' >"$out/etc/nsswitch.conf"

# Every executable's libraries resolve inside OUT (the loader lists them, "not found" for any missing).
loader=$(ldd "$1" | awk '$1 ~ /^\/.*ld-linux/ { print $1 }')
for executable in "$@"; do
    listing=$(chroot "$out" "$loader" --list "/usr/local/bin/$(basename "$executable")")
    if grep -q 'not found' <<<"$listing"; then
        echo "runtime-rootfs.sh: $(basename "$executable") misses libraries in the image:" >&2
        grep 'not found' <<<"$listing" >&2
        exit 1
    fi
done
for folder in "$out" "$out/usr/local/bin"; do du -sh "$folder"; done | sed "s/^/runtime-rootfs.sh: /"
