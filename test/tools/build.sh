#!/usr/bin/env bash
# Builds the pinned tool binaries the tests use into a cache outside the clone
# and links each as ./bin/<name>.
#
# Every binary is keyed by a hash of its wrapper module (go.mod, go.sum, Go
# sources), its build recipe and the Go version, so a second run finds it and
# builds nothing, and a change to a pin builds a fresh copy beside the old one.
# A binary is written to a temporary name and renamed into place, so an
# interrupted build leaves nothing that looks finished.
#
# Usage: test/tools/build.sh [TOOL...]     (no arguments: every default tool)
#   OPENBAO_OPERATOR_CACHE  cache root (default $HOME/.cache/openbao-operator)
#
# The OLM and packaging tools are built only when named (the bundle and OLM
# targets name them): they cost minutes of a cold build that `make tools`
# should not pay for a machine that never packages.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tools_dir="$root/test/tools"
cache="${OPENBAO_OPERATOR_CACHE:-$HOME/.cache/openbao-operator}"
bin_dir="$root/bin"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly

k8s_version=v1.33.13
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=33 \
-X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitTreeState=clean"

# name | wrapper module | package | version | ldflags | build tags
recipes() {
	local c
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
		echo "$c|kubernetes|k8s.io/kubernetes/cmd/$c|$k8s_version|$k8s_ldflags|"
	done
	echo "etcd|etcd|go.etcd.io/etcd/server/v3|v3.5.21|-s -w|"
	echo "bao|openbao|.|2.4.0|-s -w -X github.com/openbao/openbao/version.fullVersion=2.4.0|"
	echo "bao-config-check|openbao|./cmd/config-check|2.4.0|-s -w|"
	# The same source stamped as another release: the only way to roll a
	# cluster between two versions here (only 2.4.0 is on the module proxy).
	echo "bao-next|openbao|.|2.4.1|-s -w -X github.com/openbao/openbao/version.fullVersion=2.4.1|"
	echo "coredns|coredns|.|v1.15.0|-s -w|"
	echo "minio|minio|github.com/minio/minio|20260212201848|-s -w|"
	echo "fake-gcs-server|fake-gcs-server|github.com/fsouza/fake-gcs-server|v1.56.1|-s -w|"
	echo "pebble|pebble|github.com/letsencrypt/pebble/v2/cmd/pebble|v2.10.1|-s -w|"
	echo "controller-gen|controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|v0.23.0|-s -w|"
	echo "kustomize|kustomize|sigs.k8s.io/kustomize/kustomize/v5|v5.8.2|-s -w|"
	# docs/api.md's generator: `make generate` and `make docs-tools` name it,
	# and docs/api_test.go runs it.
	echo "crd-ref-docs|crd-ref-docs|github.com/elastic/crd-ref-docs|v0.2.0|-s -w|"
	# The release's SBOM generator (`make release`): reads the module list
	# the Go linker stamps into a binary.
	echo "cyclonedx-gomod|cyclonedx-gomod|github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod|v1.10.0|-s -w|"
	# The install chart's README.md from the comments of its values.yaml
	# (`make chart-readme`; helm-charts checks it is current).
	echo "helm-docs|helm-docs|github.com/norwoodj/helm-docs/cmd/helm-docs|v1.14.2|-s -w -X main.version=v1.14.2|"
	# The version stamps are the release Makefile's: `generate bundle` writes
	# Version into the bundle's builder annotation. containers_image_openpgp:
	# containers/image's pure-Go signature backend instead of gpgme (cgo).
	local sdk=github.com/operator-framework/operator-sdk/internal/version
	echo "operator-sdk|operator-sdk|github.com/operator-framework/operator-sdk/cmd/operator-sdk|v1.42.3|-s -w \
-X $sdk.Version=v1.42.3 -X $sdk.GitVersion=v1.42.3 -X $sdk.GitCommit=2016cae87253bef07444dd47c463bdbb27c44c48 \
-X $sdk.KubernetesVersion=v1.33.1 -X $sdk.ImageVersion=v1.42.3|containers_image_openpgp"
	# OLM v0 and opm share one wrapper module and one set of tags, so that the
	# second of them finds most packages in Go's build cache. CGO_ENABLED=0
	# leaves opm's sqlite driver a stub: only the deprecated sqlite index
	# commands need it, never a file-based catalog (serve, render, validate).
	local olm=github.com/operator-framework/operator-lifecycle-manager reg=github.com/operator-framework/operator-registry
	local olm_tags=json1,containers_image_openpgp
	echo "opm|olm|$reg/cmd/opm|v1.64.0|-s -w -X $reg/cmd/opm/version.opmVersion=v1.64.0 \
-X $reg/cmd/opm/version.gitCommit=7474e676de1188793bd9d9bbcc45586dc451390f|$olm_tags"
	echo "grpc_health_probe|olm|github.com/grpc-ecosystem/grpc-health-probe|v0.4.45|-s -w -X main.versionTag=v0.4.45|$olm_tags"
	# Named olm-* in bin/; the OLM image puts them where OLM's manifests expect
	# them (/bin/olm, /bin/catalog, ...).
	for c in operator:cmd/olm catalog-operator:cmd/catalog package-server:cmd/package-server \
		copy-content:cmd/copy-content cpb:util/cpb; do
		echo "olm-${c%%:*}|olm|$olm/${c#*:}|v0.41.0|-s -w -X $olm/pkg/version.OLMVersion=v0.41.0|$olm_tags"
	done
}

