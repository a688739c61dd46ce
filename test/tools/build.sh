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
# Usage: test/tools/build.sh [TOOL...]     (no arguments: every tool)
#   OPENBAO_OPERATOR_CACHE  cache root (default $HOME/.cache/openbao-operator)
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
	echo "controller-gen|controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|v0.23.0|-s -w|"
	echo "kustomize|kustomize|sigs.k8s.io/kustomize/kustomize/v5|v5.8.2|-s -w|"
	echo "promtool|promtool|github.com/prometheus/prometheus/cmd/promtool|v0.316.0|-s -w|"
}

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
	trap 'rm -f "$cache"/tools/*/*.tmp.$$' EXIT
	local want=" $* " line name rest total_start known
	known=" $(recipes | cut -d'|' -f1 | tr '\n' ' ')"
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
		IFS='|' read -r module pkg version ldflags tags <<<"$rest"
		build_one "$name" "$module" "$pkg" "$version" "$ldflags" "$tags"
	done < <(recipes)
	echo "tools: ready in $(($(date +%s) - total_start))s (cache $cache/tools)"
}

main "$@"
