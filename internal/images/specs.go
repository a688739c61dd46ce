package images

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/openbao/operator/internal/wrapper"
)

// NonRootUID is the user every image runs as: numeric, so kubelet can check
// runAsNonRoot without an /etc/passwd, and overridable by the platform
// (OpenShift assigns its own UID; the pod spec never pins one).
const NonRootUID = 65532

var nonRootUser = fmt.Sprintf("%d:%d", NonRootUID, NonRootUID)

// OpenBaoVersion is the release the bao binary is built from; the OpenBao
// image's tag starts with it, so the tag is a version an OpenBaoCluster names.
const OpenBaoVersion = "2.4.0"

// Repositories of the images the local node uses. The "localhost/" prefix
// makes plain that they are never pulled.
const (
	OperatorRepository = "localhost/openbao-operator"
	WrapperRepository  = "localhost/bao-wrapper"
	OpenBaoRepository  = "localhost/openbao"
	PauseRepository    = "localhost/pause"
	CoreDNSRepository  = "localhost/coredns"
)

// Operator is the operator image: the manager at /manager. OpenBao pods
// take bao-wrapper from the Wrapper image, not from this one.
func Operator(managerBin string) Spec {
	return Spec{
		Repository: OperatorRepository,
		Files:      []File{{Path: "/manager", Source: managerBin, Mode: 0o755}},
		User:       nonRootUser,
		Entrypoint: []string{"/manager"},
	}
}

// Wrapper is the bao-wrapper image: /bao-wrapper, which the init container
// of every OpenBao pod copies into a shared volume (`bao-wrapper install`).
// Its tag starts with wrapper.Version, the version the operator's defaults
// name, so a tag says which wrapper it holds.
func Wrapper(wrapperBin string) Spec {
	return Spec{
		Repository: WrapperRepository,
		TagPrefix:  wrapper.Version + "-",
		Files:      []File{{Path: "/bao-wrapper", Source: wrapperBin, Mode: 0o755}},
		User:       nonRootUser,
		Entrypoint: []string{"/bao-wrapper"},
	}
}

// OpenBaoNextVersion is the release bao-next is stamped as: the same
// source as OpenBaoVersion, for rollouts between two versions.
const OpenBaoNextVersion = "2.4.1"

// OpenBao is the OpenBao server image: bao at /bin/bao and the directories
// the pod spec mounts volumes on, owned by the non-root user so the image
// also works with a writable root filesystem.
func OpenBao(baoBin string) Spec { return OpenBaoAt(baoBin, OpenBaoVersion) }

// OpenBaoAt is the OpenBao image of a bao binary stamped as version; the
// tag starts with it.
func OpenBaoAt(baoBin, version string) Spec {
	owned := func(p string, mode int64) Dir { return Dir{Path: p, Mode: mode, UID: NonRootUID, GID: NonRootUID} }
	return Spec{
		Repository: OpenBaoRepository,
		TagPrefix:  version + "-",
		Files:      []File{{Path: "/bin/bao", Source: baoBin, Mode: 0o755}},
		Dirs: []Dir{
			owned("/openbao/config", 0o755),
			owned("/openbao/data", 0o700),
			owned("/openbao/tls", 0o755),
			owned("/openbao/logs", 0o755),
			owned("/home/openbao", 0o755),
			{Path: "/tmp", Mode: 0o1777},
		},
		User:       nonRootUser,
		Entrypoint: []string{"/bin/bao"},
		Cmd:        []string{"server", "-config=/openbao/config"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/openbao", "BAO_ADDR=https://127.0.0.1:8200"},
		WorkingDir: "/home/openbao",
	}
}

// Pause is the pod sandbox image containerd starts for every pod.
func Pause(pauseBin string) Spec {
	return Spec{
		Repository: PauseRepository,
		Files:      []File{{Path: "/pause", Source: pauseBin, Mode: 0o755}},
		User:       nonRootUser,
		Entrypoint: []string{"/pause"},
	}
}

// CoreDNS is the cluster DNS image.
func CoreDNS(corednsBin string) Spec {
	return Spec{
		Repository: CoreDNSRepository,
		Files:      []File{{Path: "/coredns", Source: corednsBin, Mode: 0o755}},
		User:       nonRootUser,
		Entrypoint: []string{"/coredns"},
	}
}

// GoBuild compiles a static binary of pkg (relative to repoRoot) into out.
// Go's build cache makes an unchanged rebuild take about a second.
func GoBuild(repoRoot, pkg, out string) error { return goBuild(repoRoot, pkg, out, "-s -w") }

// OperatorNextVersion is the release a second operator image is stamped
// as, for operator upgrades between two really different images.
const OperatorNextVersion = "0.1.1"

// GoBuildVersion is GoBuild of a main package whose version variable
// (main.version, as the release stamps it) is set to version.
func GoBuildVersion(repoRoot, pkg, out, version string) error {
	return goBuild(repoRoot, pkg, out, "-s -w -X main.version="+version)
}

func goBuild(repoRoot, pkg, out, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+ldflags, "-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}