# name | package directory under test/tools | version | binaries to link
# Installed from the npm registry with `npm ci`, so the committed
# package-lock.json pins every transitive package too.
npm_recipes() {
	echo "azurite|azurite|3.35.0|azurite-blob"
}

# ensure_npm installs node and npm with apt when they are missing; it fails
# (the caller skips the tool, and its tests skip) when that is not possible.
ensure_npm() {
	if command -v node >/dev/null && command -v npm >/dev/null; then
		return 0
	fi
	local sudo=""
	if [ "$(id -u)" != 0 ]; then
		sudo="sudo -n"
	fi
	if ! command -v apt-get >/dev/null || { [ -n "$sudo" ] && ! sudo -n true 2>/dev/null; }; then
		return 1
	fi
	echo "tools: installing nodejs and npm with apt ..."
	$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
}

install_npm_one() {
	local name=$1 module=$2 version=$3 bins=$4
	local key dir start b
	if ! ensure_npm; then
		echo "tools: $name not installed: node/npm are missing and apt-get cannot install them; its tests will skip" >&2
		return 0
	fi
	key=$({ node --version; echo "$name|$version|$bins"; cat "$tools_dir/$module/package.json" "$tools_dir/$module/package-lock.json"; } | sha256sum | cut -c1-12)
	dir="$cache/tools/$name-$version-$key"
	if [ ! -e "$dir/.done" ]; then
		start=$(date +%s)
		echo "tools: installing $name $version from npm ..."
		rm -rf "$dir.tmp.$$" && mkdir -p "$dir.tmp.$$"
		cp "$tools_dir/$module/package.json" "$tools_dir/$module/package-lock.json" "$dir.tmp.$$/"
		(cd "$dir.tmp.$$" && npm ci --no-audit --no-fund --omit=dev --loglevel=error)
		touch "$dir.tmp.$$/.done"
		rm -rf "$dir" && mv "$dir.tmp.$$" "$dir"
		echo "tools: installed $name $version in $(($(date +%s) - start))s"
	fi
	for b in $bins; do
		ln -sfn "$dir/node_modules/.bin/$b" "$bin_dir/$b"
	done
}

# package | Debian version | binaries under /usr/bin to link
# Taken from Debian's archive where its version serves: the .deb is
# downloaded and unpacked into the cache (nothing installed, no service
# started). Prometheus and promtool from source cost minutes of a cold build
# and about 1 GB of modules; bookworm's 2.42 parses and evaluates every rule
# and query the tests give it.
deb_recipes() {
	echo "prometheus|2.42.0+ds-5+deb12u1|promtool prometheus"
}

# apt_download fetches one exact package version into the current directory,
# refreshing apt's lists once when they do not know it (a fresh machine).
apt_download() {
	local spec=$1 sudo="" sandbox=()
	if [ "$(id -u)" = 0 ]; then
		# apt drops to _apt for downloads, which cannot write into root's cache.
		sandbox=(-o APT::Sandbox::User=root)
	else
		sudo="sudo -n"
	fi
	if apt-get download -qq "${sandbox[@]}" "$spec" 2>/dev/null; then
		return 0
	fi
	echo "tools: apt does not know $spec; refreshing its package lists ..."
	$sudo apt-get update -qq && apt-get download -qq "${sandbox[@]}" "$spec"
}

