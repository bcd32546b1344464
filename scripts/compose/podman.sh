# Podman without a registry, for scripts/compose-check. Source it (after scripts/lib/common.sh).
#
# Podman reads only our containers.conf and storage.conf (beside this file): its images, containers, volumes and
# networks live under /var/lib/habitflow/containers and /run/habitflow/containers, apart from any other podman. The
# base images are made here once and kept: Debian bookworm (debootstrap from the Debian mirror, `podman import`), a
# Swift build image from the installed toolchain, and a Postgres 15 image that starts like the official one.

COMPOSE_DIR=$HABITFLOW_ROOT/scripts/compose
export CONTAINERS_CONF=$COMPOSE_DIR/containers.conf
export CONTAINERS_STORAGE_CONF=$COMPOSE_DIR/storage.conf
# What the check needs on top of scripts/bootstrap's packages: podman with runc, its network stack (netavark, its DNS
# aardvark-dns, iptables, iproute2) and debootstrap. docker-compose is in scripts/bootstrap already.
COMPOSE_PACKAGES=(podman runc netavark aardvark-dns iptables iproute2 conmon debootstrap)
# Where buildah keeps the Dockerfile's build cache mount (the Swift build folder between product builds).
BUILD_CACHE_DIR=/var/tmp/buildah-cache/habitflow-swift-release
# Where debootstrap and apt inside the images fetch Debian from.
HABITFLOW_DEBIAN_MIRROR=${HABITFLOW_DEBIAN_MIRROR:-http://deb.debian.org/debian}
HABITFLOW_DEBIAN_SECURITY_MIRROR=${HABITFLOW_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# The local base images (names: localhost/habitflow-base/...).
DEBIAN_IMAGE=localhost/habitflow-base/debian:bookworm-slim
POSTGRES_IMAGE=localhost/habitflow-base/postgres:15-bookworm
# SWIFT_IMAGE is set by swift_toolchain (named after the toolchain's version).

# Runs a heavy command at the lowest priority: the machine's cores are shared.
low() { nice -n 19 "$@"; }

podman_image_exists() { podman image exists "$1"; }

# A base image carries the hash of what it was made from (label habitflow.inputs), so that a change to its
# Containerfile, its scripts or the image below it makes it again.
inputs_hash() { sha256sum | cut -c1-16; }
image_inputs() { podman image inspect --format '{{index .Labels "habitflow.inputs"}}' "$1" 2>/dev/null || true; }
# base_image_current IMAGE HASH: whether IMAGE exists and was made from HASH.
base_image_current() { [[ "$(image_inputs "$1")" == "$2" ]]; }

# swift_toolchain: TOOLCHAIN_ROOT (the folder holding the installed toolchain's usr/) and SWIFT_IMAGE.
swift_toolchain() {
    local swift version
    swift=$(readlink -f "$(command -v swift)")
    TOOLCHAIN_ROOT=${swift%/usr/bin/*}
    if [[ ! -x "$TOOLCHAIN_ROOT/usr/bin/swift" ]]; then
        echo "compose: cannot find the Swift toolchain's root from $swift" >&2
        return 1
    fi
    version=$(swift --version 2>/dev/null | sed -n 's/.*Swift version \([0-9][0-9.]*\).*/\1/p' | head -1)
    SWIFT_IMAGE=localhost/habitflow-base/swift:${version:-unknown}-bookworm
}

# make_debian_image: Debian bookworm like the official debian:bookworm-slim, from the Debian mirror: a minbase
# debootstrap, imported, then updated (security suite), stripped of documentation and apt's lists, and flattened into
# one layer.
make_debian_image() {
    local work raw=localhost/habitflow-base/debian-raw:bookworm container=habitflow-base-debian-slim
    work=$(mktemp -d /var/tmp/habitflow-debootstrap.XXXXXX)
    log "debootstrap --variant=minbase bookworm (from $HABITFLOW_DEBIAN_MIRROR)"
    if ! low debootstrap --variant=minbase bookworm "$work/rootfs" "$HABITFLOW_DEBIAN_MIRROR" \
        >"$work/debootstrap.log" 2>&1; then
        tail -20 "$work/debootstrap.log" >&2
        rm -rf "$work"
        return 1
    fi
    # The container runtime provides these.
    rm -f "$work/rootfs/etc/hostname" "$work/rootfs/etc/resolv.conf"
    tar -C "$work/rootfs" -c . | podman import --quiet - "$raw" >/dev/null
    rm -rf "$work"
    podman rm --force --ignore "$container" >/dev/null
    low podman run --name "$container" --network host \
        --env MIRROR="$HABITFLOW_DEBIAN_MIRROR" --env SECURITY_MIRROR="$HABITFLOW_DEBIAN_SECURITY_MIRROR" \
        "$raw" bash -euo pipefail -c '
            rm -f /etc/apt/sources.list
            cat >/etc/apt/sources.list.d/debian.sources <<SOURCES
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
            # What the slim images leave out, for every package installed later too.
            cat >/etc/dpkg/dpkg.cfg.d/slim <<EXCLUDES
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EXCLUDES
            # No package files or caches kept after an install.
            clean="rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin"
            cat >/etc/apt/apt.conf.d/docker-clean <<CLEAN
DPkg::Post-Invoke { "$clean || true"; };
APT::Update::Post-Invoke { "$clean || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CLEAN
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get upgrade -y -qq >/dev/null
            apt-get clean
            rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/lib/dpkg/*-old /var/log/*.log \
                /var/log/apt/* /usr/share/man/* /usr/share/info/* /usr/share/groff/* /usr/share/lintian/* \
                /usr/share/locale/*
            find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
            find /usr/share/doc -mindepth 1 -type d -empty -delete
        '
    podman export "$container" |
        podman import --quiet --change 'CMD ["bash"]' --change "LABEL habitflow.inputs=$DEBIAN_INPUTS" \
            - "$DEBIAN_IMAGE" >/dev/null
    podman rm "$container" >/dev/null
    podman rmi "$raw" >/dev/null
}

# make_swift_image: the Swift build image from the installed toolchain (swift/Containerfile).
make_swift_image() {
    log "Swift image from the toolchain in $TOOLCHAIN_ROOT"
    low podman build --network host --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE" --label "habitflow.inputs=$SWIFT_INPUTS" \
        --volume "$TOOLCHAIN_ROOT:/toolchain:ro" --file "$COMPOSE_DIR/swift/Containerfile" --tag "$SWIFT_IMAGE" \
        "$COMPOSE_DIR/swift" >"$BASE_IMAGE_LOG" 2>&1 || { tail -30 "$BASE_IMAGE_LOG" >&2; return 1; }
}

# make_postgres_image: Debian's Postgres 15 started like the official image (postgres/Containerfile).
make_postgres_image() {
    log "Postgres 15 image"
    low podman build --network host --build-arg DEBIAN_IMAGE="$DEBIAN_IMAGE" \
        --label "habitflow.inputs=$POSTGRES_INPUTS" --file "$COMPOSE_DIR/postgres/Containerfile" \
        --tag "$POSTGRES_IMAGE" "$COMPOSE_DIR/postgres" >"$BASE_IMAGE_LOG" 2>&1 ||
        { tail -30 "$BASE_IMAGE_LOG" >&2; return 1; }
}

# ensure_base_images: makes the base images that are missing or out of date (all of them with REBUILD_BASE=true);
# sets BASE_IMAGES_SECONDS to the time it took (0 when all were there) and BASE_IMAGES_MADE to what it made, with
# the seconds each took.
ensure_base_images() {
    local started=$SECONDS rebuild=${REBUILD_BASE:-false} image_started
    swift_toolchain
    BASE_IMAGE_LOG=$(mktemp /tmp/habitflow-base-image.XXXXXX)
    BASE_IMAGES_MADE=()
    if $rebuild; then
        podman rmi --force --ignore "$POSTGRES_IMAGE" "$SWIFT_IMAGE" "$DEBIAN_IMAGE" >/dev/null
    fi
    DEBIAN_INPUTS=$({
        declare -f make_debian_image
        echo "$HABITFLOW_DEBIAN_MIRROR $HABITFLOW_DEBIAN_SECURITY_MIRROR"
    } | inputs_hash)
    if ! base_image_current "$DEBIAN_IMAGE" "$DEBIAN_INPUTS"; then
        image_started=$SECONDS
        make_debian_image
        BASE_IMAGES_MADE+=("Debian $((SECONDS - image_started)) s")
    fi
    SWIFT_INPUTS=$({ echo "$DEBIAN_INPUTS"; swift --version 2>/dev/null; cat "$COMPOSE_DIR/swift/Containerfile"; } |
        inputs_hash)
    if ! base_image_current "$SWIFT_IMAGE" "$SWIFT_INPUTS"; then
        image_started=$SECONDS
        make_swift_image
        BASE_IMAGES_MADE+=("Swift $((SECONDS - image_started)) s")
    fi
    POSTGRES_INPUTS=$({ echo "$DEBIAN_INPUTS"; cat "$COMPOSE_DIR"/postgres/*; } | inputs_hash)
    if ! base_image_current "$POSTGRES_IMAGE" "$POSTGRES_INPUTS"; then
        image_started=$SECONDS
        make_postgres_image
        BASE_IMAGES_MADE+=("Postgres $((SECONDS - image_started)) s")
    fi
    rm -f "$BASE_IMAGE_LOG"
    BASE_IMAGES_SECONDS=$((SECONDS - started))
}

# git_mirror_arguments: podman build arguments that give the build stage this machine's way to the Swift packages:
# the git URL rewrites (url.<base>.insteadOf) whose base is a local folder, as the build's /etc/gitconfig, and each
# such folder mounted read-only at the same path. Sets GIT_MIRROR_ARGUMENTS; writes the file into $1 (a folder).
git_mirror_arguments() {
    local folder=$1 key value base
    GIT_MIRROR_ARGUMENTS=()
    : >"$folder/gitconfig"
    while read -r key value; do
        base=${key#url.}
        base=${base%.insteadof}
        [[ "$base" == /* && -d "$base" ]] || continue
        git config --file "$folder/gitconfig" --add "url.$base.insteadOf" "$value"
        [[ " ${GIT_MIRROR_ARGUMENTS[*]} " == *" $base:$base:ro "* ]] ||
            GIT_MIRROR_ARGUMENTS+=(--volume "$base:$base:ro")
    done < <(git config --get-regexp '^url\..*\.insteadof$' || true)
    if ((${#GIT_MIRROR_ARGUMENTS[@]})); then
        GIT_MIRROR_ARGUMENTS+=(--volume "$folder/gitconfig:/etc/gitconfig:ro")
    fi
}