install_deb_one() {
	local pkg=$1 version=$2 bins=$3
	local dir b start
	dir="$cache/tools/deb-$pkg-$version"
	if [ ! -e "$dir/.done" ]; then
		if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
			echo "tools: $pkg not installed: apt-get and dpkg-deb are missing; its tests will skip" >&2
			return 0
		fi
		start=$(date +%s)
		echo "tools: unpacking $pkg $version from Debian's archive ..."
		rm -rf "$dir.tmp.$$" && mkdir -p "$dir.tmp.$$/deb"
		(cd "$dir.tmp.$$/deb" && apt_download "$pkg=$version")
		dpkg-deb -x "$dir.tmp.$$"/deb/*.deb "$dir.tmp.$$/root"
		rm -rf "$dir.tmp.$$/deb"
		touch "$dir.tmp.$$/.done"
		rm -rf "$dir" && mv "$dir.tmp.$$" "$dir"
		echo "tools: unpacked $pkg $version in $(($(date +%s) - start))s"
	fi
	for b in $bins; do
		ln -sfn "$dir/root/usr/bin/$b" "$bin_dir/$b"
	done
}

# Tools built only when named.
on_demand=" cyclonedx-gomod crd-ref-docs helm-docs operator-sdk opm grpc_health_probe olm-operator olm-catalog-operator olm-package-server olm-copy-content olm-cpb "

# cache_key prints a short hash of everything that decides the binary's bytes.
cache_key() {
	local module=$1 recipe=$2
	{
		go version
		echo "$recipe"
		cd "$tools_dir/$module" && cat go.mod go.sum && find . -name '*.go' -print0 | sort -z | xargs -0r cat
	} | sha256sum | cut -c1-12
}

build_one() {
	local name=$1 module=$2 pkg=$3 version=$4 ldflags=$5 tags=$6
	local key dir out start
	key=$(cache_key "$module" "$name|$pkg|$ldflags|$tags")
	dir="$cache/tools/$name-$version-$key"
	out="$dir/$name"
	if [ ! -x "$out" ]; then
		mkdir -p "$dir"
		start=$(date +%s)
		echo "tools: building $name $version ..."
		(cd "$tools_dir/$module" &&
			go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$out.tmp.$$" "$pkg")
		mv -f "$out.tmp.$$" "$out"
		echo "tools: built $name $version in $(($(date +%s) - start))s"
	fi
	ln -sfn "$out" "$bin_dir/$name"
}

main() {
	mkdir -p "$bin_dir"
	trap 'rm -rf "$cache"/tools/*/*.tmp.$$ "$cache"/tools/*.tmp.$$' EXIT
	local want=" $* " line name rest total_start known
	known=" $({ recipes; npm_recipes; deb_recipes; } | cut -d'|' -f1 | tr '\n' ' ')"
	for name in "$@"; do
		if [[ "$known" != *" $name "* ]]; then
			echo "tools: unknown tool '$name'; known:$known" >&2
			exit 2
		fi
	done
	total_start=$(date +%s)
	while IFS= read -r line; do
		name=${line%%|*}
		rest=${line#*|}
		if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]]; then
			continue
		fi
		if [ $# -eq 0 ] && [[ "$on_demand" == *" $name "* ]]; then
			continue
		fi
		IFS='|' read -r module pkg version ldflags tags <<<"$rest"
		build_one "$name" "$module" "$pkg" "$version" "$ldflags" "$tags"
	done < <(recipes)
	while IFS='|' read -r name module version bins; do
		if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]]; then
			continue
		fi
		install_npm_one "$name" "$module" "$version" "$bins"
	done < <(npm_recipes)
	while IFS='|' read -r name version bins; do
		if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]]; then
			continue
		fi
		install_deb_one "$name" "$version" "$bins"
	done < <(deb_recipes)
	echo "tools: ready in $(($(date +%s) - total_start))s (cache $cache/tools)"
}

main "$@"
